//! Receive queues: the burst function that turns single and coalesced
//! completions into mbufs (length, RSS hash, packet type, checksum and VLAN
//! flags) and refills the ring in bulk with one doorbell per burst.
//!
//! An `RxQueue` lives in DPDK shared memory and holds plain data only.

use crate::control::mr;
use crate::dataplane::gate::Gate;
use crate::dataplane::stats::Counter;
use crate::ffi::consts;
use crate::ffi::{self, mbuf, rte_mbuf};
use crate::hw::ring::{CompQueue, WorkQueue};
use gdma::{ndis_hash, Cqe, CqeType, RxCompOob, Sge, WqeHeader};
use std::ffi::{c_int, c_void};
use std::ptr;
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
    pub cq_overflow: Counter,
    pub vlan_reinsert_failed: Counter,
}

/// A queue: its burst gate and the state the burst owns while inside it.
#[repr(C, align(64))]
pub struct RxQueue {
    pub gate: Gate,
    pub st: RxState,
}

impl std::ops::Deref for RxQueue {
    type Target = RxState;
    fn deref(&self) -> &RxState {
        &self.st
    }
}

impl std::ops::DerefMut for RxQueue {
    fn deref_mut(&mut self) -> &mut RxState {
        &mut self.st
    }
}

#[repr(C)]
pub struct RxState {
    rq: WorkQueue,
    cq: CompQueue,
    /// Posted mbufs in posting order: each completion consumes the oldest.
    desc: *mut *mut rte_mbuf,
    desc_mask: u32,
    desc_head: u32,
    desc_tail: u32,
    nb_desc: u32,
    /// Buffers that could not be reposted for lack of mbufs.
    deficit: u32,
    /// A coalesced completion delivered partly: its data and next packet.
    pending: Option<(*const Cqe, u8)>,
    pub mp: *mut ffi::rte_mempool,
    buf_len: u32,
    pub mr: mr::Cache,
    pub stats: RxStats,
    pub port_id: u16,
    pub queue_id: u16,
    pub socket: c_int,
    /// The queue's offloads; VLAN strip may change while bursts run.
    offloads: AtomicU64,
    pub conf: ffi::rte_eth_rxconf,
}

pub struct RxHw {
    pub rq_buf: *mut u8,
    pub rq_size: u32,
    pub rq_id: u32,
    pub cq_buf: *mut u8,
    pub cq_count: u32,
    pub cq_id: u32,
    pub db_page: *mut u8,
}

/// The bytes of one receive WQE apart from the SGE: header with one SGE and
/// an 8-byte zero inline OOB.
const RX_HEADER: u64 = WqeHeader::new()
    .with_num_sge(1)
    .with_inline_oob_size_div4(2)
    .into_bits()
    .get();

impl RxQueue {
    pub fn alloc(
        port_id: u16,
        queue_id: u16,
        nb_desc: u16,
        socket: c_int,
        conf: &ffi::rte_eth_rxconf,
        mp: *mut ffi::rte_mempool,
        offloads: u64,
    ) -> Option<*mut RxQueue> {
        debug_assert!(nb_desc.is_power_of_two());
        let (q, desc) = crate::control::queues::alloc_queue_mem::<RxQueue, *mut rte_mbuf>(
            c"mana_rxq",
            nb_desc,
            socket,
        )?;
        // SAFETY: fresh memory for one queue and nb_desc descriptors, and a pool query.
        unsafe {
            let room = u32::from(ffi::mana_shim_pktmbuf_data_room_size(mp));
            ptr::write(
                q,
                RxQueue {
                    gate: Gate::new(),
                    st: RxState {
                        rq: WorkQueue::empty(),
                        cq: CompQueue::empty(),
                        desc,
                        desc_mask: u32::from(nb_desc) - 1,
                        desc_head: 0,
                        desc_tail: 0,
                        nb_desc: u32::from(nb_desc),
                        deficit: 0,
                        pending: None,
                        mp,
                        buf_len: room.saturating_sub(ffi::RTE_PKTMBUF_HEADROOM),
                        mr: mr::Cache::new(),
                        stats: RxStats::default(),
                        port_id,
                        queue_id,
                        socket,
                        offloads: AtomicU64::new(offloads),
                        conf: *conf,
                    },
                },
            );
            Some(q)
        }
    }

    /// # Safety
    /// `q` came from [`RxQueue::alloc`], is stopped, and no burst uses it.
    pub unsafe fn free(q: *mut RxQueue) {
        // SAFETY: per the contract.
        unsafe {
            (*q).st.detach();
            crate::control::queues::free_queue_mem(q, (*q).st.desc);
        }
    }
}

impl RxState {
    pub fn nb_desc(&self) -> u16 {
        self.nb_desc as u16
    }

    pub fn buf_len(&self) -> u32 {
        self.buf_len
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

    pub fn posted(&self) -> u32 {
        self.desc_head.wrapping_sub(self.desc_tail)
    }

    /// Attaches the rings of new verbs objects and posts a full ring of
    /// buffers. Fails (with nothing posted) if the pool cannot fill it.
    ///
    /// # Safety
    /// The buffers stay valid until [`RxQueue::detach`]; the gate is closed.
    pub unsafe fn attach(&mut self, hw: &RxHw) -> Result<(), c_int> {
        // SAFETY: per the contract.
        unsafe {
            self.rq = WorkQueue::new(hw.rq_buf, hw.rq_size, hw.rq_id);
            self.cq = CompQueue::new(hw.cq_buf, hw.cq_count, hw.cq_id);
        }
        self.desc_head = 0;
        self.desc_tail = 0;
        self.pending = None;
        self.deficit = 0;
        if self.refill(self.nb_desc) != self.nb_desc {
            self.detach();
            return Err(-libc::ENOMEM);
        }
        Ok(())
    }

    /// After the hardware queue is gone: frees every posted buffer.
    pub fn detach(&mut self) -> u32 {
        let n = self.posted();
        while self.desc_tail != self.desc_head {
            let m = self.take();
            // SAFETY: a posted mbuf we own.
            unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
        }
        self.rq = WorkQueue::empty();
        self.cq = CompQueue::empty();
        self.mr.clear();
        self.pending = None;
        n
    }

    /// Asks the device for a completion event on the next CQE.
    pub fn arm(&self) {
        let tail = gdma::cq_arm_tail(self.cq.head, self.cq.count());
        let value = (1u64 << 63)
            | (u64::from(tail & 0x7fff_ffff) << 32)
            | u64::from(self.cq.id & 0xff_ffff);
        crate::hw::ring::doorbell(self.port_id, gdma::DOORBELL_OFFSET_CQ, value);
    }

    #[inline(always)]
    fn take(&mut self) -> *mut rte_mbuf {
        // SAFETY: the caller checked a buffer is posted; the index is masked.
        let m = unsafe { *self.desc.add((self.desc_tail & self.desc_mask) as usize) };
        self.desc_tail = self.desc_tail.wrapping_add(1);
        // Every RX WQE is one basic unit.
        self.rq.tail = self.rq.tail.wrapping_add(1);
        m
    }

    /// Allocates and posts up to `want` buffers; rings the doorbell once.
    /// Returns how many were posted.
    fn refill(&mut self, want: u32) -> u32 {
        let mut posted = 0;
        let mut bufs: [*mut rte_mbuf; REFILL_BULK] = [ptr::null_mut(); REFILL_BULK];
        'fill: while posted < want {
            let n = (want - posted).min(REFILL_BULK as u32);
            // SAFETY: `bufs` has room for `n` pointers.
            if unsafe { ffi::mana_shim_pktmbuf_alloc_bulk(self.mp, bufs.as_mut_ptr(), n) } != 0 {
                self.stats.nombuf.add(u64::from(want - posted));
                break;
            }
            for (j, &m) in bufs[..n as usize].iter().enumerate() {
                // SAFETY: freshly allocated, reset mbufs.
                let addr = unsafe { (*m).buf_addr as usize } + ffi::RTE_PKTMBUF_HEADROOM as usize;
                let Some(lkey) = self.mr.lkey(self.port_id, addr, self.buf_len as usize) else {
                    // The pool was registered at start; a buffer outside it
                    // cannot be posted. Give the rest back and try later.
                    let rest = &mut bufs[j..n as usize];
                    // SAFETY: these mbufs were allocated above and not posted.
                    unsafe { ffi::rte_pktmbuf_free_bulk(rest.as_mut_ptr(), rest.len() as u32) };
                    self.stats.nombuf.add(u64::from(want - posted) - j as u64);
                    posted += j as u32;
                    break 'fill;
                };
                let sge = [Sge::new(addr as u64, lkey, self.buf_len)];
                self.rq.post(RX_HEADER, &[0], &sge, 1);
                // SAFETY: the index is masked.
                unsafe { *self.desc.add((self.desc_head & self.desc_mask) as usize) = m };
                self.desc_head = self.desc_head.wrapping_add(1);
            }
            posted += n;
        }
        if posted > 0 {
            let value =
                (u64::from(self.rq.doorbell_tail()) << 32) | u64::from(self.rq.id & 0xff_ffff);
            crate::hw::ring::doorbell(self.port_id, gdma::DOORBELL_OFFSET_RQ, value);
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
            mbuf::set_port(m, self.port_id);
            (*m).ol_flags = ol;
            mbuf::set_packet_type(m, packet_type(&f));
            mbuf::set_rss_hash(m, oob.ppi[k].pkt_hash());
            mbuf::set_vlan_tci(m, if vlan { f.rx_vlan_id() } else { 0 });
        }
        self.stats.bytes.add(u64::from(len));
        if vlan && self.offloads.load(Ordering::Relaxed) & consts::RX_OFFLOAD_VLAN_STRIP == 0 {
            // The device always strips; put the tag back when not asked to.
            let mut mm = m;
            // SAFETY: a valid mbuf; on failure it is left unchanged.
            if unsafe { ffi::mana_shim_vlan_insert(&mut mm) } != 0 {
                self.stats.vlan_reinsert_failed.add(1);
                return false;
            }
            // SAFETY: as above.
            unsafe { (*m).ol_flags &= !(ffi::RTE_MBUF_F_RX_VLAN_STRIPPED as u64) };
        }
        true
    }

    fn burst(&mut self, pkts: &mut [*mut rte_mbuf]) -> usize {
        let mut got = 0usize;
        let mut consumed = 0u32;
        while got < pkts.len() {
            let (cqe, first) = match self.pending.take() {
                Some((c, k)) => (c, usize::from(k)),
                None => match self.cq.poll() {
                    Ok(Some(c)) => (c as *const Cqe, 0),
                    Ok(None) => break,
                    Err(_) => {
                        self.stats.cq_overflow.add(1);
                        break;
                    }
                },
            };
            // SAFETY: a CQE in the ring; its slot is not reused before the
            // buffers it names are reposted (after this burst).
            let cqe = unsafe { &*cqe };
            let ty = cqe.header().cqe_type_raw();
            if ty != CqeType::RxOkay as u8 && ty != CqeType::RxCoalesced4 as u8 {
                // A truncated completion is one packet; a garbled one used
                // as many buffers as it names packets (one to four), so
                // drop that many to stay in step with the device.
                let n = if ty == CqeType::RxTruncated as u8 {
                    self.stats.truncated.add(1);
                    1
                } else {
                    self.stats.cqe_unexpected.add(1);
                    cqe.rx_oob().num_packets().max(1) as u32
                };
                for _ in 0..n.min(self.posted()) {
                    self.stats.errors.add(1);
                    let m = self.take();
                    consumed += 1;
                    // SAFETY: the buffer of the failed completion is ours.
                    unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
                }
                continue;
            }
            let oob = cqe.rx_oob();
            let mut k = first;
            while k < gdma::RX_OOB_NUM_PPI && oob.ppi[k].pkt_len() != 0 {
                if got == pkts.len() {
                    self.pending = Some((cqe, k as u8));
                    break;
                }
                if self.posted() == 0 {
                    self.stats.cqe_unexpected.add(1);
                    break;
                }
                let m = self.take();
                consumed += 1;
                k += 1;
                if self.fill(m, oob, k - 1) {
                    pkts[got] = m;
                    got += 1;
                } else {
                    self.stats.errors.add(1);
                    // SAFETY: ours to free.
                    unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
                }
            }
        }
        self.stats.packets.add(got as u64);
        let want = consumed + self.deficit;
        if want > 0 {
            let posted = self.refill(want);
            self.deficit = want - posted;
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
    // SAFETY: DPDK passes our queue; one thread per queue at a time.
    let RxQueue { gate, st: q } = unsafe { &mut *(q as *mut RxQueue) };
    let Some(_pass) = gate.enter() else {
        return 0;
    };
    // SAFETY: `pkts` has room for `n` pointers.
    let pkts = unsafe { std::slice::from_raw_parts_mut(pkts, usize::from(n)) };
    q.burst(pkts) as u16
}

/// `rx_queue_count`: completions waiting (an upper bound for coalesced ones
/// counts each CQE once).
///
/// # Safety
/// As [`rx_burst`].
pub unsafe extern "C" fn rx_queue_count(q: *mut c_void) -> u32 {
    // SAFETY: DPDK passes our queue.
    let q = unsafe { &*(q as *const RxQueue) };
    // The gate keeps the rings from being torn down under us by a reset.
    let Some(_pass) = q.gate.enter() else {
        return 0;
    };
    q.cq.ready_count(q.posted())
}

/// `rx_descriptor_status`: DONE if the buffer `offset` places after the next
/// one to be received holds a packet, AVAIL if it is posted and empty.
///
/// # Safety
/// As [`rx_burst`].
pub unsafe extern "C" fn rx_descriptor_status(q: *mut c_void, offset: u16) -> c_int {
    // SAFETY: DPDK passes our queue.
    let q = unsafe { &*(q as *const RxQueue) };
    let offset = u32::from(offset);
    if offset >= q.nb_desc {
        return -libc::EINVAL;
    }
    // A stopped or recovering queue receives nothing.
    let Some(_pass) = q.gate.enter() else {
        return ffi::RTE_ETH_RX_DESC_UNAVAIL as c_int;
    };
    if offset >= q.posted() {
        return ffi::RTE_ETH_RX_DESC_UNAVAIL as c_int;
    }
    if offset < q.cq.ready_count(q.posted()) {
        ffi::RTE_ETH_RX_DESC_DONE as c_int
    } else {
        ffi::RTE_ETH_RX_DESC_AVAIL as c_int
    }
}
