//! A queue's ring of mbuf pointers, oldest first: the receive buffers
//! posted to the device, or the sends in flight. The slots live in the
//! queue's descriptor memory (DPDK shared memory); a burst copies the
//! cursor (it is `Copy`) into registers and writes it back when done.

use crate::ffi::rte_mbuf;
use std::mem::MaybeUninit;

#[derive(Clone, Copy)]
#[repr(C)]
pub struct MbufRing {
    slots: *mut *mut rte_mbuf,
    mask: u32,
    /// Producer position (running, masked on access).
    pub head: u32,
    /// Consumer position.
    pub tail: u32,
}

impl MbufRing {
    /// # Safety
    /// `slots` points to `n` (a power of two) writable pointers that stay
    /// valid for as long as this ring or a copy of it is used.
    pub unsafe fn new(slots: *mut *mut rte_mbuf, n: u32) -> MbufRing {
        debug_assert!(n.is_power_of_two());
        MbufRing {
            slots,
            mask: n - 1,
            head: 0,
            tail: 0,
        }
    }

    /// The slot array (for freeing it with the queue).
    pub fn slots(&self) -> *mut *mut rte_mbuf {
        self.slots
    }

    /// Entries held.
    #[inline(always)]
    pub fn len(&self) -> u32 {
        self.head.wrapping_sub(self.tail)
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// The slot of running position `pos`.
    #[inline(always)]
    pub fn index(&self, pos: u32) -> usize {
        (pos & self.mask) as usize
    }

    /// Appends `m`. The caller checked there is room (`len() < n`).
    #[inline(always)]
    pub fn push(&mut self, m: *mut rte_mbuf) {
        // SAFETY: the index is masked into the `n` slots `new` was given.
        unsafe { *self.slots.add(self.index(self.head)) = m };
        self.head = self.head.wrapping_add(1);
    }

    /// The vacant slots after the newest entry, at most `max` (the caller
    /// keeps `len() + max` within the slot count) and not past the end of
    /// the slot array, for a bulk get straight into the ring; the entries
    /// written there join the ring with [`MbufRing::commit`].
    #[inline(always)]
    pub fn vacant_run(&mut self, max: u32) -> &mut [MaybeUninit<*mut rte_mbuf>] {
        debug_assert!(self.len() + max <= self.mask + 1);
        let at = self.index(self.head);
        let n = max.min(self.mask + 1 - at as u32) as usize;
        // SAFETY: `at + n` is at most the slot count; the slots are valid
        // and writable (`new`), and those after `head` hold nothing the
        // ring still owns (the caller keeps `len() + max` within the count).
        unsafe { std::slice::from_raw_parts_mut(self.slots.add(at).cast(), n) }
    }

    /// Adds the first `n` slots [`MbufRing::vacant_run`] gave, which the
    /// caller wrote, as the newest entries.
    #[inline(always)]
    pub fn commit(&mut self, n: u32) {
        debug_assert!(self.len() + n <= self.mask + 1);
        self.head = self.head.wrapping_add(n);
    }

    /// Removes and returns the oldest entry. The caller checked the ring
    /// is not empty.
    #[inline(always)]
    pub fn take(&mut self) -> *mut rte_mbuf {
        debug_assert!(!self.is_empty());
        // SAFETY: the index is masked into the `n` slots `new` was given.
        let m = unsafe { *self.slots.add(self.index(self.tail)) };
        self.tail = self.tail.wrapping_add(1);
        m
    }

    /// The oldest entry, left in place. The caller checked the ring is not
    /// empty.
    #[inline(always)]
    pub fn oldest(&self) -> *mut rte_mbuf {
        // SAFETY: the index is masked into the `n` slots `new` was given.
        unsafe { *self.slots.add(self.index(self.tail)) }
    }

    /// The entry at position `pos` (between `tail` and `head`).
    #[inline(always)]
    pub fn at(&self, pos: u32) -> *mut rte_mbuf {
        // SAFETY: the index is masked into the `n` slots `new` was given.
        unsafe { *self.slots.add(self.index(pos)) }
    }

    /// The oldest entries, at most `max` (`max <= len()`) and not past the
    /// end of the slot array, left in place (see [`MbufRing::skip`]).
    #[inline(always)]
    pub fn oldest_run(&self, max: u32) -> &[*mut rte_mbuf] {
        debug_assert!(max <= self.len());
        let at = self.index(self.tail);
        let n = max.min(self.mask + 1 - at as u32) as usize;
        // SAFETY: `at + n` is at most the slot count; the slots are valid
        // (`new`) and written before they are read (`push` fills every
        // entry between tail and head; the caller keeps `max <= len()`).
        unsafe { std::slice::from_raw_parts(self.slots.add(at), n) }
    }

    /// Drops the oldest `n` entries (`n <= len()`), e.g. after taking them
    /// through [`MbufRing::oldest_run`].
    #[inline(always)]
    pub fn skip(&mut self, n: u32) {
        debug_assert!(n <= self.len());
        self.tail = self.tail.wrapping_add(n);
    }

    /// The oldest `n` entries (`n <= len()`) as at most two contiguous runs
    /// of slots, for bulk frees straight from the ring; then drops them.
    /// Each run is (first slot, count); an unused second run has count 0.
    #[inline(always)]
    pub fn take_runs(&mut self, n: u32) -> [(*mut *mut rte_mbuf, u32); 2] {
        debug_assert!(n <= self.len());
        let at = self.index(self.tail);
        let first = n.min(self.mask + 1 - at as u32);
        self.tail = self.tail.wrapping_add(n);
        // SAFETY: `at` is a slot index (masked), and `at + first` is at most
        // the slot count; the second run starts at slot 0.
        [
            (unsafe { self.slots.add(at) }, first),
            (self.slots, n - first),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(n: u32) -> (Vec<*mut rte_mbuf>, MbufRing) {
        let mut v = vec![std::ptr::null_mut(); n as usize];
        // SAFETY: the vector outlives the ring within each test, and its
        // heap buffer does not move when the vector does.
        let r = unsafe { MbufRing::new(v.as_mut_ptr(), n) };
        (v, r)
    }

    fn m(i: usize) -> *mut rte_mbuf {
        (0x1000 + i * 0x100) as *mut rte_mbuf
    }

    #[test]
    fn entries_come_out_in_the_order_they_went_in_across_the_wrap() {
        let (_v, mut r) = ring(4);
        r.head = u32::MAX - 1;
        r.tail = u32::MAX - 1;
        for i in 0..4 {
            r.push(m(i));
        }
        assert_eq!(r.len(), 4);
        assert_eq!(r.oldest(), m(0));
        for i in 0..4 {
            assert_eq!(r.take(), m(i));
        }
        assert!(r.is_empty());
    }

    #[test]
    fn a_run_that_wraps_comes_out_as_two_pieces_in_order() {
        let (_v, mut r) = ring(8);
        r.head = 6;
        r.tail = 6;
        for i in 0..5 {
            r.push(m(i));
        }
        let runs = r.take_runs(4);
        let got: Vec<_> = runs
            .iter()
            // SAFETY: each run lies in the vector's slots.
            .flat_map(|&(p, n)| (0..n as usize).map(move |k| unsafe { *p.add(k) }))
            .collect();
        assert_eq!(got, vec![m(0), m(1), m(2), m(3)]);
        assert_eq!((runs[0].1, runs[1].1), (2, 2));
        assert_eq!(r.len(), 1);
        assert_eq!(r.take(), m(4));
        // A run that does not wrap has an empty second piece.
        r.push(m(9));
        let runs = r.take_runs(1);
        assert_eq!((runs[0].1, runs[1].1), (1, 0));
    }

    #[test]
    fn the_oldest_run_ends_at_the_slot_array_end() {
        let (_v, mut r) = ring(4);
        r.head = 2;
        r.tail = 2;
        for i in 0..4 {
            r.push(m(i));
        }
        assert_eq!(r.oldest_run(1), &[m(0)]);
        assert_eq!(r.oldest_run(4), &[m(0), m(1)]);
        r.skip(2);
        assert_eq!(r.oldest_run(2), &[m(2), m(3)]);
    }
}
