//! The data path: burst functions and the queue state they own, per-queue
//! counters, the burst gate, and offload preparation. It imports nothing
//! from the control code; what it needs from it (memory registration on a
//! cache miss) it declares here and control installs.

pub mod csum;
pub mod gate;
pub mod mbuf_ring;
pub mod mr_cache;
pub mod queue;
pub mod rx_flags;
pub mod rxq;
pub mod stats;
#[cfg(test)]
pub mod test_rng;
pub mod tx_prepare;
pub mod txq;
