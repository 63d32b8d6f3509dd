//! `mana-emu`: a software Microsoft Azure Network Adapter (MANA).
//!
//! * [`verbs`]: the libibverbs + libmana (manadv) seam, exported from
//!   `libmana_emu.so` for `LD_PRELOAD` into a DPDK process.
//! * [`device`]: the device model (queues, doorbells, CQEs, RSS,
//!   offloads, backends, faults, counters) and its device thread, one
//!   module per hardware block; safe Rust that reaches driver memory through
//!   [`mem`] and file descriptors through the private `fd` module.
//! * [`pkt`], [`wire`], [`backend`]: packet handling for the offloads, the
//!   device's view of the wire formats, the ports' backends.
//! * [`doorbell`]: exact doorbell capture (trap-and-emulate) and poll mode.
//! * [`config`], [`sysfs`]: configuration and the fake sysfs trees;
//!   [`mtuwatch`]: the device following the ports' sysfs `mtu` files.
//! * [`control`]: the control socket used by the `mana-emu` CLI.
//! * [`testing`]: a driver-like Rust API for device-model tests.
//! * [`harness`]: helpers to run `dpdk-testpmd` on the emulated device.
//! * [`vmbus`]: a Hyper-V synthetic NIC for DPDK's netvsc PMD, with the
//!   MANA port as its VF; [`uevent`]: hot-plug events for the process.

pub mod backend;
pub mod config;
pub mod control;
pub mod demo;
pub mod device;
pub mod doorbell;
mod fd;
pub mod ffi;
pub mod harness;
pub mod mem;
pub mod mtuwatch;
pub mod pkt;
pub mod sysfs;
pub mod testing;
pub mod uevent;
pub mod verbs;
pub mod vmbus;
pub mod wire;

pub use config::Config;
pub use device::{Counters, Emulator, Fault, Trigger};
