//! The driver's view of GDMA rings in memory: work queues (SQ/RQ) that it
//! produces into, and completion queues it consumes with owner bits. The
//! rings are allocated by libmana through our allocator and live until the
//! verbs objects are destroyed; queues hold them only while started.

use gdma::{cqe_state_lap, Cqe, CqeInfo, CqeState, WQE_BU_SIZE};
use std::ptr;
use std::sync::atomic::{fence, Ordering};

/// A send or receive work queue. Positions count 32-byte basic units (BUs)
/// and run freely modulo 2^32, as the hardware's byte tail does.
#[repr(C)]
pub struct WorkQueue {
    buf: *mut u8,
    /// Buffer size in bytes, a power of two.
    size: u32,
    pub id: u32,
    /// Producer position (BUs).
    pub head: u32,
    /// Consumer position (BUs), advanced as completions arrive.
    pub tail: u32,
}

impl WorkQueue {
    pub const fn empty() -> WorkQueue {
        WorkQueue {
            buf: ptr::null_mut(),
            size: 0,
            id: 0,
            head: 0,
            tail: 0,
        }
    }

    /// # Safety
    /// `buf` must point to `size` writable bytes (a power of two, at least
    /// 32) that stay valid until the queue is reset to [`WorkQueue::empty`].
    pub unsafe fn new(buf: *mut u8, size: u32, id: u32) -> WorkQueue {
        debug_assert!(size.is_power_of_two() && size as usize >= WQE_BU_SIZE);
        WorkQueue {
            buf,
            size,
            id,
            head: 0,
            tail: 0,
        }
    }

    #[inline(always)]
    pub fn free_bu(&self) -> u32 {
        (self.size / WQE_BU_SIZE as u32) - self.head.wrapping_sub(self.tail)
    }

    /// The byte offset of the next WQE in the ring.
    #[inline(always)]
    fn head_offset(&self) -> usize {
        (self.head.wrapping_mul(WQE_BU_SIZE as u32) & (self.size - 1)) as usize
    }

    /// Writes one WQE at the head: the 8-byte header, the inline OOB
    /// (one or three words, so header + OOB fit in the first BU and never
    /// wrap) and the SGL, which may wrap to the start of the ring (between
    /// SGEs: both are 16-byte aligned). Advances the head by `bu` and returns
    /// a pointer to the OOB for late patching. The caller checked
    /// `free_bu() >= bu` and that `bu` covers the WQE.
    #[inline(always)]
    pub fn post(&mut self, header: u64, oob: &[u64], sgl: &[gdma::Sge], bu: u32) -> *mut u8 {
        debug_assert!(bu <= self.free_bu() && matches!(oob.len(), 1 | 3));
        let off = self.head_offset();
        let mask = self.size as usize - 1;
        // SAFETY: `off` is 32-byte aligned inside the ring, and header + OOB
        // take at most 32 bytes, so these writes stay within the ring.
        let oob_ptr = unsafe {
            let p = self.buf.add(off);
            let w = p as *mut u64;
            ptr::write_unaligned(w, header.to_le());
            // Unrolled: a loop here becomes a memcpy call.
            match *oob {
                [a, b, c] => {
                    ptr::write_unaligned(w.add(1), a.to_le());
                    ptr::write_unaligned(w.add(2), b.to_le());
                    ptr::write_unaligned(w.add(3), c.to_le());
                }
                [a, ..] => ptr::write_unaligned(w.add(1), a.to_le()),
                [] => {}
            }
            p.add(8)
        };
        let mut at = off + 8 + oob.len() * 8;
        for sge in sgl {
            at &= mask;
            // SAFETY: `at` is a 16-byte aligned offset inside the ring (whose
            // size is a multiple of 32), so the 16-byte SGE fits before its end.
            unsafe { ptr::write_unaligned(self.buf.add(at) as *mut gdma::Sge, *sge) };
            at += std::mem::size_of::<gdma::Sge>();
        }
        self.head = self.head.wrapping_add(bu);
        oob_ptr
    }

    /// The ring's size in basic units (a power of two).
    #[inline(always)]
    pub fn size_bu(&self) -> u32 {
        self.size / WQE_BU_SIZE as u32
    }

    /// Where a completion's WQE byte offset lies relative to the tail, in
    /// basic units: `None` if the offset is not that of a WQE in this ring
    /// (outside it, or off a basic-unit boundary). Positions wrap with the
    /// ring, so the caller bounds the distance by what it has posted.
    #[inline(always)]
    pub fn bu_from_tail(&self, wqe_offset: u32) -> Option<u32> {
        if wqe_offset >= self.size || !wqe_offset.is_multiple_of(WQE_BU_SIZE as u32) {
            return None;
        }
        let bu = wqe_offset / WQE_BU_SIZE as u32;
        Some(bu.wrapping_sub(self.tail) & (self.size_bu() - 1))
    }

    /// The doorbell tail: the producer position in bytes.
    #[inline(always)]
    pub fn doorbell_tail(&self) -> u32 {
        self.head.wrapping_mul(WQE_BU_SIZE as u32)
    }
}

/// A completion queue. `head` is the consumer index; it starts at `count`
/// so that the first lap expects owner bits 1 over the zeroed ring.
#[repr(C)]
pub struct CompQueue {
    /// Written only by [`CompQueue::scrub`], never in the empty queue.
    buf: *mut Cqe,
    /// Entries, a power of two (the driver only creates such queues).
    count: u32,
    shift: u32,
    pub id: u32,
    pub head: u32,
    /// Polls that found the head slot empty (see [`STALE_SCAN_EVERY`]).
    idle: u32,
}

/// Every this many polls finding the head slot empty, the slot after it is
/// read for a completion (see [`Next::Stale`]); every
/// [`STALE_SCAN_FULL_EVERY`] the next [`STALE_SCAN_SLOTS`]: a lying device
/// costs a queue that many polls, an honest one a counter and, amortised,
/// about one instruction per empty poll (callgrind, rxonly: the full search
/// on every 32nd empty poll made an empty poll 97.2 instructions, this 71.5).
pub const STALE_SCAN_EVERY: u32 = 32;
/// Empty polls between searches of the next [`STALE_SCAN_SLOTS`] slots (a
/// multiple of [`STALE_SCAN_EVERY`]).
pub const STALE_SCAN_FULL_EVERY: u32 = 1024;
/// How far the full search looks.
const STALE_SCAN_SLOTS: u32 = 64;

#[repr(C, align(64))]
struct EmptySlot([u8; gdma::CQE_SIZE]);
static EMPTY_SLOT: EmptySlot = EmptySlot([0; gdma::CQE_SIZE]);

/// What [`CompQueue::next`] found at the consumer index.
pub enum Next<'a> {
    /// A completion, consumed.
    Cqe(&'a Cqe),
    /// Nothing yet.
    Empty,
    /// Owner bits of neither the previous nor the current lap: the slot is
    /// skipped. Our queues hold a completion for every WQE, so an honest
    /// device never laps us; this is garbage.
    OutOfPhase,
    /// The slot still shows the previous lap while a later one shows the
    /// current lap: the device wrote it with the wrong phase (or not at
    /// all) and moved on. The slot is skipped, or the queue would wait for
    /// it forever. Found by a search every [`STALE_SCAN_EVERY`] empty polls.
    Stale,
}

impl CompQueue {
    /// A queue without a ring: one zeroed slot that stays empty (owner 0 is
    /// the lap before the first), so polling a detached queue, as a reset
    /// retried after a half-done rebuild does, finds nothing.
    pub const fn empty() -> CompQueue {
        CompQueue {
            buf: &EMPTY_SLOT as *const EmptySlot as *mut Cqe,
            count: 1,
            shift: 0,
            id: 0,
            head: gdma::cq_initial_index(1),
            idle: 0,
        }
    }

    /// # Safety
    /// `buf` must point to `count` (at least 2) writable CQEs that stay
    /// valid until the queue is reset to [`CompQueue::empty`].
    pub unsafe fn new(buf: *mut u8, count: u32, id: u32) -> CompQueue {
        debug_assert!(count.is_power_of_two() && count >= 2);
        CompQueue {
            buf: buf as *mut Cqe,
            count,
            shift: count.trailing_zeros(),
            id,
            head: gdma::cq_initial_index(count),
            idle: 0,
        }
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// The CQE at consumer index `index`, and its owner bits.
    #[inline(always)]
    fn owner_at(&self, index: u32) -> (*const Cqe, u8) {
        let slot = (index & (self.count - 1)) as usize;
        // SAFETY: `slot < count`, inside the ring `new` was given.
        let cqe = unsafe { self.buf.add(slot) };
        // SAFETY: an aligned dword of that CQE; the device writes the info
        // dword last, and a volatile read keeps the compiler from caching it
        // across polls.
        let raw = unsafe { ptr::read_volatile(ptr::addr_of!((*cqe).info) as *const u32) };
        (cqe, CqeInfo::from_raw(u32::from_le(raw)).owner_bits())
    }
}

impl CompQueue {
    /// The next completion, if the device has written one; a slot a lying
    /// device wrote out of phase is skipped (and reported) rather than
    /// stopping the queue: the burst counts it and goes on, and the WQE
    /// offsets of later completions tell which work it stood for.
    #[inline(always)]
    pub fn next(&mut self) -> Next<'_> {
        let head = self.head;
        let (cqe, owner) = self.owner_at(head);
        match cqe_state_lap(owner, head >> self.shift) {
            CqeState::Ready => {}
            CqeState::Overflow => {
                self.scrub(head);
                self.head = head.wrapping_add(1);
                return Next::OutOfPhase;
            }
            CqeState::Empty => {
                self.idle = self.idle.wrapping_add(1);
                if !self.idle.is_multiple_of(STALE_SCAN_EVERY) {
                    return Next::Empty;
                }
                let reach = if self.idle.is_multiple_of(STALE_SCAN_FULL_EVERY) {
                    STALE_SCAN_SLOTS
                } else {
                    2
                };
                if !self.written_after(head, reach) {
                    return Next::Empty;
                }
                // The device writes slots in order: with a later one
                // visible, this one is final. Read it again, for it may
                // have been written between the two reads.
                fence(Ordering::Acquire);
                let (_, o) = self.owner_at(head);
                if cqe_state_lap(o, head >> self.shift) != CqeState::Ready {
                    self.scrub(head);
                    self.head = head.wrapping_add(1);
                    // The run of stale slots may go on: search fully
                    // again at the next empty poll.
                    self.idle = STALE_SCAN_FULL_EVERY - 1;
                    return Next::Stale;
                }
            }
        }
        // The owner bits were read before the CQE's data (GDMA rule).
        fence(Ordering::Acquire);
        self.head = head.wrapping_add(1);
        // SAFETY: a CQE of the ring, which lives as long as the queue holds
        // it (`new`'s contract); the borrow of `self` keeps the queue from
        // being reset meanwhile.
        Next::Cqe(unsafe { &*cqe })
    }

    /// Whether one of the `reach - 1` slots after `index` holds a
    /// completion of its lap.
    #[cold]
    fn written_after(&self, index: u32, reach: u32) -> bool {
        (1..reach.min(self.count)).any(|i| {
            let at = index.wrapping_add(i);
            let (_, o) = self.owner_at(at);
            cqe_state_lap(o, at >> self.shift) == CqeState::Ready
        })
    }

    /// Gives a skipped slot the owner bits of the lap it was skipped in,
    /// as a consumed one has: left as the device wrote it, a slot one lap
    /// ahead would read as ready in the next lap (a completion from the
    /// past), and one lap behind as out of phase, before the device writes
    /// it again.
    #[inline(always)]
    fn scrub(&mut self, index: u32) {
        if self.count == 1 {
            // The empty queue (a shared static slot) is always empty.
            return;
        }
        let slot = (index & (self.count - 1)) as usize;
        let lap = (index >> self.shift) & gdma::CQE_OWNER_MASK;
        // SAFETY: `slot < count`, inside the writable ring `new` was given
        // (the empty queue, whose slot is a static, returned above); an
        // aligned dword of that CQE. The device owns the slot again only
        // after we consumed it, which is what this write records.
        unsafe {
            let info = ptr::addr_of_mut!((*self.buf.add(slot)).info) as *mut u32;
            let raw = u32::from_le(ptr::read_volatile(info));
            let raw = CqeInfo::from_raw(raw).with_owner_bits(lap as u8).to_raw();
            ptr::write_volatile(info, raw.to_le());
        }
    }

    /// Packets in completions the driver has not consumed yet (at most
    /// `limit` CQEs are examined), without consuming them.
    pub fn ready_count(&self, limit: u32) -> u32 {
        let mut n = 0;
        for i in 0..limit.min(self.count) {
            let head = self.head.wrapping_add(i);
            let (cqe, owner) = self.owner_at(head);
            if cqe_state_lap(owner, head >> self.shift) != CqeState::Ready {
                break;
            }
            fence(Ordering::Acquire);
            // SAFETY: a CQE of the ring the device has written (owner bits
            // read first, then the acquire fence).
            n += unsafe { &*cqe }.rx_oob().num_packets().max(1) as u32;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gdma::{CqeInfo, Sge};

    #[test]
    fn a_wqe_whose_sgl_crosses_the_ring_end_wraps_only_the_sgl() {
        let mut ring = vec![0u8; 128];
        // SAFETY: the vector outlives the queue.
        let mut wq = unsafe { WorkQueue::new(ring.as_mut_ptr(), 128, 7) };
        wq.head = 3; // offset 96: header + OOB fit, the 2 SGEs wrap
        wq.tail = 3;
        let sgl = [Sge::new(0x1000, 5, 60), Sge::new(0x2000, 5, 4)];
        wq.post(0x1122_3344_5566_7788, &[0xAAAA_AAAA_AAAA_AAAA], &sgl, 2);
        assert_eq!(&ring[96..104], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&ring[104..112], &[0xAA; 8]);
        assert_eq!(&ring[112..120], &0x1000u64.to_le_bytes());
        assert_eq!(&ring[120..124], &5u32.to_le_bytes());
        assert_eq!(&ring[124..128], &60u32.to_le_bytes());
        assert_eq!(&ring[0..8], &0x2000u64.to_le_bytes());
        assert_eq!(wq.head, 5);
        assert_eq!(wq.doorbell_tail(), 160);
        assert_eq!(wq.free_bu(), 2);
    }

    #[test]
    fn a_detached_completion_queue_is_empty_forever() {
        let mut cq = CompQueue::empty();
        for _ in 0..3 {
            assert!(matches!(cq.next(), Next::Empty));
            assert_eq!(cq.ready_count(8), 0);
        }
    }

    #[test]
    fn completions_follow_the_owner_bit_phase() {
        let mut ring = vec![Cqe::default(); 4];
        let base = ring.as_mut_ptr();
        // The device's side: write one slot's info dword.
        let produce = |slot: u32, owner: u32| {
            let info = CqeInfo::try_new(3, false, (owner & 7) as u8).unwrap();
            // SAFETY: slot < 4, inside the vector, which outlives the queue.
            unsafe { (*base.add(slot as usize)).info = info };
        };
        // SAFETY: the vector outlives the queue.
        let mut cq = unsafe { CompQueue::new(base as *mut u8, 4, 9) };
        assert!(matches!(cq.next(), Next::Empty));
        for lap in 1..=9u32 {
            for slot in 0..4 {
                produce(slot, lap);
                let Next::Cqe(c) = cq.next() else {
                    panic!("lap {lap} slot {slot} ready")
                };
                assert_eq!(c.info.owner_bits(), (lap & 7) as u8);
            }
            assert!(
                matches!(cq.next(), Next::Empty),
                "lap {lap} must look empty"
            );
        }
        // A slot two laps ahead is out of phase, not a completion: skipped.
        let head = cq.head;
        produce(head % 4, head / 4 + 1);
        assert!(matches!(cq.next(), Next::OutOfPhase));
        assert_eq!(cq.head, head + 1);
    }

    /// What the queue gives, polled as a burst loop would (empty polls
    /// repeated until the stale-slot search has run).
    fn poll(cq: &mut CompQueue) -> &'static str {
        for _ in 0..STALE_SCAN_FULL_EVERY {
            match cq.next() {
                Next::Empty => continue,
                Next::Cqe(_) => return "cqe",
                Next::OutOfPhase => return "out of phase",
                Next::Stale => return "stale",
            }
        }
        "empty"
    }

    /// Slots the device left in the previous lap while it wrote later ones
    /// are skipped (a lying device would otherwise stop the queue for
    /// good); empty slots with nothing written after them are just empty.
    #[test]
    fn stale_slots_before_a_written_one_are_skipped() {
        let mut ring = vec![Cqe::default(); 8];
        let base = ring.as_mut_ptr();
        let produce = |slot: u32, owner: u32| {
            let info = CqeInfo::try_new(3, false, (owner & 7) as u8).unwrap();
            // SAFETY: slot < 8, inside the vector, which outlives the queue.
            unsafe { (*base.add(slot as usize)).info = info };
        };
        // SAFETY: the vector outlives the queue.
        let mut cq = unsafe { CompQueue::new(base as *mut u8, 8, 9) };
        produce(0, 1);
        assert_eq!(poll(&mut cq), "cqe");
        // Slots 1 and 2 keep lap 0's owner bits; slot 3 is written in lap 1.
        assert_eq!(poll(&mut cq), "empty");
        produce(3, 1);
        assert_eq!(poll(&mut cq), "stale");
        assert_eq!(poll(&mut cq), "stale");
        assert_eq!(poll(&mut cq), "cqe");
        assert_eq!(poll(&mut cq), "empty");
        // Across the ring's end: slots 4 to 7 stale, slot 0 written in lap 2.
        produce(0, 2);
        for _ in 4..8 {
            assert_eq!(poll(&mut cq), "stale");
        }
        assert_eq!(poll(&mut cq), "cqe");
        assert_eq!(cq.head, 8 + 9);
        assert_eq!(poll(&mut cq), "empty");
    }

    /// A slot skipped in one lap is not taken for a completion in the
    /// next: one a lap ahead would otherwise read as ready then, one a lap
    /// behind as out of phase.
    #[test]
    fn a_skipped_slot_reads_empty_in_the_next_lap() {
        let mut ring = vec![Cqe::default(); 4];
        let base = ring.as_mut_ptr();
        let produce = |slot: u32, owner: u32| {
            let info = CqeInfo::try_new(3, false, (owner & 7) as u8).unwrap();
            // SAFETY: slot < 4, inside the vector, which outlives the queue.
            unsafe { (*base.add(slot as usize)).info = info };
        };
        // SAFETY: the vector outlives the queue.
        let mut cq = unsafe { CompQueue::new(base as *mut u8, 4, 9) };
        // Lap 1: slot 0 a lap ahead, slot 1 a lap behind (then slot 2).
        produce(0, 2);
        produce(1, 0);
        produce(2, 1);
        produce(3, 1);
        assert_eq!(poll(&mut cq), "out of phase");
        assert_eq!(poll(&mut cq), "stale");
        assert_eq!(poll(&mut cq), "cqe");
        assert_eq!(poll(&mut cq), "cqe");
        // Lap 2, nothing written yet: empty, not a completion nor garbage.
        assert_eq!(poll(&mut cq), "empty");
        assert_eq!(poll(&mut cq), "empty");
        produce(0, 2);
        assert_eq!(poll(&mut cq), "cqe");
        assert_eq!(poll(&mut cq), "empty");
    }

    #[test]
    fn wqe_offsets_are_placed_relative_to_the_tail() {
        let mut ring = vec![0u8; 256];
        // SAFETY: the vector outlives the queue.
        let mut wq = unsafe { WorkQueue::new(ring.as_mut_ptr(), 256, 7) };
        wq.tail = 6;
        wq.head = 10;
        assert_eq!(wq.bu_from_tail(6 * 32), Some(0));
        assert_eq!(wq.bu_from_tail(32), Some(3), "wraps: BU 9 is slot 1");
        assert_eq!(wq.bu_from_tail(5 * 32), Some(7), "one behind the tail");
        assert_eq!(wq.bu_from_tail(256), None, "outside the ring");
        assert_eq!(wq.bu_from_tail(6 * 32 + 16), None, "off a WQE boundary");
    }
}
