//! `net_mana`: a DPDK poll-mode driver for the Microsoft Azure Network
//! Adapter (MANA), exported to DPDK through a C ABI.
//!
//! The control path goes through libibverbs and libmana; the data path
//! writes GDMA work-queue entries, rings doorbells and polls completion
//! queues itself.

mod consts;
mod csum;
pub mod devargs;
mod diag;
mod ethdev;
pub mod ffi;
mod gate;
mod handoff;
mod intr;
mod log;
mod mp;
mod mr;
pub mod pci;
mod port;
mod probe;
mod queues;
mod reset;
mod ring;
mod rss;
mod rxq;
mod shared;
mod stats;
mod sysfs;
mod txq;
mod verbs;
mod xstats;
