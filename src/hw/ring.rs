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

    /// The ring's size in basic units (a power of two).
    #[inline(always)]
    pub fn size_bu(&self) -> u32 {
        self.size / WQE_BU_SIZE as u32
    }

    /// The byte offset in the ring of the WQE at position `bu`: what a
    /// completion for it names.
    #[inline(always)]
    pub fn wqe_offset(&self, bu: u32) -> u32 {
        bu.wrapping_mul(WQE_BU_SIZE as u32) & self.size.wrapping_sub(1)
    }

    /// Where a completion's WQE byte offset lies relative to the tail, in
    /// basic units: `None` if the offset is not that of a WQE in this ring
    /// (outside it, or off a basic-unit boundary). Positions wrap with the
    /// ring, so the caller bounds the distance by what it has posted.
    #[inline(always)]
    pub fn bu_from_tail(&self, wqe_offset: u32) -> Option<u32> {
        self.bu_from(self.tail, wqe_offset)
    }

    /// [`WorkQueue::bu_from_tail`] for a burst that keeps the tail (`tail`)
    /// in a local while it consumes.
    #[inline(always)]
    pub fn bu_from(&self, tail: u32, wqe_offset: u32) -> Option<u32> {
        if wqe_offset >= self.size || !wqe_offset.is_multiple_of(WQE_BU_SIZE as u32) {
            return None;
        }
        let bu = wqe_offset / WQE_BU_SIZE as u32;
        Some(bu.wrapping_sub(tail) & (self.size_bu() - 1))
    }

    /// The byte offset in the ring of the WQE whose OOB [`WqWriter`]
    /// returned `oob` for (the OOB follows the 8-byte header).
    #[inline(always)]
    pub fn offset_of_oob(&self, oob: *const u8) -> u32 {
        (oob as usize).wrapping_sub(self.buf as usize + 8) as u32
    }

    /// The ring's size in bytes minus one: WQE offsets advance modulo it.
    #[inline(always)]
    pub fn offset_mask(&self) -> u32 {
        self.size.wrapping_sub(1)
    }
}

/// The first basic unit of a two-unit WQE (header and the 24-byte OOB),
/// the same for every WQE of a run: on x86_64 two 16-byte values made
/// once, kept in vector registers and written with two stores (the four
/// words as scalars take four stores, and general registers the loop needs).
#[derive(Clone, Copy)]
struct FirstUnit {
    #[cfg(target_arch = "x86_64")]
    v: [std::arch::x86_64::__m128i; 2],
    #[cfg(not(target_arch = "x86_64"))]
    v: [u64; 4],
}

impl FirstUnit {
    #[inline(always)]
    fn new(header: u64, oob: [u64; 3]) -> FirstUnit {
        let words = [
            header.to_le(),
            oob[0].to_le(),
            oob[1].to_le(),
            oob[2].to_le(),
        ];
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::_mm_set_epi64x;
            // SAFETY: SSE2 is part of the x86_64 baseline.
            let v = unsafe {
                [
                    _mm_set_epi64x(words[1] as i64, words[0] as i64),
                    _mm_set_epi64x(words[3] as i64, words[2] as i64),
                ]
            };
            FirstUnit { v }
        }
        #[cfg(not(target_arch = "x86_64"))]
        FirstUnit { v: words }
    }

    /// # Safety
    /// `w` points to 32 writable bytes (any alignment).
    #[inline(always)]
    unsafe fn write(self, w: *mut u64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's 32 bytes; SSE2 is part of the x86_64
        // baseline, and the unaligned store takes any address.
        unsafe {
            use std::arch::x86_64::{__m128i, _mm_storeu_si128};
            _mm_storeu_si128(w as *mut __m128i, self.v[0]);
            _mm_storeu_si128(w.add(2) as *mut __m128i, self.v[1]);
        }
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: the caller's 32 bytes, written unaligned.
        unsafe {
            ptr::write_unaligned(w as *mut [u64; 4], self.v)
        };
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

    /// Basic units from the head to the end of the ring.
    #[inline(always)]
    pub fn contiguous_bu(&self) -> u32 {
        ((self.mask + 1 - self.head_offset()) / WQE_BU_SIZE) as u32
    }

    /// Writes up to `n` WQEs of one basic unit each (the 8-byte header,
    /// the 8-byte OOB `oob`, one SGE as its two words from `sge(k)`) from
    /// the head on: [`WqWriter::post_run`] for one-unit WQEs (a refill's,
    /// with a zero OOB).
    #[inline(always)]
    pub fn post_bu_run(
        &mut self,
        header: u64,
        oob: u64,
        n: u32,
        sge: impl FnMut(usize) -> Option<[u64; 2]>,
    ) -> u32 {
        self.post_run::<1>(header, [oob, 0, 0], n, sge)
    }

    /// Writes up to `n` WQEs of `BU` basic units each, one SGE apiece, from
    /// the head on, not past the ring's end nor the free units; stops early
    /// where `sge(k)` gives `None`. A one-unit WQE is the header, `oob[0]`
    /// and the SGE's two words; a two-unit one the header and the 24-byte
    /// OOB `oob` in its first unit and the SGE at the start of the second.
    /// Advances the head by the units written and returns how many WQEs:
    /// a loop over contiguous units, with no per-WQE wrap arithmetic (a
    /// two-unit WQE that would wrap is left to [`WqWriter::post_long_words`]).
    #[inline(always)]
    pub fn post_run<const BU: u32>(
        &mut self,
        header: u64,
        oob: [u64; 3],
        n: u32,
        mut sge: impl FnMut(usize) -> Option<[u64; 2]>,
    ) -> u32 {
        const { assert!(BU == 1 || BU == 2) };
        let n = n.min(self.contiguous_bu() / BU).min(self.free / BU) as usize;
        // SAFETY: `head_offset` is a 32-byte aligned offset inside the ring
        // (a power of two of at least 32 bytes) of the live WorkQueue this
        // cursor borrows.
        let base = unsafe { self.buf.add(self.head_offset()) } as *mut u64;
        let first_unit = FirstUnit::new(header, oob);
        let mut k = 0;
        while k < n {
            let Some([a, b]) = sge(k) else { break };
            // SAFETY: `k < n <= contiguous_bu() / BU`: the `BU` units of WQE
            // `k` lie before the ring's end.
            unsafe {
                let w = base.add(k * BU as usize * (WQE_BU_SIZE / 8));
                if BU == 1 {
                    ptr::write_unaligned(w, header.to_le());
                    ptr::write_unaligned(w.add(1), oob[0].to_le());
                }
                if BU == 2 {
                    first_unit.write(w);
                    ptr::write_unaligned(w.add(4), a.to_le());
                    ptr::write_unaligned(w.add(5), b.to_le());
                } else {
                    ptr::write_unaligned(w.add(2), a.to_le());
                    ptr::write_unaligned(w.add(3), b.to_le());
                }
            }
            k += 1;
        }
        let units = k as u32 * BU;
        self.head = self.head.wrapping_add(units);
        self.free -= units;
        k as u32
    }

    /// The address of the next WQE, for a writer of its own (the transmit
    /// path's vector step) that fills up to `contiguous_bu()` units (and
    /// no more than `free_bu()`) from there, then [`WqWriter::advance`]s.
    #[inline(always)]
    pub fn head_ptr(&self) -> *mut u8 {
        // SAFETY: `head_offset` is a 32-byte aligned offset inside the ring
        // of the live WorkQueue this cursor borrows.
        unsafe { self.buf.add(self.head_offset()) }
    }

    /// Moves the head past `units` basic units the caller wrote from
    /// [`WqWriter::head_ptr`] on (within the contiguous and free units).
    #[inline(always)]
    pub fn advance(&mut self, units: u32) {
        debug_assert!(units <= self.contiguous_bu() && units <= self.free);
        self.head = self.head.wrapping_add(units);
        self.free -= units;
    }

    /// The OOB of the WQE of `bu` basic units written last (the caller
    /// wrote one since the cursor was made): for late patching, as the
    /// post functions return it.
    #[inline(always)]
    pub fn last_oob(&self, bu: u32) -> *mut u8 {
        let off = (self.head.wrapping_sub(bu) as usize).wrapping_mul(WQE_BU_SIZE) & self.mask;
        // SAFETY: `off` is a 32-byte aligned offset inside the ring, and
        // the OOB's 8 bytes follow the header within that unit.
        unsafe { self.buf.add(off + 8) }
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
    /// Written only by [`CompQueue::scrub`], never in the empty queue.
    buf: *mut Cqe,
    /// Entries, a power of two (the driver only creates such queues).
    count: u32,
    shift: u32,
    pub id: u32,
    /// The consumer index; written only through [`CompQueue::set_head`],
    /// which keeps `poll` and `empty` in step with it.
    head: u32,
    /// Polls finding the head slot empty left before the one that makes a
    /// stale-slot search due (counts down from `STALE_SCAN_EVERY - 1`: one
    /// subtract and branch on its borrow per empty poll; a search due and
    /// not yet made leaves it at 0, so the next empty poll is due again).
    idle: u32,
    /// Stale-slot searches so far: every
    /// `STALE_SCAN_FULL_EVERY / STALE_SCAN_EVERY`-th looks further.
    scans: u32,
    /// The info dword of the head slot, and the owner bits (in place) it
    /// shows while the slot is empty (the previous lap's): an empty poll
    /// is one masked compare, without the slot and lap arithmetic. While
    /// the consumer owes work the ring does not show
    /// ([`CompQueue::set_work_owed`]) it is `WORK_OWED`, which no slot
    /// matches.
    poll: *const u32,
    empty: u32,
}

/// An `empty` value no masked info dword equals (it has bits outside
/// `OWNER_FIELD`).
const WORK_OWED: u32 = !0;
const _: () = assert!(WORK_OWED & !OWNER_FIELD != 0);

/// Where the owner bits sit in a CQE's info dword, from the typed definition.
const OWNER_SHIFT: u32 = CqeInfo::new().with_owner_bits(1).to_raw().trailing_zeros();
const OWNER_FIELD: u32 = gdma::CQE_OWNER_MASK << OWNER_SHIFT;
const _: () = assert!(
    CqeInfo::new()
        .with_owner_bits(gdma::CQE_OWNER_MASK as u8)
        .to_raw()
        == OWNER_FIELD
);
/// The info bits naming the work queue and its direction.
const WQ_NUM_FIELD: u32 = CqeInfo::new().with_wq_num(0xff_ffff).to_raw();
const IS_SQ_BIT: u32 = CqeInfo::new().with_is_sq(true).to_raw();
const _: () = assert!(
    WQ_NUM_FIELD == 0xff_ffff,
    "the queue number is the low bits"
);

/// Every this many polls finding the head slot empty, the slot after it is
/// read for a completion (see [`Next::Stale`]); every
/// [`STALE_SCAN_FULL_EVERY`] the next [`STALE_SCAN_SLOTS`]: a lying device
/// costs a queue that many polls, an honest one a countdown (a decrement
/// and a branch per empty poll) and, amortised, about one instruction per
/// empty poll for the searches.
pub const STALE_SCAN_EVERY: u32 = 32;
/// Empty polls between searches of the next [`STALE_SCAN_SLOTS`] slots (a
/// multiple of [`STALE_SCAN_EVERY`]).
pub const STALE_SCAN_FULL_EVERY: u32 = 1024;
/// How far the full search looks.
const STALE_SCAN_SLOTS: u32 = 64;

#[repr(C, align(64))]
struct EmptySlot([u8; gdma::CQE_SIZE]);
static EMPTY_SLOT: EmptySlot = EmptySlot([0; gdma::CQE_SIZE]);

/// What [`CompQueue::check`] found at the head.
#[derive(Debug, PartialEq, Eq)]
pub enum Head {
    /// Nothing.
    Empty,
    /// A completion or an out-of-phase slot: work for a burst.
    Work,
    /// Nothing, and a stale-slot search is due.
    SearchDue,
}

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
            head: 0,
            idle: STALE_SCAN_EVERY - 1,
            scans: 0,
            poll: ptr::null(),
            empty: 0,
        }
        .with_head(gdma::cq_initial_index(1))
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
            head: 0,
            idle: STALE_SCAN_EVERY - 1,
            scans: 0,
            poll: ptr::null(),
            empty: 0,
        }
        .with_head(gdma::cq_initial_index(count))
    }

    const fn with_head(mut self, head: u32) -> CompQueue {
        self.set_head(head);
        self
    }

    /// The consumer index.
    pub fn head(&self) -> u32 {
        self.head
    }

    /// Moves the consumer index (and what an empty poll reads with it).
    #[inline(always)]
    pub const fn set_head(&mut self, head: u32) {
        self.head = head;
        let slot = (head & (self.count - 1)) as usize;
        // SAFETY: `slot < count`, a slot of the ring (or the empty queue's
        // one static slot); only its address is taken.
        self.poll = unsafe { ptr::addr_of!((*self.buf.add(slot)).info) as *const u32 };
        self.empty = ((head >> self.shift).wrapping_sub(1) & gdma::CQE_OWNER_MASK) << OWNER_SHIFT;
    }

    /// Counts an empty poll; true when the countdown ran out and a
    /// stale-slot search is due (one subtract and branch on the borrow).
    #[inline(always)]
    fn count_idle(&mut self) -> bool {
        let (left, due) = self.idle.overflowing_sub(1);
        self.idle = left;
        if due {
            self.idle = 0;
        }
        due
    }

    /// Makes [`CompQueue::check`] report work whatever the head slot
    /// holds (`owed`), or what it holds again: for a consumer that owes
    /// work outside the ring (the rest of a coalesced completion, buffers
    /// to repost), so that the empty poll stays one compare. Moving the
    /// head ([`CompQueue::set_head`], a reader's drop) clears it.
    #[inline(always)]
    pub fn set_work_owed(&mut self, owed: bool) {
        if owed {
            self.empty = WORK_OWED;
        } else {
            self.set_head(self.head);
        }
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// The next completion, if the device has written one (see
    /// [`CqReader::next`]).
    #[inline(always)]
    pub fn next(&mut self) -> Next<'_> {
        self.reader().next()
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

/// The bits of a CQE's info dword a run compares: the queue it names, its
/// direction and the owner bits (the reserved bits are not looked at).
const RUN_MASK: u32 = WQ_NUM_FIELD | IS_SQ_BIT | OWNER_FIELD;

/// The consumer side of a [`CompQueue`] during a burst (see
/// [`CompQueue::reader`]).
pub struct CqReader<'a> {
    q: &'a mut CompQueue,
    /// Written only by [`CqReader::scrub`], never in the empty queue.
    buf: *mut Cqe,
    mask: u32,
    shift: u32,
    head: u32,
}

impl<'a> CqReader<'a> {
    /// The next completion, if the device has written one; a slot a lying
    /// device wrote out of phase is skipped (and reported) rather than
    /// stopping the queue: the burst counts it and goes on, and the WQE
    /// offsets of later completions tell which work it stood for.
    #[inline(always)]
    pub fn next(&mut self) -> Next<'a> {
        let head = self.head;
        match cqe_at(self.buf, self.mask, self.shift, head) {
            (cqe, CqeState::Ready) => {
                // The owner bits were read before the CQE's data (GDMA rule).
                fence(Ordering::Acquire);
                self.head = head.wrapping_add(1);
                // SAFETY: a CQE of the ring, which lives as long as the
                // queue holds it (`CompQueue::new`'s contract); the queue is
                // borrowed for 'a, so it cannot be reset meanwhile.
                Next::Cqe(unsafe { &*cqe })
            }
            (_, CqeState::Overflow) => self.out_of_phase(),
            (cqe, CqeState::Empty) => {
                // The countdown ran out here, or a search
                // [`CompQueue::check`] made due was left to us.
                if !self.q.count_idle() {
                    return Next::Empty;
                }
                self.search(cqe)
            }
        }
    }

    /// The head slot is out of phase: skipped and scrubbed.
    #[cold]
    #[inline(never)]
    fn out_of_phase(&mut self) -> Next<'a> {
        self.scrub(self.head);
        self.head = self.head.wrapping_add(1);
        Next::OutOfPhase
    }

    /// The periodic stale-slot search from an empty head slot (`cqe`).
    #[cold]
    #[inline(never)]
    fn search(&mut self, cqe: *const Cqe) -> Next<'a> {
        let head = self.head;
        self.q.idle = STALE_SCAN_EVERY - 1;
        self.q.scans = self.q.scans.wrapping_add(1);
        let reach = if self
            .q
            .scans
            .is_multiple_of(STALE_SCAN_FULL_EVERY / STALE_SCAN_EVERY)
        {
            STALE_SCAN_SLOTS
        } else {
            2
        };
        if !self.q.written_after(head, reach) {
            return Next::Empty;
        }
        // The device writes slots in order: with a later one visible, this
        // one is final. Read it again, for it may have been written between
        // the two reads.
        fence(Ordering::Acquire);
        if cqe_at(self.buf, self.mask, self.shift, head).1 == CqeState::Ready {
            fence(Ordering::Acquire);
            self.head = head.wrapping_add(1);
            // SAFETY: as in `next`: a written CQE of the live ring.
            return Next::Cqe(unsafe { &*cqe });
        }
        self.scrub(head);
        self.head = head.wrapping_add(1);
        // The run of stale slots may go on: search fully again at the next
        // empty poll.
        self.q.idle = 0;
        self.q.scans = STALE_SCAN_FULL_EVERY / STALE_SCAN_EVERY - 1;
        Next::Stale
    }

    /// Gives a skipped slot the owner bits of the lap it was skipped in,
    /// as a consumed one has: left as the device wrote it, a slot one lap
    /// ahead would read as ready in the next lap (a completion from the
    /// past), and one lap behind as out of phase, before the device writes
    /// it again.
    fn scrub(&mut self, index: u32) {
        if self.mask == 0 {
            // The empty queue (a shared static slot) is always empty.
            return;
        }
        let slot = (index & self.mask) as usize;
        let lap = (index >> self.shift) & gdma::CQE_OWNER_MASK;
        // SAFETY: `slot <= mask`, inside the writable ring `CompQueue::new`
        // was given (the empty queue, whose slot is a read-only static, has
        // a mask of 0 and returned above); an aligned dword of that CQE. The
        // device owns the slot again only after we consumed it, which is
        // what this write records.
        unsafe {
            let info = ptr::addr_of_mut!((*self.buf.add(slot)).info) as *mut u32;
            let raw = u32::from_le(ptr::read_volatile(info));
            let raw = CqeInfo::from_raw(raw).with_owner_bits(lap as u8).to_raw();
            ptr::write_volatile(info, raw.to_le());
        }
    }
}

impl<'a> CqReader<'a> {
    /// The ready completions for queue `queue` (see [`queue_tag`]) from the
    /// head on, at most `max` and not past the end of the ring (a run that
    /// would wrap stops there; the next call goes on from slot 0), in order,
    /// without consuming them: a burst processes as many as it takes and
    /// then [`CqReader::consume`]s that many. Within a run every slot
    /// belongs to the same lap, so readiness and the queue the completion
    /// names are one compare of the info dword; anything else (an empty
    /// slot, one out of phase, a completion naming another queue) ends the
    /// run, and [`CqReader::next`] tells which.
    #[inline(always)]
    pub fn run(&self, max: u32, queue: u32) -> CqRun<'a> {
        let slot = self.head & self.mask;
        let n = max.min(self.mask + 1 - slot);
        // SAFETY: `slot + n <= count`: both pointers lie in the ring (or one
        // past its end) of the live queue this cursor borrows.
        let (p, end) = unsafe {
            let p = self.buf.add(slot as usize) as *const Cqe;
            (p, p.add(n as usize))
        };
        let owner = (self.head >> self.shift) & gdma::CQE_OWNER_MASK;
        CqRun {
            p,
            end,
            want: queue | owner << OWNER_SHIFT,
            _ring: std::marker::PhantomData,
        }
    }

    /// Consumes `n` completions a [`CqReader::run`] yielded.
    #[inline(always)]
    pub fn consume(&mut self, n: u32) {
        self.head = self.head.wrapping_add(n);
    }
}

/// The info bits naming work queue `wq_id` of a direction, as a
/// [`CqReader::run`] compares them.
#[inline(always)]
pub fn queue_tag(wq_id: u32, is_sq: bool) -> u32 {
    (wq_id & WQ_NUM_FIELD) | if is_sq { IS_SQ_BIT } else { 0 }
}

/// Ready completions in a contiguous part of a CQ (see [`CqReader::run`]).
pub struct CqRun<'a> {
    p: *const Cqe,
    end: *const Cqe,
    /// The queue, direction and owner bits of this lap, as they appear
    /// in the bits of the info dword `RUN_MASK` selects.
    want: u32,
    _ring: std::marker::PhantomData<&'a Cqe>,
}

impl<'a> CqRun<'a> {
    /// The slots the run may look at (not all of them need be ready).
    #[inline(always)]
    pub fn slots(&self) -> usize {
        // SAFETY: both pointers lie in the same ring, `p <= end`.
        unsafe { self.end.offset_from(self.p) as usize }
    }

    /// For a loop that checks several slots at once as [`CqRun::get`]
    /// checks one: the first slot's address, and the mask and value a
    /// ready completion of the run shows in its info dword (little-endian,
    /// masked).
    #[inline(always)]
    pub fn raw_parts(&self) -> (*const Cqe, u32, u32) {
        (self.p, RUN_MASK, self.want)
    }

    /// The `k`-th completion of the run if it and every one before it
    /// have been checked ready for our queue (the caller walks `k` up from
    /// 0 and stops at the first `None`), without advancing the run: a loop
    /// indexing the run and its buffers by one counter.
    #[inline(always)]
    pub fn get(&self, k: usize) -> Option<&'a Cqe> {
        if k >= self.slots() {
            return None;
        }
        // SAFETY: `k < slots()`: a CQE slot of the ring before `end`; the info
        // dword is read as in `cqe_at` (aligned, volatile).
        let (c, raw) = unsafe {
            let c = self.p.add(k);
            (
                c,
                ptr::read_volatile(ptr::addr_of!((*c).info) as *const u32),
            )
        };
        if u32::from_le(raw) & RUN_MASK != self.want {
            return None;
        }
        // The owner bits were read before the CQE's data (GDMA rule).
        fence(Ordering::Acquire);
        // SAFETY: a CQE the device has written (owner bits of this lap),
        // in a ring that lives for 'a (see `CqReader::next`).
        Some(unsafe { &*c })
    }
}

impl<'a> Iterator for CqRun<'a> {
    type Item = &'a Cqe;

    /// The next completion, if the device has written it for our queue
    /// (anything else ends the run; `CqReader::next` tells what).
    #[inline(always)]
    fn next(&mut self) -> Option<&'a Cqe> {
        if self.p == self.end {
            return None;
        }
        // SAFETY: `p` is a CQE slot of the ring, before `end`; the info
        // dword is read as in `cqe_at` (aligned, volatile).
        let raw = unsafe { ptr::read_volatile(ptr::addr_of!((*self.p).info) as *const u32) };
        if u32::from_le(raw) & RUN_MASK != self.want {
            return None;
        }
        // The owner bits were read before the CQE's data (GDMA rule).
        fence(Ordering::Acquire);
        // SAFETY: a CQE the device has written (owner bits of this lap),
        // in a ring that lives for 'a (see `CqReader::next`).
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
        self.q.set_head(self.head);
    }
}

impl CompQueue {
    /// Nothing new at the head: no completion and no out-of-phase slot.
    /// Every [`STALE_SCAN_EVERY`]th empty poll is not empty either: the
    /// burst runs and its [`CqReader::next`] searches for stale slots.
    #[cfg(test)]
    pub fn is_empty(&mut self) -> bool {
        matches!(self.check(), Head::Empty)
    }

    /// What an empty poll finds at the head: it costs a read of the head
    /// slot and a countdown.
    #[inline(always)]
    pub fn check(&mut self) -> Head {
        // SAFETY: `poll` is the head slot's info dword (`set_head`), in the
        // ring the queue holds (or its static empty slot); read as in
        // `cqe_at` (aligned, volatile).
        let raw = u32::from_le(unsafe { ptr::read_volatile(self.poll) });
        if raw & OWNER_FIELD != self.empty {
            return Head::Work;
        }
        // Due: [`CompQueue::search_ahead`], or `next`, which counts this
        // poll again, finds it due too and searches (as it does should a
        // burst not get to call it).
        if !self.count_idle() {
            Head::Empty
        } else {
            Head::SearchDue
        }
    }

    /// The search [`Head::SearchDue`] asks for, without a burst: whether a
    /// slot after the (empty) head is written. If so the head may be stale
    /// and the burst's [`CqReader::next`] searches fully at once; if not,
    /// the countdown starts again.
    #[cold]
    #[inline(never)]
    pub fn search_ahead(&mut self) -> bool {
        self.scans = self.scans.wrapping_add(1);
        let reach = if self
            .scans
            .is_multiple_of(STALE_SCAN_FULL_EVERY / STALE_SCAN_EVERY)
        {
            STALE_SCAN_SLOTS
        } else {
            2
        };
        if self.written_after(self.head, reach) {
            self.idle = 0;
            self.scans = STALE_SCAN_FULL_EVERY / STALE_SCAN_EVERY - 1;
            return true;
        }
        self.idle = STALE_SCAN_EVERY - 1;
        false
    }

    /// Whether one of the `reach - 1` slots after `index` holds a
    /// completion of its lap.
    #[cold]
    fn written_after(&self, index: u32, reach: u32) -> bool {
        (1..reach.min(self.count)).any(|i| {
            let at = index.wrapping_add(i);
            self.state_at(at).1 == CqeState::Ready
        })
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

    /// A run of two-unit WQEs writes what `post_long_words` writes, one
    /// after the other, and stops where the next would cross the ring's
    /// end, at a refused SGE, or when the ring is full.
    #[test]
    fn a_run_of_two_unit_wqes_is_the_long_one_repeated_up_to_the_ring_end() {
        let oob = [0x11, 0x22, 0x33];
        let sge = |k: usize| Sge::new(0x1000 + k as u64, 9, 60).to_words();
        // (head, WQEs asked for, SGEs given, tail) -> WQEs written.
        for (head, n, given, tail, want) in [
            (0u32, 4u32, 4usize, 0u32, 4u32),
            (1, 4, 4, 1, 3),
            (2, 4, 4, 2, 3),
            (0, 4, 2, 0, 2),
            (2, 4, 4, 0, 3),
            (3, 4, 4, 0, 2),
        ] {
            let (mut a, mut b) = (vec![0u8; 256], vec![0u8; 256]);
            // SAFETY: the vectors outlive the queues.
            let (mut qa, mut qb) = unsafe {
                (
                    WorkQueue::new(a.as_mut_ptr(), 256, 7),
                    WorkQueue::new(b.as_mut_ptr(), 256, 7),
                )
            };
            qa.head = head;
            qa.tail = tail;
            qb.head = head;
            qb.tail = tail;
            let mut wa = qa.writer();
            let k = wa.post_run::<2>(0x44, oob, n, |k| (k < given).then(|| sge(k)));
            assert_eq!(k, want, "head {head} n {n} given {given} tail {tail}");
            let last = (k > 0).then(|| wa.last_oob(2));
            drop(wa);
            let mut wb = qb.writer();
            let mut pb = None;
            for i in 0..k as usize {
                pb = Some(wb.post_long_words(0x44, oob, sge(i)));
            }
            drop(wb);
            assert_eq!(a, b, "head {head} n {n} given {given} tail {tail}");
            assert_eq!(
                last.map(|p| p as usize - a.as_ptr() as usize),
                pb.map(|p| p as usize - b.as_ptr() as usize)
            );
            assert_eq!((qa.head, qb.head), (head + 2 * k, head + 2 * k));
        }
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
    fn a_one_unit_wqe_is_written_whole_at_the_head() {
        let mut ring = vec![0u8; 64];
        // SAFETY: the vector outlives the queue.
        let mut wq = unsafe { WorkQueue::new(ring.as_mut_ptr(), 64, 7) };
        wq.head = 3; // offset 32 of a two-unit ring
        wq.tail = 3;
        let mut w = wq.writer();
        let sge = Sge::new(0x5566, 9, 60).to_words();
        // Asked for two, it writes the one before the ring's end.
        assert_eq!(w.post_bu_run(0x1122, 0x3344, 2, |_| Some(sge)), 1);
        let oob = w.last_oob(1);
        drop(w);
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
        let head = cq.head();
        produce(head % 4, head / 4 + 1);
        assert!(matches!(cq.next(), Next::OutOfPhase));
        assert_eq!(cq.head(), head + 1);
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
        assert_eq!(cq.head(), 8 + 9);
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

    /// What a burst finds: nothing if the empty check says so, else what
    /// `next` gives.
    fn burst(cq: &mut CompQueue) -> &'static str {
        if cq.is_empty() {
            return "empty";
        }
        match cq.next() {
            Next::Empty => "searched",
            Next::Cqe(_) => "cqe",
            Next::OutOfPhase => "out of phase",
            Next::Stale => "stale",
        }
    }

    /// The burst's empty check lets every `STALE_SCAN_EVERY`th empty poll
    /// through to `next`, which searches for stale slots: an honest empty
    /// queue gives nothing, and a slot left stale before a written one is
    /// skipped within `STALE_SCAN_EVERY` polls.
    #[test]
    fn the_empty_check_lets_the_stale_slot_search_run() {
        let mut ring = vec![Cqe::default(); 8];
        let base = ring.as_mut_ptr();
        let produce = |slot: u32, owner: u32| {
            let info = CqeInfo::try_new(3, false, (owner & 7) as u8).unwrap();
            // SAFETY: slot < 8, inside the vector, which outlives the queue.
            unsafe { (*base.add(slot as usize)).info = info };
        };
        // SAFETY: the vector outlives the queue.
        let mut cq = unsafe { CompQueue::new(base as *mut u8, 8, 9) };
        let polls = 2 * STALE_SCAN_FULL_EVERY;
        let searched = (0..polls).filter(|_| burst(&mut cq) == "searched").count();
        assert_eq!(searched as u32, polls / STALE_SCAN_EVERY);
        produce(0, 1);
        assert_eq!(burst(&mut cq), "cqe");
        // Slot 1 stays in lap 0, slot 2 is written in lap 1.
        produce(2, 1);
        let found = (0..STALE_SCAN_EVERY).position(|_| burst(&mut cq) != "empty");
        assert!(
            found.is_some(),
            "the search ran within {STALE_SCAN_EVERY} polls"
        );
        assert_eq!(cq.head(), 8 + 2, "slot 1 skipped");
        assert_eq!(burst(&mut cq), "cqe");
        assert_eq!(cq.head(), 8 + 3);
        // After a skip the next empty poll searches (fully) again.
        assert_eq!(burst(&mut cq), "searched");
        assert_eq!(burst(&mut cq), "empty");
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
        let mut cq = unsafe { CompQueue::new(base as *mut u8, 8, 9) };
        cq.set_head(8 + 5); // slot 5 of lap 1: a run wraps after three entries
        for idx in 8..13 {
            produce(idx, 0); // lap 1's entries before the head, consumed
        }
        for (i, tag) in [1u8, 2, 3, 4, 5].into_iter().enumerate() {
            produce(13 + i as u32, tag);
        }
        let mut r = cq.reader();
        let tags = |run: CqRun<'_>| run.map(|c| c.data[0]).collect::<Vec<_>>();
        let rq3 = queue_tag(3, false);
        assert_eq!(tags(r.run(2, rq3)), vec![1, 2], "stops at max");
        assert_eq!(tags(r.run(10, rq3)), vec![1, 2, 3], "stops at the ring end");
        assert!(
            tags(r.run(10, queue_tag(4, false))).is_empty(),
            "another queue"
        );
        assert!(tags(r.run(10, queue_tag(3, true))).is_empty(), "an SQ's");
        r.consume(3);
        assert_eq!(
            tags(r.run(10, rq3)),
            vec![4, 5],
            "goes on from slot 0, next lap"
        );
        r.consume(1);
        assert_eq!(tags(r.run(10, rq3)), vec![5], "stops at the empty slot");
        let Next::Cqe(c) = r.next() else {
            panic!("slot 2 ready")
        };
        assert_eq!(c.data[0], 5);
        assert!(matches!(r.next(), Next::Empty));
        drop(r);
        assert_eq!(cq.head(), 18, "the cursor's head is written back");
    }
}
