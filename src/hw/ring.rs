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

    /// A burst's producer cursor: the ring's address, mask and head in
    /// locals (registers), so writing WQEs does not reload them after every
    /// store to packet memory; the head is written back when it drops.
    #[inline(always)]
    pub fn writer(&mut self) -> WqWriter<'_> {
        WqWriter {
            buf: self.buf,
            mask: self.size.wrapping_sub(1) as usize,
            head: self.head,
            free: self.free_bu(),
            q: self,
        }
    }

    /// The doorbell tail: the producer position in bytes.
    #[inline(always)]
    pub fn doorbell_tail(&self) -> u32 {
        self.head.wrapping_mul(WQE_BU_SIZE as u32)
    }
}

/// The producer side of a [`WorkQueue`] during a burst (see
/// [`WorkQueue::writer`]).
pub struct WqWriter<'a> {
    q: &'a mut WorkQueue,
    buf: *mut u8,
    /// Ring size in bytes minus one.
    mask: usize,
    head: u32,
    /// Free basic units, counted down as WQEs are written.
    free: u32,
}

impl WqWriter<'_> {
    #[inline(always)]
    pub fn free_bu(&self) -> u32 {
        self.free
    }

    /// The producer position (BUs) the next WQE goes to.
    #[inline(always)]
    pub fn head(&self) -> u32 {
        self.head
    }

    /// The byte offset of the next WQE in the ring.
    #[inline(always)]
    fn head_offset(&self) -> usize {
        (self.head as usize).wrapping_mul(WQE_BU_SIZE) & self.mask
    }

    /// Writes a WQE of one basic unit (header, 8-byte OOB, one SGE given
    /// as its two words, [`gdma::Sge::to_words`], so a burst posting many
    /// buffers of one memory key and size builds the second word once) at
    /// the head and advances it by one. Returns a pointer to the OOB. The
    /// caller checked `free_bu() >= 1` and that the header says as much.
    #[inline(always)]
    pub fn post_bu_words(&mut self, header: u64, oob: u64, sge: [u64; 2]) -> *mut u8 {
        debug_assert!(self.free >= 1);
        let off = self.head_offset();
        // SAFETY: `off` is a 32-byte aligned offset inside the ring (of the
        // live WorkQueue this cursor borrows, whose size is a power of two
        // of at least 32 bytes), so the 32 bytes written fit before its end.
        let oob_ptr = unsafe {
            let p = self.buf.add(off);
            let w = p as *mut u64;
            ptr::write_unaligned(w, header.to_le());
            ptr::write_unaligned(w.add(1), oob.to_le());
            ptr::write_unaligned(w.add(2), sge[0].to_le());
            ptr::write_unaligned(w.add(3), sge[1].to_le());
            p.add(8)
        };
        self.head = self.head.wrapping_add(1);
        self.free -= 1;
        oob_ptr
    }

    /// Writes a WQE of two basic units: header and the 24-byte OOB in the
    /// first, one SGE (as [`gdma::Sge::to_words`]) at the start of the
    /// second, which may wrap to the start of the ring. Advances the head by
    /// two; returns a pointer to the OOB. The caller checked
    /// `free_bu() >= 2` and that the header says as much.
    #[inline(always)]
    pub fn post_long_words(&mut self, header: u64, oob: [u64; 3], sge: [u64; 2]) -> *mut u8 {
        debug_assert!(self.free >= 2);
        let off = self.head_offset();
        let sge_off = (off + WQE_BU_SIZE) & self.mask;
        // SAFETY: `off` and `sge_off` are 32-byte aligned offsets inside the
        // ring (a power of two of at least 32 bytes), so each 32-byte unit
        // written fits before its end.
        let oob_ptr = unsafe {
            let p = self.buf.add(off);
            let w = p as *mut u64;
            ptr::write_unaligned(w, header.to_le());
            ptr::write_unaligned(w.add(1), oob[0].to_le());
            ptr::write_unaligned(w.add(2), oob[1].to_le());
            ptr::write_unaligned(w.add(3), oob[2].to_le());
            let s = self.buf.add(sge_off) as *mut u64;
            ptr::write_unaligned(s, sge[0].to_le());
            ptr::write_unaligned(s.add(1), sge[1].to_le());
            p.add(8)
        };
        self.head = self.head.wrapping_add(2);
        self.free -= 2;
        oob_ptr
    }

    /// Writes one WQE at the head: the 8-byte header, the inline OOB
    /// (one or three words, so header + OOB fit in the first BU and never
    /// wrap) and the SGL, which may wrap to the start of the ring (between
    /// SGEs: both are 16-byte aligned). Advances the head by `bu` and returns
    /// a pointer to the OOB for late patching. The caller checked
    /// `free_bu() >= bu` and that `bu` covers the WQE.
    #[inline(always)]
    pub fn post(&mut self, header: u64, oob: &[u64], sgl: &[gdma::Sge], bu: u32) -> *mut u8 {
        debug_assert!(bu <= self.free && matches!(oob.len(), 1 | 3));
        let off = self.head_offset();
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
            at &= self.mask;
            // SAFETY: `at` is a 16-byte aligned offset inside the ring (whose
            // size is a multiple of 32), so the 16-byte SGE fits before its end.
            unsafe { ptr::write_unaligned(self.buf.add(at) as *mut gdma::Sge, *sge) };
            at += std::mem::size_of::<gdma::Sge>();
        }
        self.head = self.head.wrapping_add(bu);
        self.free -= bu;
        oob_ptr
    }
}

impl Drop for WqWriter<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.q.head = self.head;
    }
}

/// A completion queue. `head` is the consumer index; it starts at `count`
/// so that the first lap expects owner bits 1 over the zeroed ring.
#[repr(C)]
pub struct CompQueue {
    buf: *const Cqe,
    /// Entries, a power of two (the driver only creates such queues).
    count: u32,
    shift: u32,
    pub id: u32,
    pub head: u32,
}

#[repr(C, align(64))]
struct EmptySlot([u8; gdma::CQE_SIZE]);
static EMPTY_SLOT: EmptySlot = EmptySlot([0; gdma::CQE_SIZE]);

/// A CQE whose owner bits are neither the previous nor the current lap:
/// the device lapped the driver, or wrote garbage.
#[derive(Debug)]
pub struct Overflow;

impl CompQueue {
    /// A queue without a ring: one zeroed slot that stays empty (owner 0 is
    /// the lap before the first), so polling a detached queue, as a reset
    /// retried after a half-done rebuild does, finds nothing.
    pub const fn empty() -> CompQueue {
        CompQueue {
            buf: &EMPTY_SLOT as *const EmptySlot as *const Cqe,
            count: 1,
            shift: 0,
            id: 0,
            head: gdma::cq_initial_index(1),
        }
    }

    /// # Safety
    /// `buf` must point to `count` CQEs that stay valid until the queue is
    /// reset to [`CompQueue::empty`].
    pub unsafe fn new(buf: *const u8, count: u32, id: u32) -> CompQueue {
        debug_assert!(count.is_power_of_two());
        CompQueue {
            buf: buf as *const Cqe,
            count,
            shift: count.trailing_zeros(),
            id,
            head: gdma::cq_initial_index(count),
        }
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// The next completion, if the device has written one.
    #[inline(always)]
    pub fn poll(&mut self) -> Result<Option<&Cqe>, Overflow> {
        self.reader().poll()
    }

    /// A burst's consumer cursor: ring address, mask, lap shift and head in
    /// locals; the head is written back when it drops.
    #[inline(always)]
    pub fn reader(&mut self) -> CqReader<'_> {
        CqReader {
            buf: self.buf,
            mask: self.count - 1,
            shift: self.shift,
            head: self.head,
            q: self,
        }
    }

    /// Whether the entry at `index` is ready, empty or overflowed.
    #[inline(always)]
    fn state_at(&self, index: u32) -> (*const Cqe, CqeState) {
        cqe_at(self.buf, self.count - 1, self.shift, index)
    }
}

/// The CQE at consumer index `index` of the ring at `buf`, and what its
/// owner bits say.
#[inline(always)]
fn cqe_at(buf: *const Cqe, mask: u32, shift: u32, index: u32) -> (*const Cqe, CqeState) {
    let slot = (index & mask) as usize;
    // SAFETY: `slot <= mask < count`, inside the ring of the live queue the
    // caller holds.
    let cqe = unsafe { buf.add(slot) };
    // SAFETY: an aligned dword of that CQE; the device writes the info
    // dword last, and a volatile read keeps the compiler from caching it
    // across polls.
    let raw = unsafe { ptr::read_volatile(ptr::addr_of!((*cqe).info) as *const u32) };
    let owner = CqeInfo::from_raw(u32::from_le(raw)).owner_bits();
    (cqe, cqe_state_lap(owner, index >> shift))
}

/// The consumer side of a [`CompQueue`] during a burst (see
/// [`CompQueue::reader`]).
pub struct CqReader<'a> {
    q: &'a mut CompQueue,
    buf: *const Cqe,
    mask: u32,
    shift: u32,
    head: u32,
}

impl<'a> CqReader<'a> {
    /// The next completion, if the device has written one.
    #[inline(always)]
    pub fn poll(&mut self) -> Result<Option<&'a Cqe>, Overflow> {
        match cqe_at(self.buf, self.mask, self.shift, self.head) {
            (_, CqeState::Empty) => Ok(None),
            (_, CqeState::Overflow) => Err(Overflow),
            (cqe, CqeState::Ready) => {
                // The owner bits were read before the CQE's data (GDMA rule).
                fence(Ordering::Acquire);
                self.head = self.head.wrapping_add(1);
                // SAFETY: a CQE of the ring, which lives as long as the
                // queue holds it (`CompQueue::new`'s contract); the queue is
                // borrowed for 'a, so it cannot be reset meanwhile.
                Ok(Some(unsafe { &*cqe }))
            }
        }
    }
}

impl<'a> CqReader<'a> {
    /// The ready completions from the head on, at most `max` and not past
    /// the end of the ring (a run that would wrap stops there; the next call
    /// goes on from slot 0), in order, without consuming them: a burst
    /// processes as many as it takes and then [`CqReader::consume`]s that
    /// many. Within a run every slot belongs to the same lap, so readiness
    /// is one compare of the owner bits.
    #[inline(always)]
    pub fn run(&self, max: u32) -> CqRun<'a> {
        let slot = self.head & self.mask;
        let n = max.min(self.mask + 1 - slot);
        // SAFETY: `slot + n <= count`: both pointers lie in the ring (or one
        // past its end) of the live queue this cursor borrows.
        let (p, end) = unsafe {
            let p = self.buf.add(slot as usize);
            (p, p.add(n as usize))
        };
        CqRun {
            p,
            end,
            owner: (self.head >> self.shift) & gdma::CQE_OWNER_MASK,
            _ring: std::marker::PhantomData,
        }
    }

    /// Consumes `n` completions a [`CqReader::run`] yielded.
    #[inline(always)]
    pub fn consume(&mut self, n: u32) {
        self.head = self.head.wrapping_add(n);
    }
}

/// Ready completions in a contiguous part of a CQ (see [`CqReader::run`]).
pub struct CqRun<'a> {
    p: *const Cqe,
    end: *const Cqe,
    /// The owner bits of this lap.
    owner: u32,
    _ring: std::marker::PhantomData<&'a Cqe>,
}

impl<'a> Iterator for CqRun<'a> {
    type Item = &'a Cqe;

    /// The next completion, if the device has written it (anything else,
    /// an older lap or an overflow, ends the run; `poll` tells which).
    #[inline(always)]
    fn next(&mut self) -> Option<&'a Cqe> {
        if self.p == self.end {
            return None;
        }
        // SAFETY: `p` is a CQE slot of the ring, before `end`; the info
        // dword is read as in `cqe_at` (aligned, volatile).
        let raw = unsafe { ptr::read_volatile(ptr::addr_of!((*self.p).info) as *const u32) };
        if u32::from(CqeInfo::from_raw(u32::from_le(raw)).owner_bits()) != self.owner {
            return None;
        }
        // The owner bits were read before the CQE's data (GDMA rule).
        fence(Ordering::Acquire);
        // SAFETY: a CQE the device has written (owner bits of this lap),
        // in a ring that lives for 'a (see `CqReader::poll`).
        let c = unsafe { &*self.p };
        // SAFETY: `p < end`, so one past it is still in (or at the end of)
        // the ring.
        self.p = unsafe { self.p.add(1) };
        Some(c)
    }
}

impl Drop for CqReader<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.q.head = self.head;
    }
}

impl CompQueue {
    /// Nothing new at the head (a ready or an overflowed slot is not empty).
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.state_at(self.head).1 == CqeState::Empty
    }

    /// Packets in completions the driver has not consumed yet (at most
    /// `limit` CQEs are examined), without consuming them.
    pub fn ready_count(&self, limit: u32) -> u32 {
        let mut n = 0;
        for i in 0..limit.min(self.count) {
            let (cqe, state) = self.state_at(self.head.wrapping_add(i));
            if state != CqeState::Ready {
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
        wq.writer()
            .post(0x1122_3344_5566_7788, &[0xAAAA_AAAA_AAAA_AAAA], &sgl, 2);
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
    fn a_two_unit_wqe_is_the_general_one_also_across_the_ring_end() {
        for head in [0u32, 1, 3] {
            let (mut a, mut b) = (vec![0u8; 128], vec![0u8; 128]);
            // SAFETY: the vectors outlive the queues.
            let (mut qa, mut qb) = unsafe {
                (
                    WorkQueue::new(a.as_mut_ptr(), 128, 7),
                    WorkQueue::new(b.as_mut_ptr(), 128, 7),
                )
            };
            for q in [&mut qa, &mut qb] {
                q.head = head;
                q.tail = head;
            }
            let sge = Sge::new(0x5566, 9, 60);
            let oob = [0x11, 0x22, 0x33];
            let pa = qa.writer().post_long_words(0x44, oob, sge.to_words());
            let pb = qb.writer().post(0x44, &oob, &[sge], 2);
            assert_eq!(a, b, "head {head}");
            assert_eq!(
                pa as usize - a.as_ptr() as usize,
                pb as usize - b.as_ptr() as usize
            );
            assert_eq!((qa.head, qb.head), (head + 2, head + 2));
        }
    }

    #[test]
    fn a_detached_completion_queue_is_empty_forever() {
        let mut cq = CompQueue::empty();
        for _ in 0..3 {
            assert!(matches!(cq.poll(), Ok(None)));
            assert_eq!(cq.ready_count(8), 0);
        }
    }

    #[test]
    fn a_one_unit_wqe_is_written_whole_at_the_head() {
        let mut ring = vec![0u8; 64];
        // SAFETY: the vector outlives the queue.
        let mut wq = unsafe { WorkQueue::new(ring.as_mut_ptr(), 64, 7) };
        wq.head = 3; // offset 32 of a two-unit ring
        wq.tail = 3;
        let oob = wq
            .writer()
            .post_bu_words(0x1122, 0x3344, Sge::new(0x5566, 9, 60).to_words());
        assert_eq!(oob as usize - ring.as_ptr() as usize, 40);
        assert_eq!(&ring[32..40], &0x1122u64.to_le_bytes());
        assert_eq!(&ring[40..48], &0x3344u64.to_le_bytes());
        assert_eq!(&ring[48..56], &0x5566u64.to_le_bytes());
        assert_eq!(&ring[56..60], &9u32.to_le_bytes());
        assert_eq!(&ring[60..64], &60u32.to_le_bytes());
        assert_eq!(&ring[..32], &[0; 32]);
        assert_eq!(wq.head, 4);
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
        let mut cq = unsafe { CompQueue::new(base as *const u8, 4, 9) };
        assert!(cq.poll().unwrap().is_none());
        assert!(cq.is_empty());
        for lap in 1..=9u32 {
            for slot in 0..4 {
                produce(slot, lap);
                assert!(!cq.is_empty());
                let c = cq.poll().unwrap().expect("ready");
                assert_eq!(c.info.owner_bits(), (lap & 7) as u8);
            }
            assert!(cq.poll().unwrap().is_none(), "lap {lap} must look empty");
        }
        // A slot two laps ahead is an overflow, not a completion.
        produce(cq.head % 4, cq.head / 4 + 1);
        assert!(!cq.is_empty(), "an overflow is work for the burst");
        assert!(cq.poll().is_err());
    }

    #[test]
    fn a_run_of_ready_completions_ends_at_an_empty_slot_at_max_or_at_the_ring_end() {
        let mut ring = vec![Cqe::default(); 8];
        let base = ring.as_mut_ptr();
        let produce = |idx: u32, tag: u8| {
            let info = CqeInfo::try_new(3, false, ((idx / 8) & 7) as u8).unwrap();
            // SAFETY: the slot is inside the vector, which outlives the queue.
            unsafe {
                (*base.add((idx % 8) as usize)).data[0] = tag;
                (*base.add((idx % 8) as usize)).info = info;
            }
        };
        // SAFETY: the vector outlives the queue.
        let mut cq = unsafe { CompQueue::new(base as *const u8, 8, 9) };
        cq.head = 8 + 5; // slot 5 of lap 1: a run wraps after three entries
        for idx in 8..13 {
            produce(idx, 0); // lap 1's entries before the head, consumed
        }
        for (i, tag) in [1u8, 2, 3, 4, 5].into_iter().enumerate() {
            produce(13 + i as u32, tag);
        }
        let mut r = cq.reader();
        let tags = |run: CqRun<'_>| run.map(|c| c.data[0]).collect::<Vec<_>>();
        assert_eq!(tags(r.run(2)), vec![1, 2], "stops at max");
        assert_eq!(tags(r.run(10)), vec![1, 2, 3], "stops at the ring end");
        r.consume(3);
        assert_eq!(tags(r.run(10)), vec![4, 5], "goes on from slot 0, next lap");
        r.consume(1);
        assert_eq!(tags(r.run(10)), vec![5], "stops at the empty slot");
        assert_eq!(r.poll().unwrap().unwrap().data[0], 5);
        assert!(r.poll().unwrap().is_none());
        drop(r);
        assert_eq!(cq.head, 18, "the cursor's head is written back");
    }
}
