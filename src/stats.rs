//! Per-queue counters: written only by the queue's data-path thread, read
//! and reset by the control path.

use std::sync::atomic::{AtomicU64, Ordering};

/// A counter with a single writer: `add` is a plain load and store (no
/// locked instruction on the data path); readers see whole values.
#[derive(Default)]
#[repr(transparent)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline(always)]
    pub fn add(&self, n: u64) {
        self.0.store(
            self.0.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    #[inline(always)]
    pub fn sub(&self, n: u64) {
        self.add(n.wrapping_neg());
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    pub fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}
