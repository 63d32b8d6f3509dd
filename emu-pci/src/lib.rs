//! `mana-pci`: a MANA virtual function (PCI 1414:00ba) served over
//! vfio-user, which the Linux kernel's `mana` driver in a QEMU guest
//! accepts, and the guest harness that tests it.
//!
//! | Module | What it holds |
//! |---|---|
//! | [`vfio`] | the vfio-user server: region accesses, DMA maps, MSI-X eventfds |
//! | [`pci`] | configuration space, BAR sizes |
//! | [`device`] | the function's state behind one lock |
//! | [`gdma`] | BAR0, the SMC, the HWC, EQs, DMA regions, GDMA requests |
//! | [`mana`] | the Ethernet function: vPort requests, data queues |
//! | [`rdma`] | the RDMA function `mana_ib` drives: adapter, MAC, GIDs |
//! | [`memory`] | guest memory (the one place it is dereferenced) |
//! | [`interrupts`] | MSI-X vectors |
//! | [`ledger`] | requests and answers counted, objects left behind |
//! | [`guest`] | the QEMU guest harness (initramfs, QEMU, console channel) |

pub mod device;
pub mod function;
pub mod gdma;
pub mod guest;
pub mod interrupts;
pub mod ledger;
pub mod logging;
pub mod mana;
pub mod memory;
pub mod pci;
pub mod rdma;
pub mod vfio;
