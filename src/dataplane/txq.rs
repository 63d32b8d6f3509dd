//! Transmit queues: the burst function that writes send WQEs and rings the
//! SQ doorbell once per burst, completion reaping with CQE suppression, and
//! `tx_prepare` for the checksum offloads.
//!
//! A `TxQueue` lives in DPDK shared memory (`rte_zmalloc_socket`) so that
//! secondary processes can use it; it holds plain data only.

use super::gate::{Gate, Pass};
use super::mr_cache;
use super::queue::{alloc_queue_mem, free_queue_mem, ControlToken, DataQueue};
use super::stats::Counter;
use super::tx_prepare::Tso;
use crate::ffi::{self, mbuf, rte_mbuf};
use crate::hw::doorbell::Doorbell;
use crate::hw::ring::{CompQueue, Next, WorkQueue};
use gdma::{CqeType, Sge, TxLongOob, TxShortOob, WqeHeader};
use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::ptr::{self, NonNull};

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
        let (q, desc) = alloc_queue_mem::<TxQueue, Desc>(c"mana_txq", conf.nb_desc, conf.socket)?;
        let nb_desc = u32::from(conf.nb_desc);
        // SAFETY: fresh memory for one queue, written before anyone sees it.
        unsafe {
            ptr::write(
                q,
                TxQueue {
                    gate: Gate::new(),
                    state: UnsafeCell::new(TxState {
                        sq: WorkQueue::empty(),
                        sq_db: Doorbell::default(),
                        cq: CompQueue::empty(),
                        desc,
                        desc_mask: nb_desc - 1,
                        desc_head: 0,
                        desc_tail: 0,
                        desc_len: 0,
                        nb_desc,
                        oob_template: TxShortOob::new(),
                        long_vp: None,
                        max_sge: 1,
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
        st.desc_head = 0;
        st.desc_tail = 0;
        st.desc_len = 0;
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
        self.desc_len
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
            free_queue_mem(q.as_ptr(), st.desc);
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
        let n = self.st.desc_len;
        while self.st.desc_len > 0 {
            let d = self.take_desc();
            // Counted as sent when posted; they never reached the wire.
            self.q.stats.packets.sub(u64::from(d.wire_packets));
            self.q.stats.bytes.sub(u64::from(d.wire_bytes));
            self.q.stats.errors.add(u64::from(d.wire_packets));
            // SAFETY: the mbuf was handed to us by tx_burst and not freed.
            unsafe { ffi::rte_pktmbuf_free_bulk(&mut { d.mbuf }, 1) };
        }
        self.st.sq = WorkQueue::empty();
        self.st.cq = CompQueue::empty();
        self.st.mr.clear();
        n
    }

    #[inline(always)]
    fn take_desc(&mut self) -> Desc {
        // SAFETY: the caller checked desc_len > 0; the index is masked.
        let d = unsafe {
            *self
                .st
                .desc
                .add((self.st.desc_tail & self.st.desc_mask) as usize)
        };
        self.st.desc_tail = self.st.desc_tail.wrapping_add(1);
        self.st.desc_len -= 1;
        self.st.sq.tail = self.st.sq.tail.wrapping_add(u32::from(d.bu));
        d
    }

    /// How many in-flight WQEs, from the oldest, a completion naming the
    /// WQE at byte offset `wqe_offset` completes (that WQE included); `None`
    /// if no WQE in flight starts there.
    fn completes(&self, wqe_offset: u32) -> Option<u32> {
        let want = self.st.sq.bu_from_tail(wqe_offset)?;
        if want >= self.st.sq.head.wrapping_sub(self.st.sq.tail) {
            return None;
        }
        let mut at = 0u32;
        for k in 0..self.st.desc_len {
            if at == want {
                return Some(k + 1);
            }
            // SAFETY: k < desc_len: an in-flight descriptor; the index is
            // masked into the ring.
            let d = unsafe {
                &*self
                    .st
                    .desc
                    .add((self.st.desc_tail.wrapping_add(k) & self.st.desc_mask) as usize)
            };
            at += u32::from(d.bu);
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
        const BULK: usize = 64;
        let mut done: [*mut rte_mbuf; BULK] = [ptr::null_mut(); BULK];
        let mut n_done = 0usize;
        let mut completed = 0u32;
        let (mut unsent, mut unsent_bytes) = (0u64, 0u64);
        loop {
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
            if !info.is_sq() || info.wq_num() != self.st.sq.id & 0xff_ffff {
                self.q.stats.cqe_wrong_queue.add(1);
                continue;
            }
            let Some(n) = self.completes(off) else {
                self.q.stats.cqe_bad_wqe.add(1);
                continue;
            };
            let ok = ty == CqeType::TxOkay as u8;
            // An error completion is for its WQE alone; an unknown
            // (garbled) one leaves the fate of its WQE and the run before
            // it unknown: they count as errors.
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
            for k in 0..n {
                let d = self.take_desc();
                completed += 1;
                let last = k + 1 == n;
                if !last && !d.suppressed {
                    self.q.stats.missed.add(1);
                }
                if unknown || (last && !ok) {
                    // Counted as sent when posted; the device dropped it.
                    self.q.stats.errors.add(1);
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
            }
        }
        if n_done > 0 {
            // SAFETY: the first n_done entries are completed mbufs, ours.
            unsafe { ffi::rte_pktmbuf_free_bulk(done.as_mut_ptr(), n_done as u32) };
        }
        self.q.stats.packets.sub(unsent);
        self.q.stats.bytes.sub(unsent_bytes);
        completed
    }

    fn drop_packet(&mut self, m: *mut rte_mbuf, why: DropReason) {
        self.q.stats.drops[why as usize].add(1);
        self.q.stats.errors.add(1);
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
        while i < n && self.st.desc_len < self.st.nb_desc {
            let mut m = pkts[i];
            // SAFETY: tx_burst's caller hands us valid mbuf chains.
            let mut nb_segs = u32::from(unsafe { mbuf::nb_segs(m) });
            // SAFETY: the same valid mbuf.
            let tso = unsafe { (*m).ol_flags } & ffi::RTE_MBUF_F_TX_TCP_SEG != 0;
            // TSO puts the headers alone in SGE 0: one more SGE at most.
            if nb_segs + u32::from(tso) > self.st.max_sge {
                match linearize(m) {
                    Some(l) => {
                        self.q.stats.linearized.add(1);
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
            // SAFETY: a valid mbuf (linearize returns one too).
            let (ol, vlan_tci, pkt_len, tx_offload) = unsafe {
                (
                    (*m).ol_flags,
                    mbuf::vlan_tci(m),
                    mbuf::pkt_len(m),
                    mbuf::tx_offload(m),
                )
            };
            let vlan = ol & ffi::RTE_MBUF_F_TX_VLAN != 0;
            let long = self.st.long_vp.is_some() || vlan;
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
            if self.st.sq.free_bu() < bu {
                break;
            }
            let Some(()) = self.fill_sgl(m, nb_segs, tso, &mut sgl) else {
                self.drop_packet(m, DropReason::NoMemoryRegion);
                i += 1;
                continue;
            };
            let suppressed = i + 1 < n;
            let mut oob = [
                tx_oob(self.st.oob_template, ol, tx_offload, suppressed, long),
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
                if let Some(vp) = self.st.long_vp {
                    l = l.with_long_vp_offset(vp);
                }
                let l = l.into_bits().get();
                oob[1] = l as u64;
                oob[2] = (l >> 64) as u64;
            }
            last_oob = self
                .st
                .sq
                .post(header, &oob[..oob_words], &sgl[..num_sge as usize], bu);
            last_suppressed = suppressed;
            // SAFETY: the index is masked into the ring.
            unsafe {
                *self
                    .st
                    .desc
                    .add((self.st.desc_head & self.st.desc_mask) as usize) = Desc {
                    mbuf: m,
                    wire_bytes,
                    wire_packets: wire_packets.min(u32::from(u16::MAX)) as u16,
                    bu: bu as u8,
                    suppressed,
                };
            }
            self.st.desc_head = self.st.desc_head.wrapping_add(1);
            self.st.desc_len += 1;
            sent += u64::from(wire_packets);
            sent_bytes += u64::from(wire_bytes);
            i += 1;
        }
        // Counted when the device takes them (so counters agree with the
        // device's whenever the queue is idle); errors are taken back at reap.
        self.q.stats.packets.add(sent);
        self.q.stats.bytes.add(sent_bytes);
        if !last_oob.is_null() {
            if last_suppressed {
                // The burst ended early: the last WQE must produce a CQE, or
                // its run would wait for a later burst to complete.
                // SAFETY: the OOB of the WQE just written; the device has not
                // been told about it yet.
                unsafe {
                    *last_oob &= !0x80;
                    let d = self
                        .st
                        .desc
                        .add((self.st.desc_head.wrapping_sub(1) & self.st.desc_mask) as usize);
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
            let lkey = self.st.mr.lkey(self.q.conf.port_id, addr, len as usize)?;
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
        self.st
            .sq_db
            .ring(self.q.conf.port_id, self.st.sq.doorbell_tail());
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
    if u32::from(q.conf.nb_desc - offset) <= st.desc_len {
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
