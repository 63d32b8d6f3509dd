//! Transmit queues: the burst function that writes send WQEs and rings the
//! SQ doorbell once per burst, completion reaping with CQE suppression, and
//! `tx_prepare` for the checksum offloads.
//!
//! A `TxQueue` lives in DPDK shared memory (`rte_zmalloc_socket`) so that
//! secondary processes can use it; it holds plain data only.
//!
//! Every burst's WQEs form one run: each but the last suppresses its CQE,
//! so one OK completion completes the run. The run's end is recorded when
//! it is posted, so reaping it is a few stores and one bulk free straight
//! from the ring of in-flight mbufs (`rte_mempool_put_bulk` when the queue
//! has `MBUF_FAST_FREE` and the run holds single-segment packets only).

use super::gate::{Gate, Pass};
use super::mbuf_ring::MbufRing;
use super::mr_cache::{self, Bounds};
use super::queue::{alloc_queue_mem, free_queue_mem, ControlToken, DataQueue, RingView};
use super::stats::Counter;
use super::tx_prepare::Tso;
use crate::ffi::{self, consts, mbuf, rte_mbuf};
use crate::hw::doorbell::Doorbell;
use crate::hw::ring::{queue_tag, CompQueue, Head, Next, WorkQueue, WqWriter};
use gdma::{CqeInfo, CqeType, Sge, TxShortOob, WqeHeader};
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::ptr::{self, NonNull};

#[cfg(target_arch = "x86_64")]
mod avx2;
mod path;
#[cfg(any(test, feature = "fuzzing"))]
pub mod side_by_side;
pub use path::{TxPath, TxPathWish};

/// One burst's run of WQEs, recorded when posted: where it ends in the
/// in-flight ring and in the SQ. An OK completion completes the oldest run.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Run {
    end: u32,
    sq_end: u32,
    /// The byte offset in the SQ of the run's last WQE: what the OK
    /// completion of the run names.
    last: u32,
    /// Every packet of the run is one direct segment of one pool, as
    /// `MBUF_FAST_FREE` promises: freed with one `rte_mempool_put_bulk`.
    fast: bool,
}

/// The per-descriptor memory of a queue: an mbuf pointer and a [`Run`]
/// record each, kept as two arrays (the mbuf pointers contiguous for bulk
/// frees).
type DescMem = [u64; 3];
const _: () = assert!(
    std::mem::size_of::<*mut rte_mbuf>() + std::mem::size_of::<Run>()
        <= std::mem::size_of::<DescMem>()
);

/// Why a packet handed to `tx_burst` was dropped (and freed) by the driver.
#[derive(Clone, Copy, Debug)]
#[repr(usize)]
pub enum DropReason {
    /// A segment outside every registered memory region.
    NoMemoryRegion,
    /// More segments than a WQE takes, and no mbuf to linearise into.
    TooManySegments,
    /// A TSO request the device cannot take (headers not in the first
    /// segment, MSS 0 or above 16383).
    BadTso,
}

/// Completion error counters by `CqeType` (index = type - 32, clamped).
pub const TX_ERR_KINDS: usize = 10;

#[derive(Default)]
#[repr(C)]
pub struct TxStats {
    pub packets: Counter,
    pub bytes: Counter,
    pub errors: Counter,
    pub drops: [Counter; 3],
    pub linearized: Counter,
    pub cqe_errors: [Counter; TX_ERR_KINDS],
    pub cqe_unexpected: Counter,
    /// Slots skipped: owner bits out of phase.
    pub cq_overflow: Counter,
    /// Slots skipped: left in the previous lap while later ones were written.
    pub cqe_stale: Counter,
    /// Completions naming another queue, refused.
    pub cqe_wrong_queue: Counter,
    /// Completions naming no WQE in flight (outside the ring, not at the
    /// start of a WQE, already completed), refused.
    pub cqe_bad_wqe: Counter,
    /// Unsuppressed WQEs whose completion never came, completed by a later
    /// one (counted as sent: the device took them).
    pub missed: Counter,
}

/// What a transmit queue was set up with; fixed for its life.
#[repr(C)]
pub struct TxConf {
    pub port_id: u16,
    pub queue_id: u16,
    pub socket: c_int,
    pub nb_desc: u16,
    pub offloads: u64,
    pub conf: ffi::rte_eth_txconf,
    /// The plain send run the queue uses ([`TxPath::choose`]).
    pub path: TxPath,
}

/// A transmit queue (in DPDK shared memory, plain data only).
#[repr(C, align(64))]
pub struct TxQueue {
    gate: Gate,
    /// Reached only through [`TxQueue::burst_state`] and
    /// [`TxQueue::state_mut`] (see `queue`).
    state: UnsafeCell<TxState>,
    pub stats: TxStats,
    pub conf: TxConf,
}

/// The state a burst owns: the rings and the sends in flight.
#[repr(C)]
pub struct TxState {
    sq: WorkQueue,
    sq_db: Doorbell,
    cq: CompQueue,
    /// The mbufs of the sends in flight, oldest first. What a send put on
    /// the wire and how much of the SQ its WQE takes follow from the mbuf
    /// (`Sent::of`), which is ours until the send completes.
    inflight: MbufRing,
    /// Runs in flight, oldest first; as many slots as descriptors.
    runs: *mut Run,
    run_head: u32,
    run_tail: u32,
    nb_desc: u32,
    /// Per-queue OOB fields (vcq_num, vsq_frame, vport offset).
    oob_template: TxShortOob,
    /// The vPort offset does not fit the short OOB: always use the long one.
    long_vp: Option<u16>,
    max_sge: u32,
    /// The application promised `MBUF_FAST_FREE`.
    fast_free: bool,
    mr: mr_cache::Cache,
}

/// What `start` needs from the verbs objects (`manadv_init_obj`).
pub struct TxHw {
    pub sq_buf: *mut u8,
    pub sq_size: u32,
    pub sq_id: u32,
    pub cq_buf: *mut u8,
    pub cq_count: u32,
    pub cq_id: u32,
    pub vp_offset: u32,
    pub max_sge: u32,
}

impl TxQueue {
    /// Allocates a queue and its descriptor ring on the configured socket.
    pub fn alloc(conf: TxConf) -> Option<NonNull<TxQueue>> {
        debug_assert!(conf.nb_desc.is_power_of_two());
        let (q, desc) =
            alloc_queue_mem::<TxQueue, DescMem>(c"mana_txq", conf.nb_desc.into(), conf.socket)?;
        let nb_desc = u32::from(conf.nb_desc);
        // The two arrays, each 8-byte aligned, inside the allocation.
        let n = nb_desc as usize;
        let base = desc as *mut u8;
        // SAFETY: fresh memory for one queue, written before anyone sees
        // it; the arrays lie inside the nb_desc * 24 bytes of `desc` (the
        // const assertion above), zeroed (rte_zmalloc).
        unsafe {
            let mbufs = base as *mut *mut rte_mbuf;
            let runs = base.add(n * std::mem::size_of::<*mut rte_mbuf>()) as *mut Run;
            ptr::write(
                q,
                TxQueue {
                    gate: Gate::new(),
                    state: UnsafeCell::new(TxState {
                        sq: WorkQueue::empty(),
                        sq_db: Doorbell::default(),
                        cq: CompQueue::empty(),
                        inflight: MbufRing::new(mbufs, nb_desc),
                        runs,
                        run_head: 0,
                        run_tail: 0,
                        nb_desc,
                        oob_template: TxShortOob::new(),
                        long_vp: None,
                        max_sge: 1,
                        fast_free: conf.offloads & consts::TX_OFFLOAD_MBUF_FAST_FREE != 0,
                        mr: mr_cache::Cache::new(),
                    }),
                    stats: TxStats::default(),
                    conf,
                },
            );
        }
        NonNull::new(q)
    }

    /// The burst state, for the burst holding the gate's pass.
    #[inline(always)]
    fn burst_state<'a>(&'a self, _pass: &'a mut Pass<'_>) -> &'a mut TxState {
        // SAFETY: a pass is held by one thread at a time and excludes every
        // other access to the state (bursts need a pass; control code needs
        // the gate closed, which a live pass prevents); borrowing the pass
        // mutably for as long as the state keeps a second reference out.
        unsafe { &mut *self.state.get() }
    }

    /// The burst state for control code: only with the gate closed (no
    /// burst inside, none can enter) and the port's control token borrowed.
    pub fn state_mut<'a>(&'a self, _token: &'a mut ControlToken) -> Option<&'a mut TxState> {
        // SAFETY: a closed gate excludes bursts, the token excludes other
        // control paths, and the borrow of the token keeps this unique.
        self.gate
            .is_closed()
            .then(|| unsafe { &mut *self.state.get() })
    }

    /// The view a burst works through.
    fn burst<'a>(&'a self, st: &'a mut TxState) -> Burst<'a> {
        Burst { st, q: self }
    }

    /// Reaps the completions the device has written, unless a burst is
    /// running: sends are counted when posted and taken back when their
    /// error completion is reaped, so a queue nobody polls (forwarding
    /// stopped) would keep counting what the device dropped as sent. Called
    /// before statistics are read, in any process.
    pub fn settle(&self) {
        if let Some(mut pass) = self.gate.enter() {
            let st = self.burst_state(&mut pass);
            self.burst(st).reap();
        }
    }

    /// The rings' positions, taken inside the gate like a burst, or `None`
    /// while the gate is closed or a burst runs.
    pub fn view(&self) -> Option<RingView> {
        let mut pass = self.gate.enter()?;
        let st = self.burst_state(&mut pass);
        Some(RingView {
            wq_producer: st.sq.doorbell_tail(),
            wq_consumer: st.sq.tail.wrapping_mul(gdma::WQE_BU_SIZE as u32),
            cq_head: st.cq.head(),
            held: st.inflight.len(),
        })
    }

    /// Attaches the rings of freshly created verbs objects.
    ///
    /// # Safety
    /// The rings of `hw` stay valid until [`TxQueue::detach`].
    pub unsafe fn attach(&self, st: &mut TxState, hw: &TxHw) {
        // SAFETY: the caller keeps the rings valid until detach.
        unsafe {
            st.sq = WorkQueue::new(hw.sq_buf, hw.sq_size, hw.sq_id);
            st.cq = CompQueue::new(hw.cq_buf, hw.cq_count, hw.cq_id);
        }
        st.sq_db = Doorbell::sq(hw.sq_id);
        let (vp_short, long_vp) = match u8::try_from(hw.vp_offset) {
            Ok(v) => (v, None),
            Err(_) => (0, Some(hw.vp_offset as u16)),
        };
        st.oob_template = TxShortOob::new()
            .with_vcq_num(hw.cq_id & 0xff_ffff)
            .with_vsq_frame(gdma::vsq_frame(hw.sq_id))
            .with_short_vp_offset(vp_short);
        st.long_vp = long_vp;
        st.max_sge = hw.max_sge.clamp(1, gdma::MAX_TX_WQE_SGES as u32);
        st.inflight.head = 0;
        st.inflight.tail = 0;
        st.run_head = 0;
        st.run_tail = 0;
    }

    /// After the hardware queue is gone: frees every mbuf still in flight
    /// (they will never complete) and forgets the rings. Returns how many.
    pub fn detach(&self, st: &mut TxState) -> u32 {
        self.burst(st).detach()
    }

    /// Reaps completions with the gate closed (stopping, draining).
    pub fn reap(&self, st: &mut TxState) -> u32 {
        self.burst(st).reap()
    }
}

impl TxState {
    pub fn in_flight(&self) -> u32 {
        self.inflight.len()
    }

    /// The [`Run`] record of run position `pos`.
    #[inline(always)]
    fn run_at(&mut self, pos: u32) -> &mut Run {
        // SAFETY: the index is masked into the `nb_desc` records `alloc`
        // carved out of the queue's descriptor memory (runs never outnumber
        // descriptors, so the ring of records cannot overflow).
        unsafe { &mut *self.runs.add(self.inflight.index(pos)) }
    }

    /// What the oldest send in flight put on the wire.
    fn oldest_sent(&self) -> Sent {
        Sent::of(self.inflight.oldest(), self.long_vp.is_some())
    }
}

impl DataQueue for TxQueue {
    const KIND: &'static str = "tx";
    fn gate(&self) -> &Gate {
        &self.gate
    }
    fn nb_desc(&self) -> u16 {
        self.conf.nb_desc
    }
    fn socket(&self) -> c_int {
        self.conf.socket
    }
    fn deferred_start(&self) -> bool {
        self.conf.conf.tx_deferred_start != 0
    }
    unsafe fn free(q: NonNull<TxQueue>) {
        // SAFETY: the caller gives us a closed queue nobody uses any more,
        // so its state is ours alone; its memory came from `alloc`.
        unsafe {
            let st = &mut *q.as_ref().state.get();
            q.as_ref().burst(st).detach();
            free_queue_mem(q.as_ptr(), st.inflight.slots() as *mut DescMem);
        }
    }
}

/// A burst's view: the state it owns and the queue's shared parts.
struct Burst<'a> {
    st: &'a mut TxState,
    q: &'a TxQueue,
}

impl Burst<'_> {
    /// After the hardware queue is gone: frees every mbuf still in flight
    /// (they will never complete) and forgets the rings. Returns how many.
    fn detach(&mut self) -> u32 {
        let n = self.st.inflight.len();
        while !self.st.inflight.is_empty() {
            let s = self.st.oldest_sent();
            let m = self.st.inflight.take();
            // Counted as sent when posted; they never reached the wire.
            self.q.stats.packets.sub(u64::from(s.packets));
            self.q.stats.bytes.sub(s.bytes);
            self.q.stats.errors.add(u64::from(s.packets));
            // SAFETY: the mbuf was handed to us by tx_burst and not freed.
            unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
        }
        self.st.run_tail = self.st.run_head;
        self.st.sq = WorkQueue::empty();
        self.st.cq = CompQueue::empty();
        self.st.mr.clear();
        n
    }

    /// Frees the oldest `n` in-flight mbufs, in bulk, straight from the
    /// ring; `fast`: all single-segment mbufs of the first one's pool with
    /// a reference count of one (`MBUF_FAST_FREE`).
    #[inline(always)]
    fn free_oldest(&mut self, n: u32, fast: bool) {
        if n == 0 {
            return;
        }
        let ring = &mut self.st.inflight;
        // SAFETY: the ring holds at least `n` mbufs (the caller's count of
        // a run's remaining slots), valid, sent and completed.
        let pool = unsafe { (*ring.oldest()).pool };
        for (p, k) in ring.take_runs(n) {
            if k == 0 {
                continue;
            }
            // SAFETY: `p` points to `k` completed mbufs of this queue, ours
            // to free; with `fast`, the application promised (and `post`
            // checked the segment count) that they are direct, of `pool`,
            // with a reference count of one, so returning them to the pool
            // is what rte_pktmbuf_free would do.
            unsafe {
                if fast {
                    ffi::mana_shim_mempool_put_bulk(pool, p as *const *mut c_void, k);
                } else {
                    ffi::rte_pktmbuf_free_bulk(p, k);
                }
            }
        }
    }

    /// How many sends in flight, from the oldest, a completion naming the
    /// WQE at byte offset `wqe_offset` completes (that WQE included); `None`
    /// if no WQE in flight starts there.
    fn completes(&mut self, wqe_offset: u32) -> Option<u32> {
        let want = self.st.sq.bu_from_tail(wqe_offset)?;
        if want >= self.st.sq.head.wrapping_sub(self.st.sq.tail) {
            return None;
        }
        let long_vp = self.st.long_vp.is_some();
        let (tail, sq_tail) = (self.st.inflight.tail, self.st.sq.tail);
        let mut run = self.st.run_tail;
        let mut at = 0u32;
        for k in 0..self.st.inflight.len() {
            if at == want {
                return Some(k + 1);
            }
            let pos = tail.wrapping_add(k);
            let r = *self.st.run_at(run);
            if pos.wrapping_add(1) == r.end {
                // The run's end: where the next one starts in the SQ.
                at = r.sq_end.wrapping_sub(sq_tail);
                run = run.wrapping_add(1);
            } else {
                at += Sent::of(self.st.inflight.at(pos), long_vp).bu;
            }
            if at > want {
                return None;
            }
        }
        None
    }

    /// Processes every available completion, freeing the sent mbufs in
    /// bulk. Returns the number of packets completed.
    ///
    /// A completion names the WQE it is for (its offset in the ring): it
    /// completes every WQE in flight up to that one, in order. The ones
    /// before it are the suppressed run the device completes silently, or
    /// sends whose own completion never came (counted as missed); either
    /// way the device took them. A completion for another queue, or naming
    /// no WQE in flight (a repeated one, one outside the ring), is counted
    /// and refused: no mbuf is ever freed twice.
    fn reap(&mut self) -> u32 {
        let mut completed = 0u32;
        let tag = queue_tag(self.st.sq.id, true);
        loop {
            // The empty head slot, which ends every reap, costs one compare
            // and the countdown this way (`next` would find the slot and
            // lap and move the head's cached state again).
            if self.st.cq.check() == Head::Empty {
                break;
            }
            let (ty, info, off) = match self.st.cq.next() {
                Next::Cqe(cqe) => (
                    cqe.header().cqe_type_raw(),
                    cqe.info,
                    cqe.tx_oob().offsets.tx_wqe_offset(),
                ),
                Next::Empty => break,
                Next::OutOfPhase => {
                    self.q.stats.cq_overflow.add(1);
                    continue;
                }
                Next::Stale => {
                    self.q.stats.cqe_stale.add(1);
                    continue;
                }
            };
            if ty == CqeType::TxOkay as u8
                && info.to_raw() & queue_tag(0xff_ffff, true) == tag
                && self.st.run_tail != self.st.run_head
                && off == self.st.run_at(self.st.run_tail).last
            {
                // The oldest run is complete (what error completions left
                // of it).
                let r = *self.st.run_at(self.st.run_tail);
                self.st.run_tail = self.st.run_tail.wrapping_add(1);
                let n = r.end.wrapping_sub(self.st.inflight.tail);
                self.free_oldest(n, r.fast && self.st.fast_free);
                self.st.sq.tail = r.sq_end;
                completed += n;
            } else {
                completed += self.resync(ty, info, off);
            }
        }
        completed
    }

    /// A completion other than the OK of the oldest run in flight: checked
    /// against the queue (refused and counted if it names another queue or
    /// no WQE in flight), it completes every send up to the WQE it names.
    /// Returns how many sends it completed.
    #[cold]
    #[inline(never)]
    fn resync(&mut self, ty: u8, info: CqeInfo, off: u32) -> u32 {
        if !info.is_sq() || info.wq_num() != self.st.sq.id & 0xff_ffff {
            self.q.stats.cqe_wrong_queue.add(1);
            return 0;
        }
        let Some(n) = self.completes(off) else {
            self.q.stats.cqe_bad_wqe.add(1);
            return 0;
        };
        // An error completion is for its WQE alone; an unknown (garbled)
        // one leaves the fate of its WQE and those before it unknown: they
        // count as errors.
        let ok = ty == CqeType::TxOkay as u8;
        let mut unknown = false;
        if !ok {
            match CqeType::from_raw(ty) {
                Some(t) if t.is_tx() => {
                    let i = usize::from(ty - CqeType::TxOkay as u8).min(TX_ERR_KINDS - 1);
                    self.q.stats.cqe_errors[i].add(1);
                }
                _ => {
                    self.q.stats.cqe_unexpected.add(1);
                    unknown = true;
                }
            }
        }
        let (mut unsent, mut unsent_bytes) = (0u64, 0u64);
        for k in 0..n {
            let s = self.st.oldest_sent();
            let last = k + 1 == n;
            let r = *self.st.run_at(self.st.run_tail);
            let ends_run = self.st.inflight.tail.wrapping_add(1) == r.end;
            if !last && ends_run {
                // An unsuppressed WQE whose own completion never came.
                self.q.stats.missed.add(1);
            }
            if unknown || (last && !ok) {
                // Counted as sent when posted; the device dropped it.
                self.q.stats.errors.add(1);
                unsent += u64::from(s.packets);
                unsent_bytes += s.bytes;
            }
            self.st.sq.tail = self.st.sq.tail.wrapping_add(s.bu);
            self.free_oldest(1, false);
            if ends_run {
                self.st.sq.tail = r.sq_end;
                self.st.run_tail = self.st.run_tail.wrapping_add(1);
            }
        }
        self.q.stats.packets.sub(unsent);
        self.q.stats.bytes.sub(unsent_bytes);
        n
    }

    /// Posts packets until the ring or the burst ends; rings the doorbell
    /// once. Returns how many packets were consumed (sent or dropped).
    ///
    /// A packet of one segment without segmentation, in the region the last
    /// packet was in, takes the fast path (`fast_run`): a WQE of one unit
    /// (short OOB) or two (long OOB: VLAN insertion, a large vPort offset)
    /// from the queue's template, checksum offload bits ORed in. Chains, TSO
    /// and region changes go through [`TxQueue::general`], one packet at a
    /// time, between fast runs.
    fn post(&mut self, pkts: &mut [*mut rte_mbuf]) -> usize {
        let q = self.q;
        let run_start = self.st.inflight.head;
        let (i, sq_end, ring, last_oob, bytes, one_pool, extra_packets) = {
            let TxState {
                sq,
                inflight,
                nb_desc,
                oob_template,
                long_vp,
                max_sge,
                mr,
                ..
            } = &mut *self.st;
            let shape = Shape {
                template: *oob_template,
                long_vp: *long_vp,
                max_sge: *max_sge,
            };
            let mut f = Fast {
                // Every WQE suppresses its CQE; the last one's bit is
                // cleared below.
                template: oob_template.to_raw() | bits::SUPPRESS,
                long_template: bits::long_vp(*long_vp),
                region: mr.first().bounds(),
                wq: sq.writer(),
                ring: *inflight,
                last_oob: ptr::null_mut(),
                bytes: 0,
                memo: Memo::NONE,
                vector: q.conf.path == TxPath::VectorAvx2,
            };
            // Every packet posted takes one descriptor.
            let n = pkts.len().min((*nb_desc - f.ring.len()) as usize);
            let (mut one_pool, mut extra_packets) = (true, 0u64);
            let mut i = 0;
            while i < n {
                i += f.run(&pkts[i..n]);
                if i == n {
                    break;
                }
                let took = f.run_offload(&pkts[i..n]);
                i += took;
                if i == n {
                    break;
                }
                if took > 0 {
                    // Maybe plain packets again.
                    continue;
                }
                // Neither fast loop takes this one.
                let (wq, outcome) =
                    q.general(&shape, mr, f.wq, &mut f.ring, &mut pkts[i], &mut f.region);
                f.wq = wq;
                match outcome {
                    Posted::Wqe(oob, one, packets, bytes) => {
                        f.last_oob = oob;
                        one_pool &= one;
                        extra_packets += u64::from(packets) - 1;
                        f.bytes += bytes;
                    }
                    Posted::Dropped => {}
                    Posted::Full => break,
                }
                i += 1;
            }
            let sq_end = f.wq.head();
            (
                i,
                sq_end,
                f.ring,
                f.last_oob,
                f.bytes,
                one_pool,
                extra_packets,
            )
        };
        let st = &mut *self.st;
        st.inflight = ring;
        // Counted when the device takes them (so counters agree with the
        // device's whenever the queue is idle); errors are taken back at reap.
        let posted = ring.head.wrapping_sub(run_start);
        q.stats.packets.add(u64::from(posted) + extra_packets);
        q.stats.bytes.add(bytes);
        if posted > 0 {
            // The run's last WQE produces the CQE that completes the run.
            // SAFETY: the OOB of the WQE just written, in the SQ ring; the
            // device has not been told about it yet.
            unsafe { *last_oob &= !bits::SUPPRESS_BYTE0 };
            let pos = st.run_head;
            let last = st.sq.offset_of_oob(last_oob);
            *st.run_at(pos) = Run {
                end: ring.head,
                sq_end,
                last,
                fast: one_pool,
            };
            st.run_head = pos.wrapping_add(1);
            st.sq_db.ring(q.conf.port_id, st.sq.doorbell_tail());
        }
        i
    }
}

/// The fast path's state for one burst: per-burst constants and the rings'
/// cursors, kept in registers by `Fast::run`.
struct Fast<'w> {
    template: u64,
    long_template: u64,
    region: Bounds,
    wq: WqWriter<'w>,
    ring: MbufRing,
    last_oob: *mut u8,
    bytes: u64,
    /// The last offload request `run_offload` saw (see [`Memo::words`]).
    memo: Memo,
    /// The plain run takes groups of four with the vector step.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    vector: bool,
}

/// An offload request's OOB words, kept for the next packet: packets of a
/// flow ask for the same thing, so they reuse them instead of recomputing.
#[derive(Clone, Copy)]
struct Memo {
    key: u64,
    /// Checksum bits of the short OOB.
    csum: u64,
    /// First word of the long OOB (vPort offset and VLAN tag).
    long: u64,
    /// Basic units of the WQE: 2 with the long OOB, else 1.
    bu: u32,
    /// Bytes the inserted tag adds on the wire (4 or 0).
    tag: u32,
}

impl Memo {
    /// Matches no request (a key has no bit above 57).
    const NONE: Memo = Memo {
        key: u64::MAX,
        csum: 0,
        long: 0,
        bu: 1,
        tag: 0,
    };

    /// What the OOB words depend on: the requested flags, the header
    /// lengths and the TCI, in disjoint fields (l2_len and l3_len in bits
    /// 0-15, the TCI in 16-31, the flags in 52-57).
    #[inline(always)]
    fn key_of(ol: u64, m: *mut rte_mbuf) -> u64 {
        // SAFETY: a valid mbuf handed to tx_burst.
        let (t, tci) = unsafe { (mbuf::tx_offload(m), mbuf::vlan_tci(m)) };
        (ol & ASKED) | (t & 0xffff) | (u64::from(tci) << 16)
    }

    /// Whether a packet (`m`, its flags `ol`) asks for the request of `key`
    /// (the same WQE but for the SGE) without TSO: `key_of(ol, m) == key`
    /// and no `TX_TCP_SEG`, compared field by field so that each compare
    /// takes its operand straight from the mbuf (the key is taken apart
    /// once per run, not built per packet).
    #[inline(always)]
    fn same(key: u64) -> impl Fn(*mut rte_mbuf, u64) -> bool {
        let (flags, lens, tci) = (key & ASKED, key as u16, (key >> 16) as u16);
        move |m, ol| {
            // SAFETY: a valid mbuf handed to tx_burst.
            let (t, c) = unsafe { (mbuf::tx_offload(m), mbuf::vlan_tci(m)) };
            ol & (ASKED | ffi::RTE_MBUF_F_TX_TCP_SEG) == flags && t as u16 == lens && c == tci
        }
    }

    /// The OOB words and WQE shape for a packet that asks for checksum
    /// offload or VLAN insertion: the last packet's when it asked for the
    /// same (flags, header lengths and tag), else computed and remembered.
    #[inline(always)]
    fn words(&mut self, ol: u64, m: *mut rte_mbuf, long_template: u64) -> Memo {
        let key = Memo::key_of(ol, m);
        if key != self.key {
            // SAFETY: a valid mbuf handed to tx_burst.
            let (t, tci) = unsafe { (mbuf::tx_offload(m), mbuf::vlan_tci(m)) };
            let vlan = ol & ffi::RTE_MBUF_F_TX_VLAN != 0;
            let long = vlan || long_template != 0;
            *self = Memo {
                key,
                csum: offload_bits(ol, || t),
                long: long_template | bits::when(vlan, bits::vlan(tci)),
                bu: 1 + u32::from(long),
                tag: 4 * u32::from(vlan),
            };
        }
        *self
    }
}

/// The flags that send a one-segment packet to `run_offload`.
const ASKED: u64 = OFFLOADS | ffi::RTE_MBUF_F_TX_VLAN;

impl Fast<'_> {
    /// Posts plain packets (one segment, no TSO, no checksum or VLAN
    /// request) from the start of `pkts` (for which the ring has
    /// descriptors); returns how many. Stops at the first packet that is
    /// not plain or not in the region (or when the SQ is full).
    #[inline(always)]
    fn run(&mut self, pkts: &[*mut rte_mbuf]) -> usize {
        // One unit with the short OOB, two with the long one (a vPort
        // offset above 255: long_template != 0), the same for the burst.
        let reject = ffi::RTE_MBUF_F_TX_TCP_SEG | ASKED;
        if self.long_template == 0 {
            #[cfg(target_arch = "x86_64")]
            if self.vector {
                return self.run_vector(pkts, reject);
            }
            self.run_fixed::<1>(
                pkts,
                bits::HDR_PLAIN,
                [self.template, 0, 0],
                0,
                reject,
                |_, _| true,
            )
        } else {
            let oob = [self.template | bits::LONG, self.long_template, 0];
            self.run_fixed::<2>(pkts, bits::HDR_LONG_PLAIN, oob, 0, reject, |_, _| true)
        }
    }

    /// Posts one-segment packets without TSO that ask for checksum offload
    /// or VLAN insertion (the OOB bits of the request, a long OOB with the
    /// tag), in runs of packets asking for the same (see [`Memo`]); stops
    /// at the first packet that does not ask (or is not in the region, or
    /// when the SQ is full).
    #[inline(always)]
    fn run_offload(&mut self, pkts: &[*mut rte_mbuf]) -> usize {
        let mut done = 0;
        while let Some(&m) = pkts.get(done) {
            // SAFETY: tx_burst's caller hands us valid mbufs.
            let (ol, nb_segs) = unsafe { ((*m).ol_flags, mbuf::nb_segs(m)) };
            if nb_segs != 1 || ol & ffi::RTE_MBUF_F_TX_TCP_SEG != 0 || ol & ASKED == 0 {
                break;
            }
            let w = self.memo.words(ol, m, self.long_template);
            let oob = self.template | w.csum;
            // `same` rules TSO out with the flags.
            let reject = 0;
            let same = Memo::same(w.key);
            let rest = &pkts[done..];
            let k = if w.bu == 1 {
                self.run_fixed::<1>(rest, bits::HDR_PLAIN, [oob, 0, 0], w.tag, reject, same)
            } else {
                let oob = [oob | bits::LONG, w.long, 0];
                self.run_fixed::<2>(rest, bits::HDR_LONG_PLAIN, oob, w.tag, reject, same)
            };
            if k == 0 {
                break;
            }
            done += k;
        }
        done
    }

    /// Posts one-segment packets from the start of `pkts` as WQEs of `BU`
    /// basic units that differ only in their SGE (header `header`, OOB
    /// `oob`, each packet's bytes on the wire its length plus `tag`), while
    /// a packet has none of the `reject` flags and `takes` it: over the
    /// contiguous part of the SQ and the in-flight ring in one loop indexed
    /// by one counter, with the cursors and the region in registers (the
    /// run is cut to the room first). Returns how many; stops at a packet
    /// it does not take or outside the region, or when the SQ is full.
    #[inline(always)]
    fn run_fixed<const BU: u32>(
        &mut self,
        pkts: &[*mut rte_mbuf],
        header: u64,
        oob: [u64; 3],
        tag: u32,
        reject: u64,
        takes: impl Fn(*mut rte_mbuf, u64) -> bool,
    ) -> usize {
        let region = self.region;
        let lkey = region.lkey;
        let mut bytes = self.bytes;
        let mut done = 0usize;
        while done < pkts.len() {
            let rest = &pkts[done..];
            // The caller keeps the packets within the ring's free slots.
            let max = (rest.len() as u32).min(self.wq.free_bu() / BU);
            let slots = self.ring.vacant_run(max);
            let n = slots.len() as u32;
            let mut one = |j: usize| {
                let m = rest[j];
                // SAFETY: tx_burst's caller hands us valid mbufs.
                let (ol, nb_segs) = unsafe { ((*m).ol_flags, mbuf::nb_segs(m)) };
                if nb_segs != 1 || ol & reject != 0 || !takes(m, ol) {
                    return None;
                }
                // SAFETY: a valid single-segment mbuf.
                let (addr, len, pkt_len) = unsafe {
                    (
                        (*m).buf_addr as usize + usize::from(mbuf::data_off(m)),
                        u32::from(mbuf::data_len(m)),
                        mbuf::pkt_len(m),
                    )
                };
                if !region.covers(addr, len as usize) {
                    return None;
                }
                slots[j].write(m);
                // An inserted tag is on the wire too (in 64 bits, as
                // `Sent::of`: `pkt_len` is the application's word).
                bytes += u64::from(pkt_len) + u64::from(tag);
                Some(Sge::new(addr as u64, lkey, len).to_words())
            };
            // As many as lie before the SQ's end: a two-unit WQE across it
            // is written on its own.
            let fit = n.min(self.wq.contiguous_bu() / BU);
            let k = if fit > 0 {
                self.wq.post_run::<BU>(header, oob, fit, one)
            } else if BU == 2 && n > 0 {
                match one(0) {
                    Some(sge) => {
                        self.wq.post_long_words(header, oob, sge);
                        1
                    }
                    None => 0,
                }
            } else {
                0
            };
            self.ring.commit(k);
            done += k as usize;
            if k == 0 {
                break;
            }
            self.last_oob = self.wq.last_oob(BU);
            if k < fit {
                // A packet it does not take, or outside the region.
                break;
            }
        }
        self.bytes = bytes;
        done
    }
}

/// What the general path did with one packet.
enum Posted {
    /// Written as a WQE: its OOB (for late patching), one segment of one
    /// pool (for `MBUF_FAST_FREE`), packets and bytes on the wire.
    Wqe(*mut u8, bool, u32, u64),
    /// Dropped (and freed).
    Dropped,
    /// No room left in the SQ: the burst ends.
    Full,
}

/// What a send puts on the wire and takes of the SQ, from its mbuf: the
/// same function of the mbuf (ours until the send completes) when it is
/// posted and when its error completion or a teardown takes it back.
#[derive(Clone, Copy)]
struct Sent {
    /// Basic units of its WQE.
    bu: u32,
    /// Packets and bytes on the wire (a TSO send is several packets; an
    /// inserted VLAN tag adds 4 bytes to each).
    packets: u32,
    bytes: u64,
    /// SGEs of its WQE.
    num_sge: u32,
    /// The long OOB.
    long: bool,
    tso: Option<Tso>,
}

impl Sent {
    /// For `m`, as posted (after linearisation; a TSO request `Tso::of`
    /// refuses is never posted). `long_vp`: the queue needs the long OOB.
    fn of(m: *mut rte_mbuf, long_vp: bool) -> Sent {
        // SAFETY: a valid mbuf of a send we own.
        let (ol, nb_segs, pkt_len, tx_offload) = unsafe {
            (
                (*m).ol_flags,
                u32::from(mbuf::nb_segs(m)),
                mbuf::pkt_len(m),
                mbuf::tx_offload(m),
            )
        };
        let vlan = ol & ffi::RTE_MBUF_F_TX_VLAN != 0;
        let long = vlan || long_vp;
        let tso = if ol & ffi::RTE_MBUF_F_TX_TCP_SEG != 0 {
            Tso::of(m, ol, tx_offload).ok().flatten()
        } else {
            None
        };
        let num_sge = nb_segs + tso.map_or(0, |t| u32::from(t.split));
        let oob = if long {
            gdma::INLINE_OOB_LARGE_SIZE
        } else {
            gdma::INLINE_OOB_SMALL_SIZE
        };
        let (packets, bytes) = tso.map_or((1, pkt_len), |t| t.wire(pkt_len));
        let tag: u32 = if vlan { 4 } else { 0 };
        Sent {
            bu: gdma::wqe_size_bu(oob, num_sge as usize),
            packets,
            bytes: u64::from(bytes) + u64::from(tag) * u64::from(packets),
            num_sge,
            long,
            tso,
        }
    }
}

/// What the general path needs of a queue's burst state besides its rings.
struct Shape {
    template: TxShortOob,
    long_vp: Option<u16>,
    max_sge: u32,
}

impl TxQueue {
    fn drop_packet(&self, m: *mut rte_mbuf, why: DropReason) {
        self.stats.drops[why as usize].add(1);
        self.stats.errors.add(1);
        // SAFETY: the packet was handed to us and is freed exactly once.
        unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
    }

    /// The general path of `post` for one packet: chains (linearised when
    /// they have more segments than a WQE takes), TSO, and the first packet
    /// in a memory region other than the last one's. Takes the WQ cursor by
    /// value and gives it back, so the fast path keeps its copy in
    /// registers.
    #[inline(never)]
    fn general<'w>(
        &self,
        shape: &Shape,
        mr: &mut mr_cache::Cache,
        mut wq: WqWriter<'w>,
        ring: &mut MbufRing,
        slot: &mut *mut rte_mbuf,
        region: &mut Bounds,
    ) -> (WqWriter<'w>, Posted) {
        let mut m = *slot;
        // SAFETY: tx_burst's caller hands us valid mbuf chains.
        let (ol, nb_segs) = unsafe { ((*m).ol_flags, u32::from(mbuf::nb_segs(m))) };
        let tso = ol & ffi::RTE_MBUF_F_TX_TCP_SEG != 0;
        // TSO puts the headers alone in SGE 0: one more SGE at most.
        if nb_segs + u32::from(tso) > shape.max_sge {
            match linearize(m) {
                Some(l) => {
                    self.stats.linearized.add(1);
                    m = l;
                    *slot = l;
                }
                None => {
                    self.drop_packet(m, DropReason::TooManySegments);
                    return (wq, Posted::Dropped);
                }
            }
        }
        // SAFETY: a valid mbuf (linearize returns one too).
        let (vlan_tci, tx_offload, nb_segs) = unsafe {
            (
                mbuf::vlan_tci(m),
                mbuf::tx_offload(m),
                u32::from(mbuf::nb_segs(m)),
            )
        };
        if tso && Tso::of(m, ol, tx_offload).is_err() {
            self.drop_packet(m, DropReason::BadTso);
            return (wq, Posted::Dropped);
        }
        let sent = Sent::of(m, shape.long_vp.is_some());
        if wq.free_bu() < sent.bu {
            return (wq, Posted::Full);
        }
        let mut sgl = [Sge::default(); gdma::MAX_TX_WQE_SGES];
        let Some(()) = self.fill_sgl(mr, m, nb_segs, sent.tso, &mut sgl, region) else {
            self.drop_packet(m, DropReason::NoMemoryRegion);
            return (wq, Posted::Dropped);
        };
        let mut oob = [
            tx_oob(shape.template, ol, tx_offload, true, sent.long),
            0,
            0,
        ];
        let base = if sent.long {
            bits::HDR_LONG
        } else {
            bits::HDR_SHORT
        };
        let mut header = base | (u64::from(sent.num_sge) * bits::HDR_NUM_SGE_ONE);
        if let Some(t) = sent.tso {
            // As the kernel driver sends GSO: headers in SGE 0 (their
            // length in last_vbytes), MSS in client_data_unit.
            header = WqeHeader::from_raw(header)
                .with_client_oob_in_sgl(true)
                .with_last_vbytes(t.hdr_len)
                .with_client_data_unit(t.mss)
                .to_raw();
            oob[0] = TxShortOob::from_raw(oob[0])
                .with_comp_iphdr_csum(true)
                .with_comp_tcp_csum(true)
                .with_trans_off(t.trans_off)
                .to_raw();
        }
        if sent.long {
            let mut l = bits::long_vp(shape.long_vp);
            if ol & ffi::RTE_MBUF_F_TX_VLAN != 0 {
                l |= bits::vlan(vlan_tci);
            }
            oob[1] = l;
        }
        let oob_words = if sent.long { 3 } else { 1 };
        let last_oob = wq.post(
            header,
            &oob[..oob_words],
            &sgl[..sent.num_sge as usize],
            sent.bu,
        );
        ring.push(m);
        (
            wq,
            Posted::Wqe(last_oob, nb_segs == 1, sent.packets, sent.bytes),
        )
    }

    /// One SGE per segment; with TSO, the first segment's headers get an SGE
    /// of their own. `None` if a segment lies outside registered memory.
    fn fill_sgl(
        &self,
        mr: &mut mr_cache::Cache,
        m: *mut rte_mbuf,
        nb_segs: u32,
        tso: Option<Tso>,
        sgl: &mut [Sge],
        region: &mut Bounds,
    ) -> Option<()> {
        let mut seg = m;
        let mut k = 0;
        for j in 0..nb_segs {
            // SAFETY: walking a valid chain of nb_segs segments.
            let (addr, len, next) = unsafe {
                (
                    ((*seg).buf_addr as usize) + usize::from(mbuf::data_off(seg)),
                    u32::from(mbuf::data_len(seg)),
                    (*seg).next,
                )
            };
            if !region.covers(addr, len as usize) {
                *region = miss(mr, self.conf.port_id, addr, len as usize)?;
            }
            let lkey = region.lkey;
            match tso {
                Some(t) if j == 0 && t.split => {
                    let h = u32::from(t.hdr_len);
                    sgl[k] = Sge::new(addr as u64, lkey, h);
                    sgl[k + 1] = Sge::new((addr + h as usize) as u64, lkey, len - h);
                    k += 2;
                }
                _ => {
                    sgl[k] = Sge::new(addr as u64, lkey, len);
                    k += 1;
                }
            }
            seg = next;
        }
        Some(())
    }
}

/// A segment outside the region the burst checks against: the cache (or a
/// registration) gives the region that covers it.
#[cold]
#[inline(never)]
fn miss(mr: &mut mr_cache::Cache, port_id: u16, addr: usize, len: usize) -> Option<Bounds> {
    mr.lkey(port_id, addr, len)?;
    Some(mr.first().bounds())
}

/// Packet-dependent bits of the TX short OOB and the WQE header, taken once
/// from the typed definitions so the hot path only ORs constants.
mod bits {
    use gdma::{TxShortOob as O, WqeHeader as H};

    const fn o(x: O) -> u64 {
        x.to_raw()
    }
    pub const LONG: u64 = o(O::new().with_pkt_fmt(1));
    pub const IPV4: u64 = o(O::new().with_is_outer_ipv4(true));
    pub const IPV6: u64 = o(O::new().with_is_outer_ipv6(true));
    pub const IP_CSUM: u64 = o(O::new().with_comp_iphdr_csum(true));
    pub const TCP_CSUM: u64 = o(O::new().with_comp_tcp_csum(true));
    pub const UDP_CSUM: u64 = o(O::new().with_comp_udp_csum(true));
    pub const SUPPRESS: u64 = o(O::new().with_suppress_txcqe_gen(true));
    /// The suppression bit within the OOB's first byte (cleared in place on
    /// a run's last WQE).
    pub const SUPPRESS_BYTE0: u8 = SUPPRESS as u8;
    const _: () = assert!(SUPPRESS < 0x100, "the suppression bit is in byte 0");
    /// `trans_off = 1`; a multiple of it sets the 10-bit field.
    pub const TRANS_OFF_ONE: u64 = o(O::new().with_trans_off(1));
    pub const HDR_SHORT: u64 = H::new()
        .with_inline_oob_size_div4((gdma::INLINE_OOB_SMALL_SIZE / 4) as u8)
        .to_raw();
    pub const HDR_LONG: u64 = H::new()
        .with_inline_oob_size_div4((gdma::INLINE_OOB_LARGE_SIZE / 4) as u8)
        .to_raw();
    /// `num_sge = 1`; a multiple of it sets the 8-bit field.
    pub const HDR_NUM_SGE_ONE: u64 = H::new().with_num_sge(1).to_raw();
    /// The header of the plain send: short OOB, one SGE (one basic unit).
    pub const HDR_PLAIN: u64 = H::new()
        .with_inline_oob_size_div4((gdma::INLINE_OOB_SMALL_SIZE / 4) as u8)
        .with_num_sge(1)
        .to_raw();
    /// The header of a one-segment send with the long OOB (two units).
    pub const HDR_LONG_PLAIN: u64 = H::new()
        .with_inline_oob_size_div4((gdma::INLINE_OOB_LARGE_SIZE / 4) as u8)
        .with_num_sge(1)
        .to_raw();

    const fn l(x: gdma::TxLongOob) -> u64 {
        let v = x.to_raw();
        assert!(v >> 64 == 0, "the long OOB's second word is reserved");
        v as u64
    }
    const VLAN_INSERT: u64 = l(gdma::TxLongOob::new().with_inject_vlan_pri_tag(true));
    /// `pcp = 1`, `dei = 1`, `vlan_id = 1`, `long_vp_offset = 1`: multiples
    /// of them set the fields.
    const PCP_ONE: u64 = l(gdma::TxLongOob::new().with_pcp(1));
    const DEI: u64 = l(gdma::TxLongOob::new().with_dei(true));
    const VID_ONE: u64 = l(gdma::TxLongOob::new().with_vlan_id(1));
    const VP_ONE: u64 = l(gdma::TxLongOob::new().with_long_vp_offset(1));

    /// The first word of the long OOB with only the vPort offset set (the
    /// second word is reserved, zero).
    #[inline(always)]
    pub fn long_vp(vp: Option<u16>) -> u64 {
        u64::from(vp.unwrap_or(0) & 0xfff) * VP_ONE
    }

    /// By the TCI's top nibble (PCP and DEI): the bits they set, with the
    /// insertion flag.
    static TCI_TOP: [u64; 16] = {
        let mut t = [0u64; 16];
        let mut i = 0;
        while i < 16 {
            t[i] = VLAN_INSERT | ((i as u64 >> 1) * PCP_ONE) | ((i as u64 & 1) * DEI);
            i += 1;
        }
        t
    };

    /// The bits a VLAN TCI sets in the first word of the long OOB.
    #[inline(always)]
    pub fn vlan(tci: u16) -> u64 {
        TCI_TOP[usize::from(tci >> 12)] | (u64::from(tci & 0xfff) * VID_ONE)
    }

    /// `b` if `on`, else 0, without a branch.
    #[inline(always)]
    pub const fn when(on: bool, b: u64) -> u64 {
        b & (on as u64).wrapping_neg()
    }
}

const OFFLOADS: u64 = ffi::RTE_MBUF_F_TX_L4_MASK
    | ffi::RTE_MBUF_F_TX_IP_CKSUM
    | ffi::RTE_MBUF_F_TX_IPV4
    | ffi::RTE_MBUF_F_TX_IPV6;
/// The checksum flags are adjacent bits of `ol_flags` (L4 type, IP
/// checksum, IPv4, IPv6): they index `CSUM_OOB`.
const OFFLOADS_SHIFT: u32 = OFFLOADS.trailing_zeros();
const _: () = assert!(
    OFFLOADS >> OFFLOADS_SHIFT == 0x1f,
    "five adjacent flag bits"
);

/// By checksum flags: the short OOB bits they ask for, and the mask of the
/// `trans_off` field where the transport offset is needed (TCP), else 0.
static CSUM_OOB: [(u64, u64); 32] = csum_oob_table();

/// The `trans_off` field (10 bits).
const TRANS_OFF_MASK: u64 = 0x3ff * bits::TRANS_OFF_ONE;
// l2_len (7 bits) + l3_len (9 bits) is at most 127 + 511 = 638: it always
// fits the 10-bit field, so the offset needs no clamp (the test of the
// precomputed bits tries the largest lengths).

const fn csum_oob_table() -> [(u64, u64); 32] {
    let mut t = [(0u64, 0u64); 32];
    let mut i = 0;
    while i < 32 {
        let ol = (i as u64) << OFFLOADS_SHIFT;
        let l4 = ol & ffi::RTE_MBUF_F_TX_L4_MASK;
        let tcp = l4 == ffi::RTE_MBUF_F_TX_TCP_CKSUM;
        let mut o = 0;
        if ol & ffi::RTE_MBUF_F_TX_IPV4 != 0 {
            o |= bits::IPV4;
        }
        if ol & ffi::RTE_MBUF_F_TX_IPV6 != 0 {
            o |= bits::IPV6;
        }
        if ol & ffi::RTE_MBUF_F_TX_IP_CKSUM != 0 {
            o |= bits::IP_CSUM;
        }
        if tcp {
            o |= bits::TCP_CSUM;
        }
        if l4 == ffi::RTE_MBUF_F_TX_UDP_CKSUM {
            o |= bits::UDP_CSUM;
        }
        t[i] = (o, if tcp { TRANS_OFF_MASK } else { 0 });
        i += 1;
    }
    t
}

/// The OOB bits the checksum flags ask for, with the transport offset
/// (`l2_len + l3_len` of `tx_offload`) where TCP needs it; branch-free.
#[inline(always)]
fn offload_bits(ol: u64, tx_offload: impl FnOnce() -> u64) -> u64 {
    let (o, off_mask) = CSUM_OOB[((ol >> OFFLOADS_SHIFT) & 0x1f) as usize];
    // l2_len is bits 0-6 of tx_offload, l3_len bits 7-15.
    let t = tx_offload();
    let off = (t & 0x7f) + ((t >> 7) & 0x1ff);
    o | ((off * bits::TRANS_OFF_ONE) & off_mask)
}

/// The short OOB for one packet, as its raw value.
#[inline(always)]
fn tx_oob(template: TxShortOob, ol: u64, tx_offload: u64, suppressed: bool, long: bool) -> u64 {
    use bits::when;
    let mut o = template.to_raw() | when(long, bits::LONG) | when(suppressed, bits::SUPPRESS);
    if ol & OFFLOADS != 0 {
        o |= offload_bits(ol, || tx_offload);
    }
    o
}

/// Copies a chain into one new mbuf of the same pool, keeping the offload
/// metadata; frees the chain. `None` if the packet does not fit or the pool
/// is empty (the chain is then left untouched).
fn linearize(m: *mut rte_mbuf) -> Option<*mut rte_mbuf> {
    // SAFETY: `m` is a valid chain owned by the caller; the new mbuf is
    // checked for size before the copy.
    unsafe {
        let pool = (*m).pool;
        let room = u32::from(ffi::mana_shim_pktmbuf_data_room_size(pool))
            .saturating_sub(ffi::RTE_PKTMBUF_HEADROOM);
        if mbuf::pkt_len(m) > room {
            return None;
        }
        let mut l: *mut rte_mbuf = ptr::null_mut();
        if ffi::mana_shim_pktmbuf_alloc_bulk(pool, &mut l, 1) != 0 {
            return None;
        }
        let dst = ((*l).buf_addr as *mut u8).add(usize::from(mbuf::data_off(l)));
        let mut off = 0usize;
        let mut seg = m;
        while !seg.is_null() {
            let len = usize::from(mbuf::data_len(seg));
            let src = ((*seg).buf_addr as *const u8).add(usize::from(mbuf::data_off(seg)));
            ptr::copy_nonoverlapping(src, dst.add(off), len);
            off += len;
            seg = (*seg).next;
        }
        mbuf::set_data_len(l, off as u16);
        mbuf::set_pkt_len(l, off as u32);
        (*l).ol_flags = (*m).ol_flags;
        mbuf::set_vlan_tci(l, mbuf::vlan_tci(m));
        mbuf::set_tx_offload(l, mbuf::tx_offload(m));
        mbuf::set_packet_type(l, mbuf::packet_type(m));
        ffi::rte_pktmbuf_free_bulk(&mut { m }, 1);
        Some(l)
    }
}

/// `eth_tx_burst_t`.
///
/// # Safety
/// Called by DPDK with a queue of this driver and `n` valid mbuf pointers.
pub unsafe extern "C" fn tx_burst(q: *mut c_void, pkts: *mut *mut rte_mbuf, n: u16) -> u16 {
    // SAFETY: DPDK passes one of our queues, live while the port is.
    let q = unsafe { &*(q as *const TxQueue) };
    let Some(mut pass) = q.gate.enter() else {
        return 0;
    };
    let st = q.burst_state(&mut pass);
    let mut b = q.burst(st);
    b.reap();
    if n == 0 {
        return 0;
    }
    // SAFETY: `pkts` holds `n` mbufs owned by the caller until we return.
    let pkts = unsafe { std::slice::from_raw_parts_mut(pkts, usize::from(n)) };
    b.post(pkts) as u16
}

/// `tx_done_cleanup`: reaps completions; returns how many packets were freed.
///
/// # Safety
/// Called by DPDK with a queue of this driver.
pub unsafe extern "C" fn tx_done_cleanup(q: *mut c_void, _free_cnt: u32) -> c_int {
    // SAFETY: DPDK passes one of our queues.
    let q = unsafe { &*(q as *const TxQueue) };
    let Some(mut pass) = q.gate.enter() else {
        return 0;
    };
    let st = q.burst_state(&mut pass);
    q.burst(st).reap() as c_int
}

/// `tx_descriptor_status`: whether the descriptor `offset` places after the
/// next free one is still owned by the device.
///
/// # Safety
/// Called by DPDK with a queue of this driver.
pub unsafe extern "C" fn tx_descriptor_status(q: *mut c_void, offset: u16) -> c_int {
    // SAFETY: DPDK passes one of our queues.
    let q = unsafe { &*(q as *const TxQueue) };
    if offset >= q.conf.nb_desc {
        return -libc::EINVAL;
    }
    // A stopped queue has completed its sends; a recovering one frees them.
    let Some(mut pass) = q.gate.enter() else {
        return ffi::RTE_ETH_TX_DESC_DONE as c_int;
    };
    let st = q.burst_state(&mut pass);
    // Counting back from the head: the last `desc_len` slots are in flight.
    if u32::from(q.conf.nb_desc - offset) <= st.in_flight() {
        ffi::RTE_ETH_TX_DESC_FULL as c_int
    } else {
        ffi::RTE_ETH_TX_DESC_DONE as c_int
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gdma::TxLongOob;

    #[test]
    fn tcp_checksum_offload_sets_the_transport_offset_and_flags() {
        let t = TxShortOob::new()
            .with_vcq_num(0x1234)
            .with_vsq_frame(1)
            .with_short_vp_offset(5);
        let ol =
            ffi::RTE_MBUF_F_TX_IPV4 | ffi::RTE_MBUF_F_TX_IP_CKSUM | ffi::RTE_MBUF_F_TX_TCP_CKSUM;
        let tx_offload = 14 | (20 << 7);
        let o = TxShortOob::from_raw(tx_oob(t, ol, tx_offload, true, false));
        assert!(o.is_outer_ipv4() && o.comp_iphdr_csum() && o.comp_tcp_csum());
        assert!(!o.comp_udp_csum() && !o.is_outer_ipv6());
        assert!(o.suppress_txcqe_gen());
        assert_eq!(o.trans_off(), 34);
        assert_eq!(o.vcq_num(), 0x1234);
        assert_eq!(o.pkt_fmt(), 0);
        // Byte 0 bit 7 is the suppression bit the burst clears late.
        assert_eq!(o.into_bits().get() & 0x80, 0x80);
    }

    /// The long OOB built from its two parts equals the typed one, for
    /// every TCI and vPort offsets over the field's range.
    #[test]
    fn the_long_oob_words_match_the_typed_setters() {
        for vp in [None, Some(0), Some(0x100), Some(0xabc), Some(0xfff)] {
            for tci in 0..=u16::MAX {
                let mut want = TxLongOob::new().with_vlan_tci(tci);
                if let Some(v) = vp {
                    want = want.with_long_vp_offset(v);
                }
                let want = want.into_bits().get();
                assert_eq!(
                    bits::long_vp(vp) | bits::vlan(tci),
                    want as u64,
                    "{tci:#x} {vp:?}"
                );
                assert_eq!(want >> 64, 0, "the second word stays zero");
            }
        }
    }

    #[test]
    fn tso_counts_the_segments_and_bytes_the_wire_carries() {
        let t = Tso {
            hdr_len: 54,
            mss: 1000,
            trans_off: 34,
            split: true,
        };
        // 2554 bytes = 54 of headers + 2500 of payload -> 3 segments, each
        // carrying the 54 header bytes.
        assert_eq!(t.wire(2554), (3, 2554 + 2 * 54));
        assert_eq!(t.wire(1054), (1, 1054));
        assert_eq!(t.wire(54), (1, 54), "headers only still send one packet");
        // A packet length near 2^32 (the application's word) saturates.
        assert_eq!(t.wire(u32::MAX).1, u32::MAX);
    }

    #[test]
    fn udp_checksum_offload_leaves_the_transport_offset_zero() {
        let ol = ffi::RTE_MBUF_F_TX_IPV6 | ffi::RTE_MBUF_F_TX_UDP_CKSUM;
        let o = TxShortOob::from_raw(tx_oob(TxShortOob::new(), ol, 14 | (40 << 7), false, true));
        assert!(o.is_outer_ipv6() && o.comp_udp_csum());
        assert_eq!(o.trans_off(), 0, "the kernel sets it for TCP only");
        assert_eq!(o.pkt_fmt(), 1);
    }

    /// A remembered request is reused only for the same flags, header
    /// lengths and tag; any change gives the words computed afresh.
    #[test]
    fn a_remembered_offload_request_is_reused_only_when_it_is_the_same() {
        use ffi::{
            RTE_MBUF_F_TX_IPV4 as V4, RTE_MBUF_F_TX_IP_CKSUM as IPC,
            RTE_MBUF_F_TX_TCP_CKSUM as TCP, RTE_MBUF_F_TX_UDP_CKSUM as UDP,
            RTE_MBUF_F_TX_VLAN as VLAN,
        };
        let tcp = V4 | IPC | TCP;
        let requests = [
            (tcp | VLAN, 14 | (20 << 7), 100u16),
            (tcp | VLAN, 14 | (20 << 7), 100),
            (tcp | VLAN, 14 | (20 << 7), 101),
            (tcp | VLAN, 18 | (20 << 7), 101),
            (tcp | VLAN, 18 | (24 << 7), 101),
            (tcp, 18 | (24 << 7), 101),
            (V4 | UDP, 18 | (24 << 7), 101),
            (VLAN, 18 | (24 << 7), 0xe101),
            (VLAN, 18 | (24 << 7), 0xe101),
            (tcp | VLAN, 14 | (20 << 7), 100),
        ];
        for long_vp in [None, Some(0x123)] {
            let long_template = bits::long_vp(long_vp);
            let mut memo = Memo::NONE;
            for (i, &(ol, t, tci)) in requests.iter().enumerate() {
                let mut m = rte_mbuf {
                    ol_flags: ol,
                    ..Default::default()
                };
                let p: *mut rte_mbuf = &mut m;
                // SAFETY: `p` is a live mbuf on the stack.
                unsafe {
                    mbuf::set_tx_offload(p, t);
                    mbuf::set_vlan_tci(p, tci);
                }
                let vlan = ol & VLAN != 0;
                let want_long = if vlan {
                    long_template | bits::vlan(tci)
                } else {
                    long_template
                };
                let long = vlan || long_vp.is_some();
                let want = (
                    offload_bits(ol, || t),
                    want_long,
                    if long { 2 } else { 1 },
                    if vlan { 4 } else { 0 },
                );
                let w = memo.words(ol, p, long_template);
                assert_eq!((w.csum, w.long, w.bu, w.tag), want, "request {i}");
            }
        }
    }

    /// The per-packet test of an offload run equals comparing the packet's
    /// whole key (and ruling out TSO), over random flags, header lengths and
    /// tags against keys of requests that differ from them in one field or
    /// none.
    #[test]
    fn the_field_wise_request_compare_equals_the_key_compare() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut same = 0;
        for _ in 0..100_000 {
            let r = next();
            // Requests near each other: a few flag bits, small lengths.
            let pick = |r: u64| {
                let ol = ((r & 0x7f) << 50) | (((r >> 7) & 1) * ffi::RTE_MBUF_F_TX_VLAN);
                let t = ((r >> 8) & 0x3) | (((r >> 10) & 0x3) << 7) | ((r >> 12) << 16);
                (ol, t, ((r >> 40) & 0x3) as u16 | 0xe000)
            };
            let (ol, t, tci) = pick(r);
            // The run's request: the same, or one field changed.
            let (rol, rt, rtci) = match next() % 4 {
                0 => (ol, t, tci),
                1 => (pick(next()).0, t, tci),
                2 => (ol, pick(next()).1, tci),
                _ => (ol, t, pick(next()).2),
            };
            let mut ms = [rte_mbuf::default(), rte_mbuf::default()];
            for (m, (ol, t, tci)) in ms.iter_mut().zip([(ol, t, tci), (rol, rt, rtci)]) {
                m.ol_flags = ol;
                let p: *mut rte_mbuf = m;
                // SAFETY: `p` is a live mbuf on the stack.
                unsafe {
                    mbuf::set_tx_offload(p, t);
                    mbuf::set_vlan_tci(p, tci);
                }
            }
            let [mut m, mut run] = ms;
            if rol & ffi::RTE_MBUF_F_TX_TCP_SEG != 0 || rol & ASKED == 0 {
                continue; // never a run's request
            }
            let key = Memo::key_of(rol, &mut run);
            let want = Memo::key_of(ol, &mut m) == key && ol & ffi::RTE_MBUF_F_TX_TCP_SEG == 0;
            assert_eq!(
                Memo::same(key)(&mut m, ol),
                want,
                "{ol:#x} {t:#x} {tci:#x} / {key:#x}"
            );
            same += u32::from(want);
        }
        assert!(same > 10_000, "{same} packets took");
    }

    /// The constant-OR encoding equals setting each field through the typed
    /// definition, for every flag combination the OOB depends on.
    #[test]
    fn the_precomputed_oob_bits_match_the_typed_setters() {
        let flags = [
            ffi::RTE_MBUF_F_TX_IPV4,
            ffi::RTE_MBUF_F_TX_IPV6,
            ffi::RTE_MBUF_F_TX_IP_CKSUM,
            ffi::RTE_MBUF_F_TX_TCP_CKSUM,
            ffi::RTE_MBUF_F_TX_UDP_CKSUM,
            ffi::RTE_MBUF_F_TX_VLAN,
        ];
        let t = TxShortOob::for_queue(0xab_cdef, 0x12_3456, 0x7f).unwrap();
        for mask in 0..1u32 << flags.len() {
            let ol = (0..flags.len())
                .filter(|b| mask & (1 << b) != 0)
                .fold(0, |a, b| a | flags[b]);
            for (suppressed, long) in [(false, false), (true, false), (false, true), (true, true)] {
                for tx_offload in [14 | (20 << 7), 0x7f | (0x1ff << 7)] {
                    let l4 = ol & ffi::RTE_MBUF_F_TX_L4_MASK;
                    let tcp = l4 == ffi::RTE_MBUF_F_TX_TCP_CKSUM;
                    let off = (tx_offload & 0x7f) + ((tx_offload >> 7) & 0x1ff);
                    let want = t
                        .with_pkt_fmt(long as u8)
                        .with_is_outer_ipv4(ol & ffi::RTE_MBUF_F_TX_IPV4 != 0)
                        .with_is_outer_ipv6(ol & ffi::RTE_MBUF_F_TX_IPV6 != 0)
                        .with_comp_iphdr_csum(ol & ffi::RTE_MBUF_F_TX_IP_CKSUM != 0)
                        .with_comp_tcp_csum(tcp)
                        .with_comp_udp_csum(l4 == ffi::RTE_MBUF_F_TX_UDP_CKSUM)
                        .with_suppress_txcqe_gen(suppressed)
                        .with_trans_off(if tcp { off.min(0x3ff) as u16 } else { 0 });
                    let got = tx_oob(t, ol, tx_offload, suppressed, long);
                    assert_eq!(got, want.to_raw(), "ol {ol:#x} s {suppressed} l {long}");
                }
            }
        }
        assert_eq!(bits::HDR_PLAIN, bits::HDR_SHORT | bits::HDR_NUM_SGE_ONE);
        assert_eq!(bits::HDR_LONG_PLAIN, bits::HDR_LONG | bits::HDR_NUM_SGE_ONE);
        for n in 0..=gdma::MAX_TX_WQE_SGES as u8 {
            for (base, div4) in [(bits::HDR_SHORT, 2), (bits::HDR_LONG, 6)] {
                let want = WqeHeader::new()
                    .with_num_sge(n)
                    .with_inline_oob_size_div4(div4);
                assert_eq!(base | (u64::from(n) * bits::HDR_NUM_SGE_ONE), want.to_raw());
            }
        }
    }
}
