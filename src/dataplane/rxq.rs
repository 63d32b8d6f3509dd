//! Receive queues: the burst function that turns single and coalesced
//! completions into mbufs (length, RSS hash, packet type, checksum and VLAN
//! flags) and refills the ring in bulk with one doorbell per burst.
//!
//! A queue whose buffers are smaller than its largest frame posts WQEs of
//! several SGEs (one mbuf each): the device fills them in order and reports
//! the total length, and the burst chains the mbufs the packet used. That
//! path ([`Burst::run_scattered`]) is chosen by the queue's setup; the
//! one-buffer path does not test for it per packet.

use super::gate::{Gate, Pass};
use super::mbuf_ring::MbufRing;
use super::mr_cache;
use super::queue::{alloc_queue_mem, free_queue_mem, ControlToken, DataQueue, RingView};
use super::rx_flags;
use super::stats::Counter;
use crate::ffi::consts;
use crate::ffi::{self, mbuf, rte_mbuf};
use crate::hw::doorbell::{self, Doorbell};
use crate::hw::ring::{queue_tag, CompQueue, CqReader, Head, Next, WorkQueue};
use gdma::{Cqe, CqeType, Sge, WqeHeader};
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(target_arch = "x86_64")]
mod avx2;
mod scattered;
#[cfg(any(test, feature = "fuzzing"))]
pub mod side_by_side;

const REFILL_BULK: usize = 64;

#[derive(Default)]
#[repr(C)]
pub struct RxStats {
    pub packets: Counter,
    pub bytes: Counter,
    pub errors: Counter,
    pub nombuf: Counter,
    pub truncated: Counter,
    pub cqe_unexpected: Counter,
    /// Slots skipped: owner bits out of phase.
    pub cq_overflow: Counter,
    /// Slots skipped: left in the previous lap while later ones were written.
    pub cqe_stale: Counter,
    /// Completions naming another queue, refused.
    pub cqe_wrong_queue: Counter,
    /// Completions naming no posted WQE (outside the ring, off a WQE
    /// boundary, already completed), refused.
    pub cqe_bad_wqe: Counter,
    /// Packets longer than the buffer they were received in, dropped.
    pub bad_length: Counter,
    /// Buffers a later completion showed the device had used without a
    /// completion of their own, dropped (their contents are unknown).
    pub missed: Counter,
    pub vlan_reinsert_failed: Counter,
    /// Packets delivered to posted buffers but not yet polled when a device
    /// reset tore the queue down.
    pub lost_to_reset: Counter,
}

/// The least a receive buffer holds after the headroom: a minimum frame.
/// Queue setup refuses smaller ones; the burst reads a frame's head
/// (`rx_flags::FRAME_HEAD` bytes) relying on it.
pub const MIN_BUF_LEN: u32 = 64;
const _: () = assert!(rx_flags::FRAME_HEAD as u32 <= MIN_BUF_LEN);

/// What a receive queue was set up with; fixed for its life.
#[repr(C)]
pub struct RxConf {
    pub port_id: u16,
    pub queue_id: u16,
    pub socket: c_int,
    pub nb_desc: u16,
    /// Bytes a buffer holds after the headroom.
    pub buf_len: u32,
    /// Buffers (SGEs) per receive WQE: 1, or up to 15 for scattered Rx.
    pub segs: u32,
    pub mp: *mut ffi::rte_mempool,
    pub conf: ffi::rte_eth_rxconf,
    /// The one-buffer receive loop the queue runs ([`RxPath::choose`]).
    pub path: RxPath,
}

/// The receive loop of a one-buffer queue: chosen at queue setup from the
/// CPU's flags and the queue's configuration (scattered queues are
/// always scalar), or forced (`NET_MANA_RX_PATH`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RxPath {
    Scalar,
    /// Four completions per step where they are clean (`rxq::avx2`), the
    /// scalar loop for the rest.
    VectorAvx2,
}

/// What the application asked for: the best path, or one forced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxPathWish {
    Auto,
    Scalar,
    Vector,
}

impl RxPathWish {
    /// The environment variable that forces a path (the tests run every
    /// receive test under each).
    pub const ENV: &'static str = "NET_MANA_RX_PATH";

    /// Parses `auto`, `scalar` or `vector`.
    pub fn parse(v: &str) -> Result<RxPathWish, String> {
        match v.trim() {
            "auto" => Ok(RxPathWish::Auto),
            "scalar" => Ok(RxPathWish::Scalar),
            "vector" => Ok(RxPathWish::Vector),
            other => Err(format!(
                "{}={other}: unknown receive path (use auto, scalar or vector)",
                Self::ENV
            )),
        }
    }

    /// From the environment: `Auto` if the variable is unset.
    pub fn from_env() -> Result<RxPathWish, String> {
        match std::env::var(Self::ENV) {
            Ok(v) => Self::parse(&v),
            Err(std::env::VarError::NotPresent) => Ok(RxPathWish::Auto),
            Err(std::env::VarError::NotUnicode(v)) => Err(format!(
                "{}={v:?}: unknown receive path (use auto, scalar or vector)",
                Self::ENV
            )),
        }
    }
}

impl RxPath {
    /// Whether this build and CPU can run the vector loop.
    pub fn vector_available() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx2") && avx2::layout_fits()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// The loop a queue of `segs` buffers per WQE runs: the vector one
    /// where the CPU has it, unless `wish` forces the scalar one. Forcing
    /// the vector loop on a CPU without it is an error; a scattered queue
    /// has no vector loop and runs the scalar one whatever the wish.
    pub fn choose(wish: RxPathWish, segs: u32) -> Result<RxPath, String> {
        let have = Self::vector_available();
        if wish == RxPathWish::Vector && !have {
            return Err(format!(
                "{}=vector: this CPU has no AVX2 (or the mbuf layout is not the one \
                 the vector receive path writes); use auto or scalar",
                RxPathWish::ENV
            ));
        }
        Ok(if segs == 1 && have && wish != RxPathWish::Scalar {
            RxPath::VectorAvx2
        } else {
            RxPath::Scalar
        })
    }
}

impl RxConf {
    /// The longest packet a WQE holds.
    pub fn max_pkt_len(&self) -> u32 {
        self.buf_len * self.segs
    }

    /// Whether packets arrive in chains of buffers.
    pub fn scattered(&self) -> bool {
        self.segs > 1
    }
}

/// The basic units of a receive WQE with `segs` SGEs: the 8-byte header,
/// the 8-byte zero inline OOB and the SGL, in whole 32-byte units.
pub const fn rx_wqe_bu(segs: u32) -> u32 {
    (16 + 16 * segs).div_ceil(gdma::WQE_BU_SIZE as u32)
}

/// A receive queue (in DPDK shared memory, plain data only).
#[repr(C, align(64))]
pub struct RxQueue {
    gate: Gate,
    /// Reached only through [`RxQueue::burst_state`] and
    /// [`RxQueue::state_mut`] (see `queue`).
    state: UnsafeCell<RxState>,
    pub stats: RxStats,
    /// The queue's offloads; VLAN strip may change while bursts run.
    offloads: AtomicU64,
    pub conf: RxConf,
}

/// The state a burst owns: the rings and the posted buffers.
#[repr(C)]
pub struct RxState {
    rq: WorkQueue,
    rq_db: Doorbell,
    cq: CompQueue,
    /// Posted mbufs in posting order: each completion consumes the oldest.
    posted: MbufRing,
    /// Buffers that could not be reposted for lack of mbufs.
    deficit: u32,
    /// A coalesced completion delivered partly: its data and next packet.
    pending: Option<(*const Cqe, u8)>,
    mr: mr_cache::Cache,
    /// The rearm word of a posted buffer (`ffi::mbuf::rearm_word`).
    rearm: u64,
    /// Buffers per WQE (`RxConf::segs`).
    segs: u32,
}

/// The rings of a receive queue's verbs objects, for [`RxState::attach`].
pub struct RxHw {
    pub rq_buf: *mut u8,
    pub rq_size: u32,
    pub rq_id: u32,
    pub cq_buf: *mut u8,
    pub cq_count: u32,
    pub cq_id: u32,
}

/// The bytes of one receive WQE apart from the SGE: header with one SGE and
/// an 8-byte zero inline OOB.
const RX_HEADER: u64 = WqeHeader::new()
    .with_num_sge(1)
    .with_inline_oob_size_div4(2)
    .into_bits()
    .get();

impl RxQueue {
    pub fn alloc(conf: RxConf, offloads: u64) -> Option<NonNull<RxQueue>> {
        debug_assert!(conf.nb_desc.is_power_of_two());
        debug_assert!((1..=gdma::MAX_RX_WQE_SGES as u32).contains(&conf.segs));
        // Room for every buffer of every WQE, a power of two.
        let slots = usize::from(conf.nb_desc) * (conf.segs as usize).next_power_of_two();
        let (q, desc) = alloc_queue_mem::<RxQueue, *mut rte_mbuf>(c"mana_rxq", slots, conf.socket)?;
        // SAFETY: fresh memory for one queue, written before anyone sees it.
        unsafe {
            ptr::write(
                q,
                RxQueue {
                    gate: Gate::new(),
                    state: UnsafeCell::new(RxState {
                        rq: WorkQueue::empty(),
                        rq_db: Doorbell::default(),
                        cq: CompQueue::empty(),
                        // SAFETY: `desc` holds `slots` (a power of two)
                        // pointers, freed with the queue.
                        posted: MbufRing::new(desc, slots as u32),
                        deficit: 0,
                        pending: None,
                        mr: mr_cache::Cache::new(),
                        rearm: mbuf::rearm_word(ffi::RTE_PKTMBUF_HEADROOM as u16, conf.port_id),
                        segs: conf.segs,
                    }),
                    stats: RxStats::default(),
                    offloads: AtomicU64::new(offloads),
                    conf,
                },
            );
        }
        NonNull::new(q)
    }

    /// The burst state, for the burst holding the gate's pass.
    #[inline(always)]
    fn burst_state<'a>(&'a self, _pass: &'a mut Pass<'_>) -> &'a mut RxState {
        // SAFETY: a pass is held by one thread at a time and excludes every
        // other access to the state (bursts need a pass; control code needs
        // the gate closed, which a live pass prevents); borrowing the pass
        // mutably for as long as the state keeps a second reference out.
        unsafe { &mut *self.state.get() }
    }

    /// The rings' positions, taken inside the gate like a burst (so they
    /// are consistent), or `None` while the gate is closed or a burst runs.
    pub fn view(&self) -> Option<RingView> {
        let mut pass = self.gate.enter()?;
        let st = self.burst_state(&mut pass);
        Some(RingView {
            wq_producer: st.rq.doorbell_tail(),
            wq_consumer: st.rq.tail.wrapping_mul(gdma::WQE_BU_SIZE as u32),
            cq_head: st.cq.head(),
            held: st.posted.len(),
        })
    }

    /// The burst state for control code: only with the gate closed (no
    /// burst inside, none can enter) and the port's control token borrowed
    /// (no other control path).
    pub fn state_mut<'a>(&'a self, _token: &'a mut ControlToken) -> Option<&'a mut RxState> {
        // SAFETY: a closed gate excludes bursts, the
        // token excludes other control paths, and the borrow of the token
        // keeps this reference unique.
        self.gate
            .is_closed()
            .then(|| unsafe { &mut *self.state.get() })
    }

    pub fn offloads(&self) -> u64 {
        self.offloads.load(Ordering::Relaxed)
    }

    /// Turns VLAN stripping on or off; the next packet a burst takes sees it
    /// (the device always strips: off means the driver puts the tag back).
    pub fn set_vlan_strip(&self, on: bool) {
        let bit = consts::RX_OFFLOAD_VLAN_STRIP;
        if on {
            self.offloads.fetch_or(bit, Ordering::Relaxed);
        } else {
            self.offloads.fetch_and(!bit, Ordering::Relaxed);
        }
    }

    /// The view a burst works through.
    fn burst<'a>(&'a self, st: &'a mut RxState) -> Burst<'a> {
        Burst { st, q: self }
    }
}

impl DataQueue for RxQueue {
    const KIND: &'static str = "rx";
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
        self.conf.conf.rx_deferred_start != 0
    }
    unsafe fn free(q: NonNull<RxQueue>) {
        // SAFETY: the caller gives us a closed queue nobody uses any more,
        // so its state is ours alone; its memory came from `alloc`.
        unsafe {
            let st = &mut *q.as_ref().state.get();
            q.as_ref().burst(st).detach();
            free_queue_mem(q.as_ptr(), st.posted.slots());
        }
    }
}

impl RxState {
    /// WQEs posted (each of `segs` buffers).
    pub fn posted(&self) -> u32 {
        if self.segs == 1 {
            self.posted.len()
        } else {
            self.posted.len() / self.segs
        }
    }
}

impl RxQueue {
    /// Attaches the rings of new verbs objects and posts a full ring of
    /// buffers. Fails (with nothing posted) if the pool cannot fill it.
    ///
    /// # Safety
    /// The rings of `hw` stay valid until [`RxQueue::detach`].
    pub unsafe fn attach(&self, st: &mut RxState, hw: &RxHw) -> Result<(), c_int> {
        // SAFETY: the caller keeps the rings valid until detach.
        unsafe {
            st.rq = WorkQueue::new(hw.rq_buf, hw.rq_size, hw.rq_id);
            st.cq = CompQueue::new(hw.cq_buf, hw.cq_count, hw.cq_id);
        }
        st.rq_db = Doorbell::rq(hw.rq_id);
        st.posted.head = 0;
        st.posted.tail = 0;
        st.pending = None;
        st.deficit = 0;
        let n = u32::from(self.conf.nb_desc);
        let mut b = self.burst(st);
        let posted = if self.conf.scattered() {
            b.refill_scattered(n)
        } else {
            b.refill(n)
        };
        if posted != n {
            b.detach();
            return Err(-libc::ENOMEM);
        }
        b.owe();
        Ok(())
    }

    /// Before a reset tears the rings down: counts the packets delivered but
    /// not polled (the pending rest of a coalesced completion included) as
    /// lost to the reset. Returns how many.
    pub fn count_unpolled(&self, st: &mut RxState) -> u64 {
        let pending = st.pending.map_or(0, |(cqe, k)| {
            // SAFETY: a CQE of the ring, which still exists (the caller
            // counts before the verbs objects are destroyed).
            let oob = unsafe { &*cqe }.rx_oob();
            oob.ppi[usize::from(k)..]
                .iter()
                .take_while(|p| p.pkt_len() != 0)
                .count() as u32
        });
        let n = u64::from(st.cq.ready_count(st.posted()) + pending).min(u64::from(st.posted()));
        self.stats.lost_to_reset.add(n);
        n
    }

    /// After the hardware queue is gone: frees every posted buffer and
    /// forgets the rings. Returns how many WQEs were posted.
    pub fn detach(&self, st: &mut RxState) -> u32 {
        self.burst(st).detach()
    }

    /// Asks the device for a completion event on the next CQE, from the
    /// lcore that polls the queue, between bursts. False (nothing done) if
    /// the queue is stopped or recovering, or a burst runs on it.
    pub fn arm(&self) -> bool {
        let Some(mut pass) = self.gate.enter() else {
            return false;
        };
        let st = self.burst_state(&mut pass);
        doorbell::arm_cq(self.conf.port_id, st.cq.id, st.cq.head(), st.cq.count());
        true
    }
}

/// The per-packet work of a burst that needs only the queue's shared parts.
impl RxQueue {
    /// Fills `m` with a received packet of `len` bytes and RSS hash `hash`
    /// whose completion carries flags `flags`. False if the packet must be
    /// dropped (a VLAN tag that could not be put back).
    #[inline(always)]
    fn fill(&self, m: *mut rte_mbuf, flags: u32, len: u16, hash: u32) -> bool {
        // The hash first: the compiler cannot tell the mbuf's stores from
        // the CQE the hash is read from, so it reads it early, and held
        // across the flag work below it is spilled in the receive loop.
        // SAFETY: a posted mbuf the device just filled; we own it.
        unsafe { mbuf::set_rss_hash(m, hash) };
        let (ol, ptype, tci) = rx_flags::packet_meta(flags, len, move |at| {
            // SAFETY: `at + 2 <= FRAME_HEAD <= MIN_BUF_LEN`, and a posted
            // buffer holds at least `MIN_BUF_LEN` bytes (queue setup checks)
            // after the headroom, where refill posted it.
            unsafe { mbuf::posted_be16(m, at) }
        });
        // SAFETY: a posted mbuf the device just filled; we own it.
        unsafe {
            mbuf::set_data_len(m, len);
            mbuf::set_pkt_len(m, u32::from(len));
            (*m).ol_flags = ol;
            mbuf::set_packet_type(m, ptype);
            mbuf::set_vlan_tci(m, tci);
        }
        if rx_flags::vlan_stripped(flags) {
            return self.stripped(m);
        }
        true
    }

    /// The device always strips VLAN tags; puts the tag back when the
    /// application did not ask for stripping.
    #[cold]
    #[inline(never)]
    fn stripped(&self, m: *mut rte_mbuf) -> bool {
        if self.offloads() & consts::RX_OFFLOAD_VLAN_STRIP != 0 {
            return true;
        }
        let mut mm = m;
        // SAFETY: a valid mbuf; on failure it is left unchanged.
        if unsafe { ffi::mana_shim_vlan_insert(&mut mm) } != 0 {
            self.stats.vlan_reinsert_failed.add(1);
            return false;
        }
        // SAFETY: the mbuf is ours (just received) and valid.
        unsafe { (*m).ol_flags &= !(ffi::RTE_MBUF_F_RX_VLAN_STRIPPED as u64) };
        true
    }

    /// Frees a buffer the burst consumed but does not deliver.
    #[cold]
    #[inline(never)]
    fn discard(&self, m: *mut rte_mbuf) {
        self.stats.errors.add(1);
        // SAFETY: ours to free (taken from the ring, not delivered).
        unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
    }

    /// A completion that is neither `RX_OKAY` nor `RX_COALESCED_4`: a
    /// truncated one is one packet; a garbled one used as many buffers as
    /// it names packets (one to four), so drop that many to stay in step
    /// with the device. Returns how many buffers it consumed.
    #[cold]
    #[inline(never)]
    fn failed_completion(&self, posted: &mut MbufRing, cqe: &Cqe, ty: u8) -> u32 {
        let n = if ty == CqeType::RxTruncated as u8 {
            self.stats.truncated.add(1);
            1
        } else {
            self.stats.cqe_unexpected.add(1);
            cqe.rx_oob().num_packets().max(1) as u32
        };
        let n = n.min(posted.len());
        for _ in 0..n {
            self.discard(posted.take());
        }
        n
    }

    /// One step past what ended a burst's fast loop: an empty queue (None),
    /// a skipped slot, a refused completion, or one completion of any kind
    /// taken whole (the packets it delivered into `pkts`, which is not
    /// empty, and their bytes; a coalesced one may leave the rest in
    /// `pending`).
    #[cold]
    #[inline(never)]
    fn slow(
        &self,
        cq: &mut CqReader<'_>,
        posted: &mut MbufRing,
        rq: &WorkQueue,
        rq_base: u32,
        pkts: &mut [*mut rte_mbuf],
        pending: &mut Option<(*const Cqe, u8)>,
    ) -> Option<(usize, u64)> {
        let c = match cq.next() {
            Next::Cqe(c) => c,
            Next::Empty => return None,
            Next::OutOfPhase => {
                self.stats.cq_overflow.add(1);
                return Some((0, 0));
            }
            Next::Stale => {
                self.stats.cqe_stale.add(1);
                return Some((0, 0));
            }
        };
        if !self.accept(c, posted, rq, rq_base) {
            return Some((0, 0));
        }
        let ty = c.header().cqe_type_raw();
        if ty == CqeType::RxOkay as u8 {
            let oob = c.rx_oob();
            let len = oob.ppi[0].pkt_len();
            let m = posted.take();
            if len == 0 {
                // An empty packet: the buffer was used for nothing.
                self.stats.cqe_unexpected.add(1);
                self.discard(m);
            } else if u32::from(len) > self.conf.buf_len {
                // Longer than the buffer: its length cannot be trusted, nor
                // a byte past the buffer read.
                self.stats.bad_length.add(1);
                self.discard(m);
            } else if self.fill(m, oob.flags.to_raw(), len, oob.ppi[0].pkt_hash()) {
                pkts[0] = m;
                return Some((1, u64::from(len)));
            } else {
                self.discard(m);
            }
            Some((0, 0))
        } else if ty == CqeType::RxCoalesced4 as u8 {
            let (g, b, p) = self.coalesced(posted, c, 0, pkts);
            *pending = p;
            Some((g, b))
        } else {
            self.failed_completion(posted, c, ty);
            Some((0, 0))
        }
    }

    /// Whether a fresh completion is for this queue and names a posted
    /// WQE; buffers before it, which the device used without a completion
    /// we could read (missing, garbled, overwritten), are dropped first. A
    /// completion that fails is counted and refused. The RQ holds twice
    /// the WQEs we post (see `Wq::create_rq`), so a WQE already completed
    /// (a repeated completion) lies at `posted.len()` or more from the
    /// tail: refused. Any WQE posted is taken, so the queue never waits for
    /// a completion that cannot come.
    fn accept(&self, c: &Cqe, posted: &mut MbufRing, rq: &WorkQueue, rq_base: u32) -> bool {
        let info = c.info;
        if info.is_sq() || info.wq_num() != rq.id & 0xff_ffff {
            self.stats.cqe_wrong_queue.add(1);
            return false;
        }
        let tail = rq_base.wrapping_add(posted.tail);
        match rq.bu_from(tail, c.rx_oob().rx_wqe_offset()) {
            Some(d) if d < posted.len() => {
                if d > 0 {
                    self.stats.missed.add(u64::from(d));
                    for _ in 0..d {
                        self.discard(posted.take());
                    }
                }
                true
            }
            _ => {
                self.stats.cqe_bad_wqe.add(1);
                false
            }
        }
    }

    /// Takes packets `first..` of a coalesced completion into `pkts`;
    /// returns where it stopped if `pkts` filled up. Returns (delivered,
    /// bytes, where to resume).
    #[inline(never)]
    fn coalesced(
        &self,
        posted: &mut MbufRing,
        cqe: *const Cqe,
        first: usize,
        pkts: &mut [*mut rte_mbuf],
    ) -> (usize, u64, Option<(*const Cqe, u8)>) {
        // SAFETY: a CQE in the ring; its slot is not reused before the
        // buffers it names are reposted (after this burst), and a pending
        // one is dropped with the rings (`detach`).
        let oob = unsafe { &*cqe }.rx_oob();
        let flags = oob.flags.to_raw();
        let (mut got, mut bytes) = (0usize, 0u64);
        let mut k = first;
        while k < gdma::RX_OOB_NUM_PPI && oob.ppi[k].pkt_len() != 0 {
            if got == pkts.len() {
                return (got, bytes, Some((cqe, k as u8)));
            }
            if posted.is_empty() {
                self.stats.cqe_unexpected.add(1);
                break;
            }
            let m = posted.take();
            let (len, hash) = (oob.ppi[k].pkt_len(), oob.ppi[k].pkt_hash());
            k += 1;
            if u32::from(len) > self.conf.buf_len {
                // Longer than the buffer: dropped (see `slow`).
                self.stats.bad_length.add(1);
                self.discard(m);
                continue;
            }
            if self.fill(m, flags, len, hash) {
                pkts[got] = m;
                got += 1;
                bytes += u64::from(len);
            } else {
                self.discard(m);
            }
        }
        (got, bytes, None)
    }
}

/// A burst's view: the state it owns and the queue's shared parts.
struct Burst<'a> {
    st: &'a mut RxState,
    q: &'a RxQueue,
}

impl Burst<'_> {
    fn detach(&mut self) -> u32 {
        let n = self.st.posted();
        while !self.st.posted.is_empty() {
            let m = self.st.posted.take();
            // SAFETY: a posted mbuf we own.
            unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
        }
        self.st.rq = WorkQueue::empty();
        self.st.cq = CompQueue::empty();
        self.st.mr.clear();
        self.st.pending = None;
        n
    }

    /// Allocates and posts up to `want` buffers; rings the doorbell once.
    /// Returns how many were posted.
    ///
    /// Buffers come straight from the pool (`rte_mempool_get_bulk`) and are
    /// rearmed with one store of `data_off`, `refcnt`, `nb_segs` and `port`
    /// instead of `rte_pktmbuf_reset`: a pool holds its mbufs with `next`
    /// null and one segment (DPDK's invariant), and `fill` writes every other
    /// field a received packet reports.
    fn refill(&mut self, want: u32) -> u32 {
        let (port_id, mp) = (self.q.conf.port_id, self.q.conf.mp);
        let buf_len = self.q.conf.buf_len;
        let stats = &self.q.stats;
        let st = &mut *self.st;
        let rearm = st.rearm;
        let mut posted = st.posted;
        let mut wq = st.rq.writer();
        let mut done = 0;
        // The region the pool's buffers normally all lie in, checked per
        // buffer by one compare; the cache is searched only on a miss.
        let mut region = st.mr.first().fixed_len(buf_len as usize);
        let mut sge_tail = Sge::new(0, region.lkey, buf_len).to_words()[1];
        let mut unposted = false;
        while done < want && !unposted {
            // Straight into the ring's vacant slots, as many as lie before
            // the ends of both the slot array and the RQ.
            let max = (want - done)
                .min(REFILL_BULK as u32)
                .min(wq.contiguous_bu());
            let slots = posted.vacant_run(max);
            let n = slots.len() as u32;
            // SAFETY: `slots` has room for `n` pointers; the pool holds mbufs.
            if unsafe { ffi::mana_shim_mempool_get_bulk(mp, slots.as_mut_ptr().cast(), n) } != 0 {
                stats.nombuf.add(u64::from(want - done));
                break;
            }
            // SAFETY: get_bulk succeeded, so it wrote all `n` entries.
            let got = unsafe { &*(slots as *const [MaybeUninit<_>] as *const [*mut rte_mbuf]) };
            let k = wq.post_bu_run(RX_HEADER, 0, n, |j| {
                let m = got[j];
                // SAFETY: an mbuf just taken from the pool: ours and valid.
                let addr = unsafe {
                    mbuf::set_rearm(m, rearm);
                    (*m).buf_addr as usize
                } + ffi::RTE_PKTMBUF_HEADROOM as usize;
                if !region.covers(addr) {
                    // The pool was registered at start; a buffer outside it
                    // cannot be posted.
                    region = miss(&mut st.mr, port_id, addr, buf_len as usize)?;
                    sge_tail = Sge::new(0, region.lkey, buf_len).to_words()[1];
                }
                Some([addr as u64, sge_tail])
            });
            if k < n {
                // Not posted (outside every region, or no room in the RQ,
                // which cannot happen while buffers and WQEs are counted
                // alike): give them back, try later.
                let rest = &got[k as usize..];
                // SAFETY: these came from `mp` above and were not posted.
                unsafe {
                    ffi::mana_shim_mempool_put_bulk(mp, rest.as_ptr().cast(), rest.len() as u32)
                };
                stats.nombuf.add(u64::from(want - done - k));
                unposted = true;
            }
            posted.commit(k);
            done += k;
        }
        drop(wq);
        st.posted = posted;
        if done > 0 {
            st.rq_db.ring(port_id, st.rq.doorbell_tail());
        }
        done
    }

    /// Receives up to `pkts.len()` packets and reposts what they used.
    ///
    /// Every completion is checked against the queue: the fast loop takes
    /// one only if it is for this RQ (one compare of the info dword, with
    /// the owner bits), names the oldest posted WQE and reports a length
    /// that fits the buffer; anything else goes to [`RxQueue::slow`], which
    /// counts, drops and resyncs.
    ///
    /// `VECTOR`: groups of four clean completions go through the vector
    /// step (`avx2::groups`, for queues whose path is [`RxPath::VectorAvx2`]);
    /// after one that is not, the scalar loop takes the next four.
    #[inline(always)]
    fn run<const VECTOR: bool>(&mut self, pkts: &mut [*mut rte_mbuf]) -> usize {
        let q = self.q;
        let st = &mut *self.st;
        let n = pkts.len();
        let (mut got, mut bytes) = (0usize, 0u64);
        // Both rings' cursors stay in registers for the loop.
        let mut posted = st.posted;
        // The RQ position of the buffer at `posted.tail` is `rq_base +
        // posted.tail` (one basic unit per buffer).
        let rq_base = st.rq.tail.wrapping_sub(posted.tail);
        let (rq, tag, off_mask) = (&st.rq, queue_tag(st.rq.id, false), st.rq.offset_mask());
        let buf_len = q.conf.buf_len;
        let mut pending = None;
        if let Some((cqe, k)) = st.pending.take() {
            (got, bytes, pending) = q.coalesced(&mut posted, cqe, usize::from(k), pkts);
        }
        let mut cq = st.cq.reader();
        while got < n {
            // The common case in bulk: single-packet completions, as many
            // as there are ready ones, buffers posted and room in `pkts`,
            // walked over contiguous parts of the rings.
            let want = (n - got).min(posted.len() as usize) as u32;
            let bufs = posted.oldest_run(want);
            let out = &mut pkts[got..];
            // The oldest buffer's WQE offset; the run stops at the RQ's end
            // (as at the buffer ring's), so the k-th names `start + 32k`.
            let start = rq.wqe_offset(rq_base.wrapping_add(posted.tail));
            let rq_left =
                (off_mask.wrapping_sub(start).wrapping_add(1) / gdma::WQE_BU_SIZE as u32) as usize;
            let limit = bufs.len().min(out.len()).min(rq_left);
            let run = cq.run(limit as u32, tag);
            // One index walks the run, its buffers and `out`.
            let (bufs, out) = (&bufs[..run.slots()], &mut out[..run.slots()]);
            let (mut k, mut dropped) = (0usize, 0usize);
            let mut offset = start;
            loop {
                #[cfg(target_arch = "x86_64")]
                if VECTOR {
                    let (cqes, info_mask, info_want) = run.raw_parts();
                    let v = avx2::Run {
                        cqes,
                        slots: run.slots(),
                        info_mask,
                        info_want,
                        bufs: bufs.as_ptr(),
                        out: out.as_mut_ptr(),
                        offset: start,
                        buf_len,
                    };
                    // SAFETY: the queue's path is the vector one only where
                    // the CPU has AVX2 (`RxPath::choose`); the run's slots
                    // are CQEs of the live ring (64-byte slots, aligned as
                    // the ring is), `bufs` and `out` hold as many entries
                    // (cut to the run above), the buffers are posted ones
                    // of at least `MIN_BUF_LEN` bytes, and `k <= slots`.
                    let (to, b) = unsafe { avx2::groups(&v, k) };
                    #[cfg(test)]
                    side_by_side::VECTOR_TAKEN
                        .fetch_add((to - k) as u64, std::sync::atomic::Ordering::Relaxed);
                    offset += (to - k) as u32 * gdma::WQE_BU_SIZE as u32;
                    k = to;
                    bytes += b;
                }
                // The vector step stopped at a group that is not clean:
                // the scalar loop takes its four completions.
                let stop = (k + 4).min(run.slots());
                while !VECTOR || k < stop {
                    let Some(c) = run.get(k) else { break };
                    let oob = c.rx_oob();
                    let len = oob.ppi[0].pkt_len();
                    // Of the right kind, for the oldest buffer, 1..=buf_len bytes.
                    if c.header().cqe_type_raw() != CqeType::RxOkay as u8
                        || oob.rx_wqe_offset() != offset
                        || u32::from(len).wrapping_sub(1) >= buf_len
                    {
                        break;
                    }
                    let m = bufs[k];
                    bytes += u64::from(len);
                    // `out` is written after `fill`, whose loads from the CQE
                    // then need not be made before this store (see `fill`).
                    out[k] = if q.fill(m, oob.flags.to_raw(), len, oob.ppi[0].pkt_hash()) {
                        m
                    } else {
                        q.discard(m);
                        bytes -= u64::from(len);
                        dropped += 1;
                        ptr::null_mut()
                    };
                    k += 1;
                    offset += gdma::WQE_BU_SIZE as u32;
                }
                // Go on with the vector step only past four completions
                // the scalar loop took.
                if !VECTOR || k != stop || k == run.slots() {
                    break;
                }
            }
            cq.consume(k as u32);
            posted.skip(k as u32);
            got += if dropped > 0 {
                compact(&mut out[..k])
            } else {
                k
            };
            if got == n {
                break;
            }
            // What ended the run: nothing more, the ring's end, a
            // completion of another kind or one that fails a check, or no
            // buffer left for it.
            let Some((g, b)) = q.slow(
                &mut cq,
                &mut posted,
                rq,
                rq_base,
                &mut pkts[got..],
                &mut pending,
            ) else {
                break;
            };
            got += g;
            bytes += b;
        }
        drop(cq);
        st.pending = pending;
        let consumed = posted.tail.wrapping_sub(st.posted.tail);
        st.rq.tail = st.rq.tail.wrapping_add(consumed);
        st.posted = posted;
        q.stats.packets.add(got as u64);
        q.stats.bytes.add(bytes);
        let want = consumed + st.deficit;
        if want > 0 {
            let done = self.refill(want);
            self.st.deficit = want - done;
        }
        got
    }

    /// Whether there is anything to do: a completion, one pending, a
    /// buffer owed (or a stale-slot search due). The last two make the CQ
    /// report work ([`Burst::owe`]), so this is one compare.
    #[inline(always)]
    fn idle(&mut self) -> Head {
        self.st.cq.check()
    }

    /// After a burst: whether the next poll has work even if no completion
    /// arrives (the rest of a coalesced completion, buffers to repost).
    #[inline(always)]
    fn owe(&mut self) {
        let owed = self.st.pending.is_some() || self.st.deficit != 0;
        self.st.cq.set_work_owed(owed);
    }
}

pub use super::rx_flags::PTYPES;

/// A buffer outside the region a refill checks against: the cache (or a
/// registration) gives the region that covers it, prepared for the refill's
/// buffer length.
#[cold]
#[inline(never)]
fn miss(
    mr: &mut mr_cache::Cache,
    port_id: u16,
    addr: usize,
    len: usize,
) -> Option<mr_cache::FixedLen> {
    mr.lkey(port_id, addr, len)?;
    Some(mr.first().fixed_len(len))
}

/// Moves the non-null pointers of `out` to its front, in order; returns
/// how many there are.
#[cold]
#[inline(never)]
fn compact(out: &mut [*mut rte_mbuf]) -> usize {
    let mut w = 0;
    for i in 0..out.len() {
        if !out[i].is_null() {
            out[w] = out[i];
            w += 1;
        }
    }
    w
}

/// `eth_rx_burst_t`.
///
/// # Safety
/// Called by DPDK with a queue of this driver and room for `n` mbufs.
pub unsafe extern "C" fn rx_burst(q: *mut c_void, pkts: *mut *mut rte_mbuf, n: u16) -> u16 {
    // SAFETY: DPDK passes one of our queues, live while the port is.
    let q = unsafe { &*(q as *const RxQueue) };
    let Some(mut pass) = q.gate.enter() else {
        return 0;
    };
    let st = q.burst_state(&mut pass);
    let mut b = q.burst(st);
    let search = match b.idle() {
        Head::Empty => return 0,
        Head::SearchDue => true,
        Head::Work => false,
    };
    // SAFETY: `pkts` has room for `n` pointers.
    let pkts = unsafe { std::slice::from_raw_parts_mut(pkts, usize::from(n)) };
    busy(b, pkts, search) as u16
}

/// The part of `rx_burst` that runs when there is work, out of line so an
/// empty poll stays a few instructions (one call site, so that its
/// register saves stay off the empty path). `search`: an empty poll that
/// owes the stale-slot search; the burst runs only if a slot after the
/// head is written.
#[inline(never)]
fn busy(mut b: Burst<'_>, pkts: &mut [*mut rte_mbuf], search: bool) -> usize {
    if search && !b.st.cq.search_ahead() {
        return 0;
    }
    let got = if b.q.conf.segs != 1 {
        b.run_scattered(pkts)
    } else if b.q.conf.path == RxPath::VectorAvx2 {
        b.run::<true>(pkts)
    } else {
        b.run::<false>(pkts)
    };
    b.owe();
    got
}

/// `rx_queue_count`: completions waiting (an upper bound for coalesced ones
/// counts each CQE once).
///
/// # Safety
/// As [`rx_burst`].
pub unsafe extern "C" fn rx_queue_count(q: *mut c_void) -> u32 {
    // SAFETY: DPDK passes one of our queues.
    let q = unsafe { &*(q as *const RxQueue) };
    // The gate keeps the rings from being torn down under us by a reset.
    let Some(mut pass) = q.gate.enter() else {
        return 0;
    };
    let st = q.burst_state(&mut pass);
    st.cq.ready_count(st.posted())
}

/// `rx_descriptor_status`: DONE if the buffer `offset` places after the next
/// one to be received holds a packet, AVAIL if it is posted and empty.
///
/// # Safety
/// As [`rx_burst`].
pub unsafe extern "C" fn rx_descriptor_status(q: *mut c_void, offset: u16) -> c_int {
    // SAFETY: DPDK passes one of our queues.
    let q = unsafe { &*(q as *const RxQueue) };
    if offset >= q.conf.nb_desc {
        return -libc::EINVAL;
    }
    // A stopped or recovering queue receives nothing.
    let Some(mut pass) = q.gate.enter() else {
        return ffi::RTE_ETH_RX_DESC_UNAVAIL as c_int;
    };
    let st = q.burst_state(&mut pass);
    let offset = u32::from(offset);
    if offset >= st.posted() {
        return ffi::RTE_ETH_RX_DESC_UNAVAIL as c_int;
    }
    if offset < st.cq.ready_count(st.posted()) {
        ffi::RTE_ETH_RX_DESC_DONE as c_int
    } else {
        ffi::RTE_ETH_RX_DESC_AVAIL as c_int
    }
}
