//! Per-queue counters: written only by the queue's data-path thread, read
//! and reset by the control path.

#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};

/// A counter with a single writer: `add` is a plain load and store (no
/// locked instruction on the data path); readers see whole values. A reset
/// records the current value as the new zero instead of writing the data
/// path's word, so it never loses a concurrent update.
#[derive(Default)]
pub struct Counter {
    value: AtomicU64,
    zero: AtomicU64,
}

impl Counter {
    #[inline(always)]
    pub fn add(&self, n: u64) {
        self.value.store(
            self.value.load(Ordering::Relaxed).wrapping_add(n),
            Ordering::Relaxed,
        );
    }

    /// Takes back what `add` counted (sends that failed after posting).
    #[inline(always)]
    pub fn sub(&self, n: u64) {
        self.add(n.wrapping_neg());
    }

    /// The count since the last reset; never below zero, even when a send
    /// counted before the reset is taken back after it.
    pub fn get(&self) -> u64 {
        let v = self
            .value
            .load(Ordering::Relaxed)
            .wrapping_sub(self.zero.load(Ordering::Relaxed));
        if v > i64::MAX as u64 {
            0
        } else {
            v
        }
    }

    pub fn reset(&self) {
        self.zero
            .store(self.value.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_zeroes_and_a_later_take_back_does_not_wrap() {
        let c = Counter::default();
        c.add(5);
        assert_eq!(c.get(), 5);
        c.reset();
        assert_eq!(c.get(), 0);
        c.add(3);
        c.sub(2);
        assert_eq!(c.get(), 1);
        c.sub(4);
        assert_eq!(c.get(), 0, "taking back sends counted before the reset");
        c.add(10);
        assert_eq!(c.get(), 7);
    }
}
