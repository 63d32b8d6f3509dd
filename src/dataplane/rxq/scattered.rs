//! Scattered receive: WQEs of several buffers, packets as mbuf chains.
//!
//! A queue whose largest frame does not fit one mbuf posts `segs` mbufs
//! per WQE, one SGE each. The device fills the SGEs in order and its
//! completion reports the total length, so a packet of `len` bytes takes
//! the first `ceil(len / buf_len)` buffers, chained; the WQE's unused
//! buffers go straight back to the pool (they are as the pool gave them,
//! with `next` null and one segment). Every completion takes one WQE (a
//! coalesced one, one per packet): the posted ring advances by `segs`
//! mbufs, the RQ by the WQE's basic units.
//!
//! This burst runs only for queues set up with `segs > 1` (`busy` picks it
//! once per burst), so the one-buffer path keeps its fast loop untouched.
//! It takes completions one at a time and checks each as `accept` does.

use super::{miss, rx_flags, rx_wqe_bu, Burst, RxQueue};
use crate::dataplane::mbuf_ring::MbufRing;
use crate::ffi::{self, mbuf, rte_mbuf};
use crate::hw::ring::{Next, WorkQueue};
use gdma::{Cqe, CqeType, Sge, WqeHeader, MAX_RX_WQE_SGES};
use std::ptr;

/// The posted WQEs as a burst consumes them, oldest first.
#[derive(Clone, Copy)]
struct Wqes {
    posted: MbufRing,
    /// RQ position (basic units) of the oldest.
    rq_tail: u32,
    /// WQEs posted.
    n: u32,
    /// Buffers per WQE.
    segs: u32,
    /// Basic units per WQE.
    bu: u32,
}

impl Wqes {
    /// Takes the oldest WQE (the caller checked `n > 0`); returns the ring
    /// position of its first buffer. Its buffers stay in their slots until
    /// the burst's refill reuses them.
    fn take(&mut self) -> u32 {
        debug_assert!(self.n > 0);
        let at = self.posted.tail;
        self.posted.skip(self.segs);
        self.rq_tail = self.rq_tail.wrapping_add(self.bu);
        self.n -= 1;
        at
    }

    /// Buffer `i` of the WQE whose first buffer is at ring position `at`.
    fn buf(&self, at: u32, i: u32) -> *mut rte_mbuf {
        self.posted.at(at.wrapping_add(i))
    }
}

impl RxQueue {
    /// Frees the buffers of a WQE consumed but not delivered; one error.
    #[cold]
    #[inline(never)]
    fn discard_wqe(&self, w: &Wqes, at: u32) {
        self.stats.errors.add(1);
        let mut bufs = [ptr::null_mut(); MAX_RX_WQE_SGES];
        for (i, b) in bufs[..w.segs as usize].iter_mut().enumerate() {
            *b = w.buf(at, i as u32);
        }
        // SAFETY: buffers taken from the ring, ours, delivered to no one.
        unsafe { ffi::rte_pktmbuf_free_bulk(bufs.as_mut_ptr(), w.segs) };
    }

    /// The packet of `len` bytes the device put into the WQE whose first
    /// buffer is at ring position `at`, as a chain of the buffers it used,
    /// with the completion's flags and hash on its first segment. None if
    /// it was dropped: an empty packet, a length the WQE cannot hold (a
    /// byte past its buffers is never read), a VLAN tag not put back.
    fn chain(&self, w: &Wqes, at: u32, len: u16, flags: u32, hash: u32) -> Option<*mut rte_mbuf> {
        let buf_len = self.conf.buf_len;
        let total = u32::from(len);
        if total == 0 {
            self.stats.cqe_unexpected.add(1);
            self.discard_wqe(w, at);
            return None;
        }
        if total > buf_len * w.segs {
            self.stats.bad_length.add(1);
            self.discard_wqe(w, at);
            return None;
        }
        let used = total.div_ceil(buf_len);
        let head = w.buf(at, 0);
        let mut left = total;
        let mut prev: *mut rte_mbuf = ptr::null_mut();
        for i in 0..used {
            let m = w.buf(at, i);
            let n = left.min(buf_len);
            left -= n;
            // SAFETY: posted mbufs the device just filled; ours.
            unsafe {
                mbuf::set_data_len(m, n as u16);
                if !prev.is_null() {
                    (*prev).next = m;
                }
            }
            prev = m;
        }
        if used < w.segs {
            let mut spare = [ptr::null_mut::<rte_mbuf>(); MAX_RX_WQE_SGES];
            let n = w.segs - used;
            for (i, s) in spare[..n as usize].iter_mut().enumerate() {
                *s = w.buf(at, used + i as u32);
            }
            // SAFETY: fresh buffers from `mp` the packet did not use: the
            // refill gave them one segment, no next and a reference count
            // of 1, as the pool holds its mbufs.
            unsafe { ffi::mana_shim_mempool_put_bulk(self.conf.mp, spare.as_ptr().cast(), n) };
        }
        let head_len = total.min(u32::from(u16::MAX)) as u16;
        let (ol, ptype, tci) = rx_flags::packet_meta(flags, head_len, |at| {
            // SAFETY: `at + 2 <= FRAME_HEAD <= MIN_BUF_LEN`, and the first
            // buffer holds at least `MIN_BUF_LEN` bytes (queue setup checks).
            unsafe { mbuf::data_be16(head, at) }
        });
        // SAFETY: the chain's first mbuf, ours.
        unsafe {
            mbuf::set_nb_segs(head, used as u16);
            mbuf::set_pkt_len(head, total);
            (*head).ol_flags = ol;
            mbuf::set_packet_type(head, ptype);
            mbuf::set_rss_hash(head, hash);
            mbuf::set_vlan_tci(head, tci);
        }
        if rx_flags::vlan_stripped(flags) && !self.stripped(head) {
            // Frees the whole chain.
            self.discard(head);
            return None;
        }
        Some(head)
    }

    /// Whether a completion is for this queue and names a posted WQE (see
    /// `accept`); the WQEs before it, used without a completion, are
    /// dropped first.
    fn accept_wqe(&self, c: &Cqe, w: &mut Wqes, rq: &WorkQueue) -> bool {
        let info = c.info;
        if info.is_sq() || info.wq_num() != rq.id & 0xff_ffff {
            self.stats.cqe_wrong_queue.add(1);
            return false;
        }
        match rq.bu_from(w.rq_tail, c.rx_oob().rx_wqe_offset()) {
            Some(d) if d % w.bu == 0 && d / w.bu < w.n => {
                for _ in 0..d / w.bu {
                    self.stats.missed.add(1);
                    let at = w.take();
                    self.discard_wqe(w, at);
                }
                true
            }
            _ => {
                self.stats.cqe_bad_wqe.add(1);
                false
            }
        }
    }

    /// A completion that is neither `RX_OKAY` nor `RX_COALESCED_4` (see
    /// `failed_completion`): drops the WQEs it used.
    #[cold]
    #[inline(never)]
    fn failed_wqes(&self, w: &mut Wqes, cqe: &Cqe, ty: u8) {
        let n = if ty == CqeType::RxTruncated as u8 {
            self.stats.truncated.add(1);
            1
        } else {
            self.stats.cqe_unexpected.add(1);
            cqe.rx_oob().num_packets().max(1) as u32
        };
        for _ in 0..n.min(w.n) {
            let at = w.take();
            self.discard_wqe(w, at);
        }
    }

    /// Packets `first..` of a coalesced completion, one WQE each, into
    /// `pkts`; returns (delivered, bytes, where to resume if `pkts` filled).
    fn coalesced_chains(
        &self,
        w: &mut Wqes,
        cqe: *const Cqe,
        first: usize,
        pkts: &mut [*mut rte_mbuf],
    ) -> (usize, u64, Option<(*const Cqe, u8)>) {
        // SAFETY: a CQE in the ring, live until its WQEs are reposted
        // (after this burst) or the rings are dropped (`detach`).
        let oob = unsafe { &*cqe }.rx_oob();
        let flags = oob.flags.to_raw();
        let (mut got, mut bytes) = (0usize, 0u64);
        let mut k = first;
        while k < gdma::RX_OOB_NUM_PPI && oob.ppi[k].pkt_len() != 0 {
            if got == pkts.len() {
                return (got, bytes, Some((cqe, k as u8)));
            }
            if w.n == 0 {
                self.stats.cqe_unexpected.add(1);
                break;
            }
            let (len, hash) = (oob.ppi[k].pkt_len(), oob.ppi[k].pkt_hash());
            k += 1;
            let at = w.take();
            if let Some(m) = self.chain(w, at, len, flags, hash) {
                pkts[got] = m;
                got += 1;
                bytes += u64::from(len);
            }
        }
        (got, bytes, None)
    }
}

impl Burst<'_> {
    /// `run` for a scattered queue: receives up to `pkts.len()` packets,
    /// each a chain, and reposts the WQEs they used.
    #[inline(never)]
    pub(super) fn run_scattered(&mut self, pkts: &mut [*mut rte_mbuf]) -> usize {
        let q = self.q;
        let st = &mut *self.st;
        let mut w = Wqes {
            posted: st.posted,
            rq_tail: st.rq.tail,
            n: st.posted(),
            segs: st.segs,
            bu: rx_wqe_bu(st.segs),
        };
        let before = w.n;
        let (mut got, mut bytes) = (0usize, 0u64);
        let mut pending = st.pending.take();
        let rq = &st.rq;
        let mut cq = st.cq.reader();
        while got < pkts.len() {
            if let Some((cqe, k)) = pending {
                let (g, b, p) = q.coalesced_chains(&mut w, cqe, usize::from(k), &mut pkts[got..]);
                got += g;
                bytes += b;
                pending = p;
                continue;
            }
            let c = match cq.next() {
                Next::Cqe(c) => c,
                Next::Empty => break,
                Next::OutOfPhase => {
                    q.stats.cq_overflow.add(1);
                    continue;
                }
                Next::Stale => {
                    q.stats.cqe_stale.add(1);
                    continue;
                }
            };
            if !q.accept_wqe(c, &mut w, rq) {
                continue;
            }
            let ty = c.header().cqe_type_raw();
            if ty == CqeType::RxOkay as u8 {
                let oob = c.rx_oob();
                let len = oob.ppi[0].pkt_len();
                let at = w.take();
                if let Some(m) = q.chain(&w, at, len, oob.flags.to_raw(), oob.ppi[0].pkt_hash()) {
                    pkts[got] = m;
                    got += 1;
                    bytes += u64::from(len);
                }
            } else if ty == CqeType::RxCoalesced4 as u8 {
                pending = Some((c as *const Cqe, 0));
            } else {
                q.failed_wqes(&mut w, c, ty);
            }
        }
        drop(cq);
        st.pending = pending;
        st.rq.tail = w.rq_tail;
        st.posted = w.posted;
        q.stats.packets.add(got as u64);
        q.stats.bytes.add(bytes);
        let want = (before - w.n) + st.deficit;
        if want > 0 {
            let done = self.refill_scattered(want);
            self.st.deficit = want - done;
        }
        got
    }

    /// `refill` for a scattered queue: allocates and posts up to `want`
    /// WQEs of `segs` buffers; rings the doorbell once. Returns how many
    /// WQEs were posted (`nombuf` counts the buffers not allocated).
    pub(super) fn refill_scattered(&mut self, want: u32) -> u32 {
        let (port_id, mp) = (self.q.conf.port_id, self.q.conf.mp);
        let buf_len = self.q.conf.buf_len;
        let stats = &self.q.stats;
        let st = &mut *self.st;
        let (rearm, segs) = (st.rearm, st.segs);
        let bu = rx_wqe_bu(segs);
        let header = WqeHeader::new()
            .with_num_sge(segs as u8)
            .with_inline_oob_size_div4(2)
            .into_bits()
            .get();
        let mut posted = st.posted;
        let mut wq = st.rq.writer();
        let mut region = st.mr.first().fixed_len(buf_len as usize);
        let mut bufs = [ptr::null_mut::<rte_mbuf>(); MAX_RX_WQE_SGES];
        let mut sgl = [Sge::new(0, 0, 0); MAX_RX_WQE_SGES];
        let (bufs, sgl) = (&mut bufs[..segs as usize], &mut sgl[..segs as usize]);
        let mut done = 0;
        'fill: while done < want {
            // SAFETY: `bufs` has room for `segs` pointers; the pool holds mbufs.
            if unsafe { ffi::mana_shim_mempool_get_bulk(mp, bufs.as_mut_ptr().cast(), segs) } != 0 {
                stats.nombuf.add(u64::from((want - done) * segs));
                break;
            }
            for (&m, sge) in bufs.iter().zip(sgl.iter_mut()) {
                // SAFETY: an mbuf just taken from the pool: ours and valid.
                let addr = unsafe {
                    mbuf::set_rearm(m, rearm);
                    (*m).buf_addr as usize
                } + ffi::RTE_PKTMBUF_HEADROOM as usize;
                if !region.covers(addr) {
                    let Some(r) = miss(&mut st.mr, port_id, addr, buf_len as usize) else {
                        // Outside every registered region (see `refill`):
                        // give the WQE's buffers back, try later.
                        // SAFETY: these came from `mp` above, not posted.
                        unsafe { ffi::mana_shim_mempool_put_bulk(mp, bufs.as_ptr().cast(), segs) };
                        stats.nombuf.add(u64::from((want - done) * segs));
                        break 'fill;
                    };
                    region = r;
                }
                *sge = Sge::new(addr as u64, region.lkey, buf_len);
            }
            wq.post(header, &[0], sgl, bu);
            for &m in bufs.iter() {
                posted.push(m);
            }
            done += 1;
        }
        drop(wq);
        st.posted = posted;
        if done > 0 {
            st.rq_db.ring(port_id, st.rq.doorbell_tail());
        }
        done
    }
}
