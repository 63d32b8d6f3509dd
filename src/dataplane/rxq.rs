//! Receive queues: the burst function that turns single and coalesced
//! completions into mbufs (length, RSS hash, packet type, checksum and VLAN
//! flags) and refills the ring in bulk with one doorbell per burst.

use super::gate::{Gate, Pass};
use super::mr_cache;
use super::queue::{alloc_queue_mem, free_queue_mem, ControlToken, DataQueue};
use super::stats::Counter;
use crate::ffi::consts;
use crate::ffi::{self, mbuf, rte_mbuf};
use crate::hw::doorbell::{self, Doorbell};
use crate::hw::ring::{CompQueue, Next, WorkQueue};
use gdma::{ndis_hash, Cqe, CqeType, RxCompOob, Sge, WqeHeader};
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// What a receive queue was set up with; fixed for its life.
#[repr(C)]
pub struct RxConf {
    pub port_id: u16,
    pub queue_id: u16,
    pub socket: c_int,
    pub nb_desc: u16,
    /// Bytes a buffer holds after the headroom.
    pub buf_len: u32,
    pub mp: *mut ffi::rte_mempool,
    pub conf: ffi::rte_eth_rxconf,
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
    desc: *mut *mut rte_mbuf,
    desc_mask: u32,
    desc_head: u32,
    desc_tail: u32,
    /// Buffers that could not be reposted for lack of mbufs.
    deficit: u32,
    /// A coalesced completion delivered partly: its data and next packet.
    pending: Option<(*const Cqe, u8)>,
    mr: mr_cache::Cache,
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
        let (q, desc) =
            alloc_queue_mem::<RxQueue, *mut rte_mbuf>(c"mana_rxq", conf.nb_desc, conf.socket)?;
        let mask = u32::from(conf.nb_desc) - 1;
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
                        desc,
                        desc_mask: mask,
                        desc_head: 0,
                        desc_tail: 0,
                        deficit: 0,
                        pending: None,
                        mr: mr_cache::Cache::new(),
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
            free_queue_mem(q.as_ptr(), st.desc);
        }
    }
}

impl RxState {
    pub fn posted(&self) -> u32 {
        self.desc_head.wrapping_sub(self.desc_tail)
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
        st.desc_head = 0;
        st.desc_tail = 0;
        st.pending = None;
        st.deficit = 0;
        let n = u32::from(self.conf.nb_desc);
        let mut b = self.burst(st);
        if b.refill(n) != n {
            b.detach();
            return Err(-libc::ENOMEM);
        }
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
    /// forgets the rings. Returns how many buffers were posted.
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
        doorbell::arm_cq(self.conf.port_id, st.cq.id, st.cq.head, st.cq.count());
        true
    }
}

/// A burst's view: the state it owns and the queue's shared parts.
struct Burst<'a> {
    st: &'a mut RxState,
    q: &'a RxQueue,
}

impl Burst<'_> {
    fn stats(&self) -> &RxStats {
        &self.q.stats
    }

    fn detach(&mut self) -> u32 {
        let n = self.st.posted();
        while self.st.desc_tail != self.st.desc_head {
            let m = self.take();
            // SAFETY: a posted mbuf we own.
            unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
        }
        self.st.rq = WorkQueue::empty();
        self.st.cq = CompQueue::empty();
        self.st.mr.clear();
        self.st.pending = None;
        n
    }

    #[inline(always)]
    fn take(&mut self) -> *mut rte_mbuf {
        let st = &mut *self.st;
        // SAFETY: the caller checked a buffer is posted; the index is masked
        // into the descriptor array of nb_desc entries.
        let m = unsafe { *st.desc.add((st.desc_tail & st.desc_mask) as usize) };
        st.desc_tail = st.desc_tail.wrapping_add(1);
        // Every RX WQE is one basic unit.
        st.rq.tail = st.rq.tail.wrapping_add(1);
        m
    }

    /// Allocates and posts up to `want` buffers; rings the doorbell once.
    /// Returns how many were posted.
    fn refill(&mut self, want: u32) -> u32 {
        let (port_id, buf_len, mp) = (self.q.conf.port_id, self.q.conf.buf_len, self.q.conf.mp);
        let mut posted = 0;
        let mut bufs: [*mut rte_mbuf; REFILL_BULK] = [ptr::null_mut(); REFILL_BULK];
        'fill: while posted < want {
            let n = (want - posted).min(REFILL_BULK as u32);
            // SAFETY: `bufs` has room for `n` pointers.
            if unsafe { ffi::mana_shim_pktmbuf_alloc_bulk(mp, bufs.as_mut_ptr(), n) } != 0 {
                self.stats().nombuf.add(u64::from(want - posted));
                break;
            }
            for (j, &m) in bufs[..n as usize].iter().enumerate() {
                // SAFETY: freshly allocated, reset mbufs.
                let addr = unsafe { (*m).buf_addr as usize } + ffi::RTE_PKTMBUF_HEADROOM as usize;
                let Some(lkey) = self.st.mr.lkey(port_id, addr, buf_len as usize) else {
                    // The pool was registered at start; a buffer outside it
                    // cannot be posted. Give the rest back and try later.
                    let rest = &mut bufs[j..n as usize];
                    // SAFETY: these mbufs were allocated above and not posted.
                    unsafe { ffi::rte_pktmbuf_free_bulk(rest.as_mut_ptr(), rest.len() as u32) };
                    self.stats().nombuf.add(u64::from(want - posted) - j as u64);
                    posted += j as u32;
                    break 'fill;
                };
                let st = &mut *self.st;
                let sge = [Sge::new(addr as u64, lkey, buf_len)];
                st.rq.post(RX_HEADER, &[0], &sge, 1);
                // SAFETY: the index is masked into the descriptor array.
                unsafe { *st.desc.add((st.desc_head & st.desc_mask) as usize) = m };
                st.desc_head = st.desc_head.wrapping_add(1);
            }
            posted += n;
        }
        if posted > 0 {
            self.st.rq_db.ring(port_id, self.st.rq.doorbell_tail());
        }
        posted
    }

    /// Fills `m` from a completion's flags and packet info `k`.
    #[inline(always)]
    fn fill(&mut self, m: *mut rte_mbuf, oob: &RxCompOob, k: usize) -> bool {
        let len = oob.ppi[k].pkt_len();
        let f = oob.flags;
        let mut ol = 0u64;
        if f.rx_iphdr_csum_succeed() {
            ol |= ffi::RTE_MBUF_F_RX_IP_CKSUM_GOOD as u64;
        } else if f.rx_iphdr_csum_fail() {
            ol |= ffi::RTE_MBUF_F_RX_IP_CKSUM_BAD as u64;
        }
        if f.rx_outer_iphdr_csum_fail() {
            ol |= ffi::RTE_MBUF_F_RX_OUTER_IP_CKSUM_BAD as u64;
        }
        if f.rx_tcp_csum_succeed() || f.rx_udp_csum_succeed() {
            ol |= ffi::RTE_MBUF_F_RX_L4_CKSUM_GOOD as u64;
        } else if f.rx_tcp_csum_fail() || f.rx_udp_csum_fail() {
            ol |= ffi::RTE_MBUF_F_RX_L4_CKSUM_BAD as u64;
        }
        let hash_type = f.rx_hashtype();
        if hash_type != 0 {
            ol |= ffi::RTE_MBUF_F_RX_RSS_HASH as u64;
        }
        let vlan = f.rx_vlantag_present();
        if vlan {
            ol |= (ffi::RTE_MBUF_F_RX_VLAN as u64) | (ffi::RTE_MBUF_F_RX_VLAN_STRIPPED as u64);
        }
        // SAFETY: a posted mbuf the device just filled; we own it.
        unsafe {
            mbuf::set_data_len(m, len);
            mbuf::set_pkt_len(m, u32::from(len));
            mbuf::set_port(m, self.q.conf.port_id);
            (*m).ol_flags = ol;
            mbuf::set_packet_type(m, packet_type(&f));
            mbuf::set_rss_hash(m, oob.ppi[k].pkt_hash());
            mbuf::set_vlan_tci(m, if vlan { f.rx_vlan_id() } else { 0 });
        }
        self.stats().bytes.add(u64::from(len));
        if vlan && self.q.offloads() & consts::RX_OFFLOAD_VLAN_STRIP == 0 {
            // The device always strips; put the tag back when not asked to.
            let mut mm = m;
            // SAFETY: a valid mbuf; on failure it is left unchanged.
            if unsafe { ffi::mana_shim_vlan_insert(&mut mm) } != 0 {
                self.stats().vlan_reinsert_failed.add(1);
                return false;
            }
            // SAFETY: the mbuf is ours (just received) and valid.
            unsafe { (*m).ol_flags &= !(ffi::RTE_MBUF_F_RX_VLAN_STRIPPED as u64) };
        }
        true
    }

    /// Frees the posted buffer at the tail: the packet in it, if any, is
    /// dropped (counted as an error by the caller's reason).
    fn drop_tail(&mut self) {
        self.stats().errors.add(1);
        let m = self.take();
        // SAFETY: a posted buffer, ours since the device is done with it
        // (or the queue is going away).
        unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
    }

    /// Whether a fresh completion is for this queue and names the next
    /// posted WQE; buffers it shows the device used without completing are
    /// dropped first. A completion that fails is counted and refused.
    fn accept(&mut self, cqe: &Cqe) -> bool {
        let info = cqe.info;
        if info.is_sq() || info.wq_num() != self.st.rq.id & 0xff_ffff {
            self.stats().cqe_wrong_queue.add(1);
            return false;
        }
        let posted = self.st.posted();
        // The offset must name a posted WQE: an honest device names the
        // oldest (0 from the tail); further on, the device used the buffers
        // before it without a completion we could read (missing, garbled,
        // overwritten). The ring holds twice the WQEs we post (see
        // `Wq::create_rq`), so a WQE already completed (a repeated
        // completion) lies at `posted` or more: refused. Any WQE posted is
        // taken, so the queue never waits for a completion that cannot come.
        match self.st.rq.bu_from_tail(cqe.rx_oob().rx_wqe_offset()) {
            Some(d) if d < posted => {
                if d > 0 {
                    self.stats().missed.add(u64::from(d));
                    for _ in 0..d {
                        self.drop_tail();
                    }
                }
                true
            }
            _ => {
                self.stats().cqe_bad_wqe.add(1);
                false
            }
        }
    }

    fn run(&mut self, pkts: &mut [*mut rte_mbuf]) -> usize {
        let mut got = 0usize;
        let mut consumed = 0u32;
        while got < pkts.len() {
            let (cqe, first) = match self.st.pending.take() {
                Some((c, k)) => (c, usize::from(k)),
                None => match self.st.cq.next() {
                    Next::Cqe(c) => (c as *const Cqe, 0),
                    Next::Empty => break,
                    Next::OutOfPhase => {
                        self.stats().cq_overflow.add(1);
                        continue;
                    }
                    Next::Stale => {
                        self.stats().cqe_stale.add(1);
                        continue;
                    }
                },
            };
            // SAFETY: a CQE in the ring; its slot is not reused before the
            // buffers it names are reposted (after this burst).
            let cqe = unsafe { &*cqe };
            if first == 0 {
                let before = self.st.posted();
                let ok = self.accept(cqe);
                consumed += before - self.st.posted();
                if !ok {
                    continue;
                }
            }
            let ty = cqe.header().cqe_type_raw();
            if ty != CqeType::RxOkay as u8 && ty != CqeType::RxCoalesced4 as u8 {
                // A truncated completion is one packet; a garbled one used
                // as many buffers as it names packets (one to four), so
                // drop that many to stay in step with the device.
                let n = if ty == CqeType::RxTruncated as u8 {
                    self.stats().truncated.add(1);
                    1
                } else {
                    self.stats().cqe_unexpected.add(1);
                    cqe.rx_oob().num_packets().max(1) as u32
                };
                for _ in 0..n.min(self.st.posted()) {
                    self.drop_tail();
                    consumed += 1;
                }
                continue;
            }
            let oob = cqe.rx_oob();
            let mut k = first;
            while k < gdma::RX_OOB_NUM_PPI && oob.ppi[k].pkt_len() != 0 {
                if got == pkts.len() {
                    self.st.pending = Some((cqe, k as u8));
                    break;
                }
                if self.st.posted() == 0 {
                    self.stats().cqe_unexpected.add(1);
                    break;
                }
                if u32::from(oob.ppi[k].pkt_len()) > self.q.conf.buf_len {
                    // Longer than the buffer: its length cannot be trusted,
                    // nor a byte past the buffer read.
                    self.stats().bad_length.add(1);
                    self.drop_tail();
                    consumed += 1;
                    k += 1;
                    continue;
                }
                let m = self.take();
                consumed += 1;
                k += 1;
                if self.fill(m, oob, k - 1) {
                    pkts[got] = m;
                    got += 1;
                } else {
                    self.stats().errors.add(1);
                    // SAFETY: ours to free.
                    unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
                }
            }
        }
        self.stats().packets.add(got as u64);
        let want = consumed + self.st.deficit;
        if want > 0 {
            let posted = self.refill(want);
            self.st.deficit = want - posted;
        }
        got
    }
}

/// The packet type the completion flags reveal.
#[inline(always)]
fn packet_type(f: &gdma::RxCompFlags) -> u32 {
    let h = f.rx_hashtype();
    let mut t = ffi::RTE_PTYPE_L2_ETHER;
    let v4 = f.rx_iphdr_csum_succeed()
        || f.rx_iphdr_csum_fail()
        || h & (ndis_hash::IPV4 | ndis_hash::TCP_IPV4 | ndis_hash::UDP_IPV4) != 0;
    let v6 = h
        & (ndis_hash::IPV6
            | ndis_hash::TCP_IPV6
            | ndis_hash::UDP_IPV6
            | ndis_hash::IPV6_EX
            | ndis_hash::TCP_IPV6_EX
            | ndis_hash::UDP_IPV6_EX)
        != 0;
    if v4 {
        t |= ffi::RTE_PTYPE_L3_IPV4_EXT_UNKNOWN;
    } else if v6 {
        t |= ffi::RTE_PTYPE_L3_IPV6_EXT_UNKNOWN;
    }
    let tcp = f.rx_tcp_csum_succeed()
        || f.rx_tcp_csum_fail()
        || h & (ndis_hash::TCP_IPV4 | ndis_hash::TCP_IPV6 | ndis_hash::TCP_IPV6_EX) != 0;
    let udp = f.rx_udp_csum_succeed()
        || f.rx_udp_csum_fail()
        || h & (ndis_hash::UDP_IPV4 | ndis_hash::UDP_IPV6 | ndis_hash::UDP_IPV6_EX) != 0;
    if tcp {
        t |= ffi::RTE_PTYPE_L4_TCP;
    } else if udp {
        t |= ffi::RTE_PTYPE_L4_UDP;
    }
    t
}

/// The packet types `packet_type` can report, for `dev_supported_ptypes_get`.
pub static PTYPES: [u32; 7] = [
    ffi::RTE_PTYPE_L2_ETHER,
    ffi::RTE_PTYPE_L3_IPV4_EXT_UNKNOWN,
    ffi::RTE_PTYPE_L3_IPV6_EXT_UNKNOWN,
    ffi::RTE_PTYPE_L4_TCP,
    ffi::RTE_PTYPE_L4_UDP,
    ffi::RTE_PTYPE_UNKNOWN,
    ffi::RTE_PTYPE_UNKNOWN,
];

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
    // SAFETY: `pkts` has room for `n` pointers.
    let pkts = unsafe { std::slice::from_raw_parts_mut(pkts, usize::from(n)) };
    q.burst(st).run(pkts) as u16
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
