//! Transmit queues: the burst function that writes send WQEs and rings the
//! SQ doorbell once per burst, completion reaping with CQE suppression, and
//! `tx_prepare` for the checksum offloads.
//!
//! A `TxQueue` lives in DPDK shared memory (`rte_zmalloc_socket`) so that
//! secondary processes can use it; it holds plain data only.

use crate::control::mr;
use crate::dataplane::gate::Gate;
use crate::dataplane::stats::Counter;
use crate::ffi::consts;
use crate::ffi::{self, mbuf, rte_mbuf};
use crate::hw::ring::{CompQueue, WorkQueue};
use gdma::{CqeType, Sge, TxLongOob, TxShortOob, WqeHeader};
use std::ffi::{c_int, c_void};
use std::ptr;

/// One in-flight send: the mbuf chain and the ring space of its WQE.
#[derive(Clone, Copy)]
#[repr(C)]
struct Desc {
    mbuf: *mut rte_mbuf,
    /// Bytes and packets on the wire (a TSO send is several packets).
    wire_bytes: u32,
    wire_packets: u16,
    bu: u8,
    /// No CQE will name this WQE; the next unsuppressed one completes it.
    suppressed: bool,
}

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
    pub cq_overflow: Counter,
}

/// A queue: its burst gate and the state the burst owns while inside it.
#[repr(C, align(64))]
pub struct TxQueue {
    pub gate: Gate,
    pub st: TxState,
}

impl std::ops::Deref for TxQueue {
    type Target = TxState;
    fn deref(&self) -> &TxState {
        &self.st
    }
}

impl std::ops::DerefMut for TxQueue {
    fn deref_mut(&mut self) -> &mut TxState {
        &mut self.st
    }
}

#[repr(C)]
pub struct TxState {
    sq: WorkQueue,
    cq: CompQueue,
    desc: *mut Desc,
    desc_mask: u32,
    desc_head: u32,
    desc_tail: u32,
    desc_len: u32,
    nb_desc: u32,
    /// Per-queue OOB fields (vcq_num, vsq_frame, vport offset).
    oob_template: TxShortOob,
    /// The vPort offset does not fit the short OOB: always use the long one.
    long_vp: Option<u16>,
    max_sge: u32,
    pub mr: mr::Cache,
    pub stats: TxStats,
    pub port_id: u16,
    pub queue_id: u16,
    pub socket: c_int,
    pub offloads: u64,
    pub conf: ffi::rte_eth_txconf,
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
    pub db_page: *mut u8,
    pub max_sge: u32,
}

impl TxQueue {
    /// Allocates a queue and its descriptor ring on `socket`.
    pub fn alloc(
        port_id: u16,
        queue_id: u16,
        nb_desc: u16,
        socket: c_int,
        conf: &ffi::rte_eth_txconf,
        offloads: u64,
    ) -> Option<*mut TxQueue> {
        debug_assert!(nb_desc.is_power_of_two());
        let (q, desc) =
            crate::control::queues::alloc_queue_mem::<TxQueue, Desc>(c"mana_txq", nb_desc, socket)?;
        // SAFETY: fresh memory for one queue and nb_desc descriptors.
        unsafe {
            ptr::write(
                q,
                TxQueue {
                    gate: Gate::new(),
                    st: TxState {
                        sq: WorkQueue::empty(),
                        cq: CompQueue::empty(),
                        desc,
                        desc_mask: u32::from(nb_desc) - 1,
                        desc_head: 0,
                        desc_tail: 0,
                        desc_len: 0,
                        nb_desc: u32::from(nb_desc),
                        oob_template: TxShortOob::new(),
                        long_vp: None,
                        max_sge: 1,
                        mr: mr::Cache::new(),
                        stats: TxStats::default(),
                        port_id,
                        queue_id,
                        socket,
                        offloads,
                        conf: *conf,
                    },
                },
            );
            Some(q)
        }
    }

    /// Reaps the completions the device has written, unless a burst is
    /// running: sends are counted when posted and taken back when their
    /// error completion is reaped, so a queue nobody polls (forwarding
    /// stopped) would keep counting what the device dropped as sent. Called
    /// before statistics are read.
    ///
    /// # Safety
    /// `q` came from [`TxQueue::alloc`] and is not freed during the call.
    pub unsafe fn settle(q: *mut TxQueue) {
        // SAFETY: per the contract `q` is live; the gate's pass excludes
        // every burst (and other settlers), so the state is ours while held.
        unsafe {
            if let Some(_pass) = (*q).gate.enter() {
                (*q).st.reap();
            }
        }
    }

    /// Frees a stopped queue.
    ///
    /// # Safety
    /// `q` came from [`TxQueue::alloc`], is stopped, and no burst uses it.
    pub unsafe fn free(q: *mut TxQueue) {
        // SAFETY: per the contract.
        unsafe {
            (*q).st.detach();
            crate::control::queues::free_queue_mem(q, (*q).st.desc);
        }
    }
}

impl TxState {
    pub fn nb_desc(&self) -> u16 {
        self.nb_desc as u16
    }

    /// Attaches the rings of freshly created verbs objects.
    ///
    /// # Safety
    /// The buffers stay valid until [`TxQueue::detach`]; the gate is closed.
    pub unsafe fn attach(&mut self, hw: &TxHw) {
        // SAFETY: per the contract.
        unsafe {
            self.sq = WorkQueue::new(hw.sq_buf, hw.sq_size, hw.sq_id);
            self.cq = CompQueue::new(hw.cq_buf, hw.cq_count, hw.cq_id);
        }
        let (vp_short, long_vp) = match u8::try_from(hw.vp_offset) {
            Ok(v) => (v, None),
            Err(_) => (0, Some(hw.vp_offset as u16)),
        };
        self.oob_template = TxShortOob::new()
            .with_vcq_num(hw.cq_id & 0xff_ffff)
            .with_vsq_frame(gdma::vsq_frame(hw.sq_id))
            .with_short_vp_offset(vp_short);
        self.long_vp = long_vp;
        self.max_sge = hw.max_sge.clamp(1, gdma::MAX_TX_WQE_SGES as u32);
        self.desc_head = 0;
        self.desc_tail = 0;
        self.desc_len = 0;
    }

    /// After the hardware queue is gone: frees every mbuf still in flight
    /// (they will never complete) and forgets the rings. Returns how many.
    pub fn detach(&mut self) -> u32 {
        let n = self.desc_len;
        while self.desc_len > 0 {
            let d = self.take_desc();
            // Counted as sent when posted; they never reached the wire.
            self.stats.packets.sub(u64::from(d.wire_packets));
            self.stats.bytes.sub(u64::from(d.wire_bytes));
            self.stats.errors.add(u64::from(d.wire_packets));
            // SAFETY: the mbuf was handed to us by tx_burst and not freed.
            unsafe { ffi::rte_pktmbuf_free_bulk(&mut { d.mbuf }, 1) };
        }
        self.sq = WorkQueue::empty();
        self.cq = CompQueue::empty();
        self.mr.clear();
        n
    }

    pub fn in_flight(&self) -> u32 {
        self.desc_len
    }

    #[inline(always)]
    fn take_desc(&mut self) -> Desc {
        // SAFETY: the caller checked desc_len > 0; the index is masked.
        let d = unsafe { *self.desc.add((self.desc_tail & self.desc_mask) as usize) };
        self.desc_tail = self.desc_tail.wrapping_add(1);
        self.desc_len -= 1;
        self.sq.tail = self.sq.tail.wrapping_add(u32::from(d.bu));
        d
    }

    /// Processes every available completion, freeing the sent mbufs in
    /// bulk. Returns the number of packets completed.
    pub fn reap(&mut self) -> u32 {
        const BULK: usize = 64;
        let mut done: [*mut rte_mbuf; BULK] = [ptr::null_mut(); BULK];
        let mut n_done = 0usize;
        let mut completed = 0u32;
        let (mut unsent, mut unsent_bytes) = (0u64, 0u64);
        loop {
            let ty = match self.cq.poll() {
                Ok(Some(cqe)) => cqe.header().cqe_type_raw(),
                Ok(None) => break,
                Err(_) => {
                    self.stats.cq_overflow.add(1);
                    break;
                }
            };
            let ok = ty == CqeType::TxOkay as u8;
            // An OK CQE completes the run of suppressed WQEs up to and
            // including the next unsuppressed one; an error CQE is per WQE.
            // An unknown (garbled) one is taken as completing a run, like
            // the OK it most likely was, so later completions stay in step;
            // its packets' fate is unknown and they count as errors.
            let mut whole_run = ok;
            if !ok {
                match CqeType::from_raw(ty) {
                    Some(t) if t.is_tx() => {
                        let i = usize::from(ty - CqeType::TxOkay as u8).min(TX_ERR_KINDS - 1);
                        self.stats.cqe_errors[i].add(1);
                    }
                    _ => {
                        self.stats.cqe_unexpected.add(1);
                        whole_run = true;
                    }
                }
            }
            loop {
                if self.desc_len == 0 {
                    self.stats.cqe_unexpected.add(1);
                    break;
                }
                let d = self.take_desc();
                completed += 1;
                if !ok {
                    // Counted as sent when posted; the device dropped it.
                    self.stats.errors.add(1);
                    unsent += u64::from(d.wire_packets);
                    unsent_bytes += u64::from(d.wire_bytes);
                }
                done[n_done] = d.mbuf;
                n_done += 1;
                if n_done == BULK {
                    // SAFETY: the mbufs completed and are ours to free.
                    unsafe { ffi::rte_pktmbuf_free_bulk(done.as_mut_ptr(), BULK as u32) };
                    n_done = 0;
                }
                if !(whole_run && d.suppressed) {
                    break;
                }
            }
        }
        if n_done > 0 {
            // SAFETY: as above.
            unsafe { ffi::rte_pktmbuf_free_bulk(done.as_mut_ptr(), n_done as u32) };
        }
        self.stats.packets.sub(unsent);
        self.stats.bytes.sub(unsent_bytes);
        completed
    }

    fn drop_packet(&mut self, m: *mut rte_mbuf, why: DropReason) {
        self.stats.drops[why as usize].add(1);
        self.stats.errors.add(1);
        // SAFETY: the packet was handed to us and is freed exactly once.
        unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
    }

    /// Posts packets until the ring or the burst ends; rings the doorbell
    /// once. Returns how many packets were consumed (sent or dropped).
    fn post(&mut self, pkts: &mut [*mut rte_mbuf]) -> usize {
        let mut last_oob: *mut u8 = ptr::null_mut();
        let mut last_suppressed = false;
        let mut sgl = [Sge::default(); gdma::MAX_TX_WQE_SGES];
        let n = pkts.len();
        let mut i = 0;
        let (mut sent, mut sent_bytes) = (0u64, 0u64);
        while i < n && self.desc_len < self.nb_desc {
            let mut m = pkts[i];
            // SAFETY: tx_burst's caller hands us valid mbuf chains.
            let mut nb_segs = u32::from(unsafe { mbuf::nb_segs(m) });
            // SAFETY: as above.
            let tso = unsafe { (*m).ol_flags } & ffi::RTE_MBUF_F_TX_TCP_SEG != 0;
            // TSO puts the headers alone in SGE 0: one more SGE at most.
            if nb_segs + u32::from(tso) > self.max_sge {
                match linearize(m) {
                    Some(l) => {
                        self.stats.linearized.add(1);
                        m = l;
                        pkts[i] = l;
                        nb_segs = 1;
                    }
                    None => {
                        self.drop_packet(m, DropReason::TooManySegments);
                        i += 1;
                        continue;
                    }
                }
            }
            // SAFETY: as above.
            let (ol, vlan_tci, pkt_len, tx_offload) = unsafe {
                (
                    (*m).ol_flags,
                    mbuf::vlan_tci(m),
                    mbuf::pkt_len(m),
                    mbuf::tx_offload(m),
                )
            };
            let vlan = ol & ffi::RTE_MBUF_F_TX_VLAN != 0;
            let long = self.long_vp.is_some() || vlan;
            let oob_words = if long { 3 } else { 1 };
            let tso = if tso {
                match Tso::of(m, ol, tx_offload) {
                    Ok(t) => t,
                    Err(()) => {
                        self.drop_packet(m, DropReason::BadTso);
                        i += 1;
                        continue;
                    }
                }
            } else {
                None
            };
            let num_sge = nb_segs + tso.map_or(0, |t| u32::from(t.split));
            let bu = gdma::wqe_size_bu(oob_words * 8, num_sge as usize);
            if self.sq.free_bu() < bu {
                break;
            }
            let Some(()) = self.fill_sgl(m, nb_segs, tso, &mut sgl) else {
                self.drop_packet(m, DropReason::NoMemoryRegion);
                i += 1;
                continue;
            };
            let suppressed = i + 1 < n;
            let mut oob = [
                tx_oob(self.oob_template, ol, tx_offload, suppressed, long),
                0,
                0,
            ];
            let base = if long {
                bits::HDR_LONG
            } else {
                bits::HDR_SHORT
            };
            let mut header = base | (u64::from(num_sge) * bits::HDR_NUM_SGE_ONE);
            // An inserted VLAN tag is on the wire too.
            let tag = if vlan { 4 } else { 0 };
            let (mut wire_packets, mut wire_bytes) = (1u32, pkt_len + tag);
            if let Some(t) = tso {
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
                (wire_packets, wire_bytes) = t.wire(pkt_len);
                wire_bytes += tag * wire_packets;
            }
            if long {
                let mut l = TxLongOob::new();
                if vlan {
                    l = l.with_vlan_tci(vlan_tci);
                }
                if let Some(vp) = self.long_vp {
                    l = l.with_long_vp_offset(vp);
                }
                let l = l.into_bits().get();
                oob[1] = l as u64;
                oob[2] = (l >> 64) as u64;
            }
            last_oob = self
                .sq
                .post(header, &oob[..oob_words], &sgl[..num_sge as usize], bu);
            last_suppressed = suppressed;
            // SAFETY: the index is masked into the ring.
            unsafe {
                *self.desc.add((self.desc_head & self.desc_mask) as usize) = Desc {
                    mbuf: m,
                    wire_bytes,
                    wire_packets: wire_packets.min(u32::from(u16::MAX)) as u16,
                    bu: bu as u8,
                    suppressed,
                };
            }
            self.desc_head = self.desc_head.wrapping_add(1);
            self.desc_len += 1;
            sent += u64::from(wire_packets);
            sent_bytes += u64::from(wire_bytes);
            i += 1;
        }
        // Counted when the device takes them (so counters agree with the
        // device's whenever the queue is idle); errors are taken back at reap.
        self.stats.packets.add(sent);
        self.stats.bytes.add(sent_bytes);
        if !last_oob.is_null() {
            if last_suppressed {
                // The burst ended early: the last WQE must produce a CQE, or
                // its run would wait for a later burst to complete.
                // SAFETY: the OOB of the WQE just written; the device has not
                // been told about it yet.
                unsafe {
                    *last_oob &= !0x80;
                    let d = self
                        .desc
                        .add((self.desc_head.wrapping_sub(1) & self.desc_mask) as usize);
                    (*d).suppressed = false;
                }
            }
            self.ring_doorbell();
        }
        i
    }

    /// One SGE per segment; with TSO, the first segment's headers get an SGE
    /// of their own. `None` if a segment lies outside registered memory.
    #[inline(always)]
    fn fill_sgl(
        &mut self,
        m: *mut rte_mbuf,
        nb_segs: u32,
        tso: Option<Tso>,
        sgl: &mut [Sge],
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
            let lkey = self.mr.lkey(self.port_id, addr, len as usize)?;
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

    #[inline(always)]
    fn ring_doorbell(&mut self) {
        let value = (u64::from(self.sq.doorbell_tail()) << 32) | u64::from(self.sq.id & 0xff_ffff);
        crate::hw::ring::doorbell(self.port_id, gdma::DOORBELL_OFFSET_SQ, value);
    }
}

/// A TCP segmentation request, as the device takes it.
#[derive(Clone, Copy)]
struct Tso {
    hdr_len: u8,
    mss: u16,
    trans_off: u16,
    /// The first segment holds payload after the headers: split it.
    split: bool,
}

impl Tso {
    /// The segmentation a `TX_TCP_SEG` mbuf asks for: `Ok(None)` when it
    /// carries no payload (a plain send does), `Err` when the device cannot
    /// take it.
    fn of(m: *mut rte_mbuf, ol: u64, tx_offload: u64) -> Result<Option<Tso>, ()> {
        let l2 = tx_offload & 0x7f;
        let l3 = (tx_offload >> 7) & 0x1ff;
        let l4 = (tx_offload >> 16) & 0xff;
        let mss = (tx_offload >> 24) & 0xffff;
        let hdr = l2 + l3 + l4;
        // SAFETY: a valid mbuf handed to tx_burst.
        let (first, pkt_len) =
            unsafe { (u64::from(mbuf::data_len(m)), u64::from(mbuf::pkt_len(m))) };
        let ip = ol & (ffi::RTE_MBUF_F_TX_IPV4 | ffi::RTE_MBUF_F_TX_IPV6) != 0;
        if !ip
            || l2 == 0
            || l3 == 0
            || l4 < 20
            || hdr > 255
            || first < hdr
            || mss == 0
            || mss > 0x3fff
        {
            return Err(());
        }
        if pkt_len == hdr {
            return Ok(None);
        }
        Ok(Some(Tso {
            hdr_len: hdr as u8,
            mss: mss as u16,
            trans_off: (l2 + l3) as u16,
            split: first > hdr,
        }))
    }

    /// Packets and bytes the device puts on the wire for a `pkt_len` send.
    fn wire(&self, pkt_len: u32) -> (u32, u32) {
        let hdr = u32::from(self.hdr_len);
        let payload = pkt_len.saturating_sub(hdr).max(1);
        let segs = payload.div_ceil(u32::from(self.mss));
        (segs, pkt_len + (segs - 1) * hdr)
    }
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

    /// `b` if `on`, else 0, without a branch.
    #[inline(always)]
    pub const fn when(on: bool, b: u64) -> u64 {
        b & (on as u64).wrapping_neg()
    }
}

/// The short OOB for one packet, as its raw value.
#[inline(always)]
fn tx_oob(template: TxShortOob, ol: u64, tx_offload: u64, suppressed: bool, long: bool) -> u64 {
    use bits::when;
    const OFFLOADS: u64 = ffi::RTE_MBUF_F_TX_L4_MASK
        | ffi::RTE_MBUF_F_TX_IP_CKSUM
        | ffi::RTE_MBUF_F_TX_IPV4
        | ffi::RTE_MBUF_F_TX_IPV6;
    let mut o = template.to_raw() | when(long, bits::LONG) | when(suppressed, bits::SUPPRESS);
    if ol & OFFLOADS != 0 {
        let l4 = ol & ffi::RTE_MBUF_F_TX_L4_MASK;
        let tcp = l4 == ffi::RTE_MBUF_F_TX_TCP_CKSUM;
        o |= when(ol & ffi::RTE_MBUF_F_TX_IPV4 != 0, bits::IPV4)
            | when(ol & ffi::RTE_MBUF_F_TX_IPV6 != 0, bits::IPV6)
            | when(ol & ffi::RTE_MBUF_F_TX_IP_CKSUM != 0, bits::IP_CSUM)
            | when(tcp, bits::TCP_CSUM)
            | when(l4 == ffi::RTE_MBUF_F_TX_UDP_CKSUM, bits::UDP_CSUM);
        if tcp {
            // l2_len is bits 0-6 of tx_offload, l3_len bits 7-15.
            let off = (tx_offload & 0x7f) + ((tx_offload >> 7) & 0x1ff);
            o |= off.min(0x3ff) * bits::TRANS_OFF_ONE;
        }
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
    // SAFETY: DPDK passes our queue; one thread per queue at a time.
    let TxQueue { gate, st: q } = unsafe { &mut *(q as *mut TxQueue) };
    let Some(_pass) = gate.enter() else {
        return 0;
    };
    q.reap();
    if n == 0 {
        return 0;
    }
    // SAFETY: `pkts` holds `n` mbufs owned by the caller until we return.
    let pkts = unsafe { std::slice::from_raw_parts_mut(pkts, usize::from(n)) };
    q.post(pkts) as u16
}

/// `eth_tx_prep_t`: checks each packet's offload requests and writes the
/// pseudo-header checksum the device expects for L4 checksum offload.
///
/// # Safety
/// As [`tx_burst`].
pub unsafe extern "C" fn tx_prepare(q: *mut c_void, pkts: *mut *mut rte_mbuf, n: u16) -> u16 {
    // SAFETY: DPDK passes our queue and `n` valid mbufs.
    let (q, pkts) = unsafe {
        (
            &*(q as *const TxQueue),
            std::slice::from_raw_parts(pkts, usize::from(n)),
        )
    };
    for (i, &m) in pkts.iter().enumerate() {
        // SAFETY: a valid mbuf.
        if let Err(e) = unsafe { prepare_one(q, m) } {
            // SAFETY: sets this lcore's rte_errno.
            unsafe { ffi::mana_shim_set_errno(e) };
            return i as u16;
        }
    }
    n
}

const UNSUPPORTED_TX_FLAGS: u64 = ffi::RTE_MBUF_F_TX_UDP_SEG
    | ffi::RTE_MBUF_F_TX_TUNNEL_MASK
    | ffi::RTE_MBUF_F_TX_OUTER_IP_CKSUM
    | ffi::RTE_MBUF_F_TX_OUTER_IPV4
    | ffi::RTE_MBUF_F_TX_OUTER_IPV6;

/// # Safety
/// `m` is a valid, writable mbuf.
unsafe fn prepare_one(q: &TxQueue, m: *mut rte_mbuf) -> Result<(), c_int> {
    // SAFETY: per the contract.
    let (ol, tx_offload, nb_segs, data_len, data) = unsafe {
        (
            (*m).ol_flags,
            mbuf::tx_offload(m),
            mbuf::nb_segs(m),
            usize::from(mbuf::data_len(m)),
            ((*m).buf_addr as *mut u8).add(usize::from(mbuf::data_off(m))),
        )
    };
    if ol & UNSUPPORTED_TX_FLAGS != 0
        || ol & ffi::RTE_MBUF_F_TX_L4_MASK == ffi::RTE_MBUF_F_TX_SCTP_CKSUM
    {
        return Err(libc::ENOTSUP);
    }
    if u32::from(nb_segs) > gdma::MAX_TX_WQE_SGES as u32
        && q.offloads & consts::TX_OFFLOAD_MULTI_SEGS == 0
    {
        return Err(libc::EINVAL);
    }
    let tso = ol & ffi::RTE_MBUF_F_TX_TCP_SEG != 0;
    // Segmentation implies the TCP checksum (DPDK's rule).
    let l4 = if tso {
        ffi::RTE_MBUF_F_TX_TCP_CKSUM
    } else {
        ol & ffi::RTE_MBUF_F_TX_L4_MASK
    };
    let want_ip = ol & ffi::RTE_MBUF_F_TX_IP_CKSUM != 0;
    if l4 == 0 && !want_ip {
        return Ok(());
    }
    if tso && Tso::of(m, ol, tx_offload).is_err() {
        return Err(libc::EINVAL);
    }
    let l2 = (tx_offload & 0x7f) as usize;
    let l3 = ((tx_offload >> 7) & 0x1ff) as usize;
    let ipv4 = ol & ffi::RTE_MBUF_F_TX_IPV4 != 0;
    let ipv6 = ol & ffi::RTE_MBUF_F_TX_IPV6 != 0;
    if want_ip && !ipv4 {
        return Err(libc::EINVAL);
    }
    let l4_hdr = match l4 {
        ffi::RTE_MBUF_F_TX_TCP_CKSUM => 20,
        ffi::RTE_MBUF_F_TX_UDP_CKSUM => 8,
        _ => 0,
    };
    // The headers must sit in the first segment for the device to parse them.
    if l2 == 0 || l3 == 0 || l2 + l3 + l4_hdr > data_len || (l4 != 0 && !(ipv4 || ipv6)) {
        return Err(libc::EINVAL);
    }
    // SAFETY: the headers lie within the first segment (checked above).
    let hdr = unsafe { std::slice::from_raw_parts_mut(data, l2 + l3 + l4_hdr) };
    if want_ip || (tso && ipv4) {
        hdr[l2 + 10] = 0;
        hdr[l2 + 11] = 0;
    }
    if tso {
        // The device writes each segment's length: it wants 0 here, and a
        // pseudo-header sum without length (as the kernel driver sends).
        let at = if ipv4 { l2 + 2 } else { l2 + 4 };
        hdr[at..at + 2].fill(0);
    }
    if l4 != 0 {
        let phdr = if ipv4 {
            crate::dataplane::csum::ipv4_pseudo(&hdr[l2..l2 + l3])
        } else {
            crate::dataplane::csum::ipv6_pseudo(&hdr[l2..l2 + l3])
        };
        let at = l2 + l3 + if l4_hdr == 20 { 16 } else { 6 };
        hdr[at..at + 2].copy_from_slice(&phdr.to_be_bytes());
    }
    Ok(())
}

/// `tx_done_cleanup`: reaps completions; returns how many packets were freed.
///
/// # Safety
/// As [`tx_burst`].
pub unsafe extern "C" fn tx_done_cleanup(q: *mut c_void, _free_cnt: u32) -> c_int {
    // SAFETY: DPDK passes our queue.
    let TxQueue { gate, st: q } = unsafe { &mut *(q as *mut TxQueue) };
    let Some(_pass) = gate.enter() else {
        return 0;
    };
    q.reap() as c_int
}

/// `tx_descriptor_status`: whether the descriptor `offset` places after the
/// next free one is still owned by the device.
///
/// # Safety
/// As [`tx_burst`].
pub unsafe extern "C" fn tx_descriptor_status(q: *mut c_void, offset: u16) -> c_int {
    // SAFETY: DPDK passes our queue.
    let q = unsafe { &*(q as *const TxQueue) };
    let offset = u32::from(offset);
    if offset >= q.nb_desc {
        return -libc::EINVAL;
    }
    // A stopped queue has completed its sends; a recovering one frees them.
    let Some(_pass) = q.gate.enter() else {
        return ffi::RTE_ETH_TX_DESC_DONE as c_int;
    };
    // Counting back from the head: the last `desc_len` slots are in flight.
    if q.nb_desc - offset <= q.desc_len {
        ffi::RTE_ETH_TX_DESC_FULL as c_int
    } else {
        ffi::RTE_ETH_TX_DESC_DONE as c_int
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn udp_checksum_offload_leaves_the_transport_offset_zero() {
        let ol = ffi::RTE_MBUF_F_TX_IPV6 | ffi::RTE_MBUF_F_TX_UDP_CKSUM;
        let o = TxShortOob::from_raw(tx_oob(TxShortOob::new(), ol, 14 | (40 << 7), false, true));
        assert!(o.is_outer_ipv6() && o.comp_udp_csum());
        assert_eq!(o.trans_off(), 0, "the kernel sets it for TCP only");
        assert_eq!(o.pkt_fmt(), 1);
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
