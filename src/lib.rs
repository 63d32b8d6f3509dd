//! `net_mana`: a DPDK poll-mode driver for the Microsoft Azure Network
//! Adapter (MANA), exported to DPDK through a C ABI.
//!
//! The control path goes through libibverbs and libmana; the data path
//! writes GDMA work-queue entries, rings doorbells and polls completion
//! queues itself. The modules are layers, each importing only from the ones
//! before it in this list (`tests/layers.rs` checks it); `doc/design.md`
//! describes them.

mod control;
mod dataplane;
mod ethdev;
pub mod ffi;
mod hw;
pub mod pci;
mod probe;

/// The `mac=` devargs parser (pure Rust: property-tested and fuzzed alone).
pub use probe::devargs;

/// The driver-level fuzz checks (`fuzz/`, doc/fuzzing.md).
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    /// The vector and scalar receive paths over one device's completions
    /// must agree exactly (`dataplane::rxq::side_by_side`).
    pub use crate::dataplane::rxq::side_by_side::check as rx_paths;
    /// The vector and scalar transmit paths over the same bursts and
    /// completions must agree exactly (`dataplane::txq::side_by_side`).
    pub use crate::dataplane::txq::side_by_side::check as tx_paths;
}
