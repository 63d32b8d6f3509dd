//! The vector and scalar transmit paths side by side, for the `tx_paths`
//! fuzz target and its run under `cargo test`: two transmit queues on
//! plain memory (SQ and CQ rings, mbufs of a mempool of their own, the
//! receive harness's mempool operations and doorbell page), no EAL and no
//! device. The input builds the same bursts for both (plain packets
//! mostly; chains, offload requests, bad TSO requests, buffers outside the
//! memory region, lengths of any size) and a device model writes the same
//! completions to both (the OK of the oldest run, error completions,
//! offsets anywhere, other queues, owner bits of other laps); each queue
//! runs `tx_burst` on its own path, and after every burst the two must
//! agree exactly: packets taken, every counter, the rings' positions and
//! run records, the mbufs in flight and in the pool (as indices), every
//! mbuf's bytes, the SQ's bytes (buffer addresses relative to each side's
//! buffers) and the doorbell page. After the teardown every mbuf is back
//! in its pool.
//!
//! Built for tests and with the `fuzzing` feature only.

use super::{tx_burst, DescMem, Run, TxConf, TxHw, TxPath, TxQueue, TxState, TxStats};
use crate::dataplane::mbuf_ring::MbufRing;
use crate::dataplane::mr_cache::Region;
use crate::dataplane::rxq::side_by_side::{db_page, ops_index, Free, Input, DB_WORDS, LOCK, PORT};
use crate::ffi::{self, mbuf, rte_mbuf, rte_mempool};
use gdma::{owner_bits, CqeHeader, CqeInfo, CqeType, TxCompOffsets, CQE_SIZE, WQE_BU_SIZE};
use std::collections::VecDeque;
use std::mem::offset_of;

const HEADROOM: usize = ffi::RTE_PKTMBUF_HEADROOM as usize;
/// Bytes of each buffer after the headroom.
const ROOM: usize = 512;
const STRIDE: usize = HEADROOM + ROOM;
const SQ_ID: u32 = 0x1234;
const CQ_ID: u32 = 0x77;

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

/// What the input sets up: the same for both queues.
struct Shape {
    nb_desc: u16,
    sq_size: u32,
    cq_count: u32,
    vp_offset: u32,
    fast_free: bool,
    mbufs: usize,
}

/// One transmit queue on plain memory, with its pool, mbufs and buffers.
struct Side {
    q: Box<TxQueue>,
    mp: Box<rte_mempool>,
    free: Box<Free>,
    mbufs: Vec<rte_mbuf>,
    bufs: Vec<u8>,
    sq: Vec<Line>,
    cq: Vec<Line>,
    _desc: Vec<DescMem>,
}

impl Side {
    fn new(s: &Shape, path: TxPath) -> Side {
        let mut bufs = vec![0x5au8; STRIDE * s.mbufs];
        let mut free = Box::new(Free(VecDeque::new()));
        let mut mp = Box::new(rte_mempool::default());
        mp.ops_index = ops_index();
        mp.pool_config = (&mut *free as *mut Free).cast();
        mp.size = s.mbufs as u32;
        let mut mbufs: Vec<rte_mbuf> = (0..s.mbufs).map(|_| rte_mbuf::default()).collect();
        for (i, m) in mbufs.iter_mut().enumerate() {
            let p: *mut rte_mbuf = m;
            // SAFETY: `p` is a live mbuf of the vector; its buffer lies in
            // `bufs`, which outlives it.
            unsafe {
                (*p).buf_addr = bufs.as_mut_ptr().add(i * STRIDE).cast();
                mbuf::set_buf_len(p, STRIDE as u16);
                (*p).pool = &mut *mp;
                mbuf::set_rearm(p, mbuf::rearm_word(HEADROOM as u16, PORT));
            }
            free.0.push_back(p.cast());
        }
        let n = usize::from(s.nb_desc);
        let mut desc = vec![[0u64; 3]; n];
        let base = desc.as_mut_ptr() as *mut u8;
        let offloads = if s.fast_free {
            ffi::consts::TX_OFFLOAD_MBUF_FAST_FREE
        } else {
            0
        };
        // SAFETY: the two arrays lie inside `desc` (as `TxQueue::alloc`
        // carves them), which lives as long as the queue (kept in `Side`).
        let (inflight, runs) = unsafe {
            (
                MbufRing::new(base as *mut *mut rte_mbuf, n as u32),
                base.add(n * size_of::<*mut rte_mbuf>()) as *mut Run,
            )
        };
        let q = Box::new(TxQueue {
            gate: super::Gate::new(),
            state: std::cell::UnsafeCell::new(TxState {
                sq: crate::hw::ring::WorkQueue::empty(),
                sq_db: crate::hw::doorbell::Doorbell::default(),
                cq: crate::hw::ring::CompQueue::empty(),
                inflight,
                runs,
                run_head: 0,
                run_tail: 0,
                nb_desc: n as u32,
                oob_template: gdma::TxShortOob::new(),
                long_vp: None,
                max_sge: 1,
                fast_free: s.fast_free,
                mr: crate::dataplane::mr_cache::Cache::new(),
            }),
            stats: TxStats::default(),
            conf: TxConf {
                port_id: PORT,
                queue_id: 0,
                socket: 0,
                nb_desc: s.nb_desc,
                offloads,
                conf: ffi::rte_eth_txconf::default(),
                path,
            },
        });
        let mut sq = vec![Line([0; 64]); s.sq_size as usize / 64];
        let mut cq = vec![Line([0; 64]); s.cq_count as usize];
        let hw = TxHw {
            sq_buf: sq.as_mut_ptr().cast(),
            sq_size: s.sq_size,
            sq_id: SQ_ID,
            cq_buf: cq.as_mut_ptr().cast(),
            cq_count: s.cq_count,
            cq_id: CQ_ID,
            vp_offset: s.vp_offset,
            max_sge: gdma::MAX_TX_WQE_SGES as u32,
        };
        // SAFETY: the gate starts closed: nothing else reaches the state.
        let st = unsafe { &mut *q.state.get() };
        st.mr.insert(Region {
            start: bufs.as_ptr() as usize,
            end: bufs.as_ptr() as usize + bufs.len(),
            lkey: 0x5eed,
        });
        // SAFETY: the rings live in the `Side` as long as the queue.
        unsafe { q.attach(st, &hw) };
        q.gate.open();
        Side {
            q,
            mp,
            free,
            mbufs,
            bufs,
            sq,
            cq,
            _desc: desc,
        }
    }

    fn state(&self) -> &TxState {
        // SAFETY: no burst runs (the harness is single-threaded).
        unsafe { &*self.q.state.get() }
    }

    fn index(&self, m: *mut rte_mbuf) -> usize {
        if m.is_null() {
            return usize::MAX;
        }
        let base = self.mbufs.as_ptr() as usize;
        let i = (m as usize).wrapping_sub(base) / size_of::<rte_mbuf>();
        assert!(
            i < self.mbufs.len() && m as usize == base + i * size_of::<rte_mbuf>(),
            "a pointer that is no mbuf of the pool: {m:?}"
        );
        i
    }

    fn alloc(&mut self) -> Option<*mut rte_mbuf> {
        let m = self.free.0.pop_front()? as *mut rte_mbuf;
        let i = self.index(m);
        // SAFETY: a free mbuf of this side: reset as the pool hands it out.
        unsafe {
            (*m).buf_addr = self.bufs.as_mut_ptr().add(i * STRIDE).cast();
            (*m).next = std::ptr::null_mut();
            (*m).ol_flags = 0;
            mbuf::set_rearm(m, mbuf::rearm_word(HEADROOM as u16, PORT));
        }
        Some(m)
    }

    /// The application frees what `tx_burst` did not take.
    fn give_back(&mut self, m: *mut rte_mbuf) {
        let mut seg = m;
        while !seg.is_null() {
            self.free.0.push_back(seg.cast());
            // SAFETY: a segment of a chain the harness built.
            seg = unsafe { (*seg).next };
        }
    }

    /// Every counter, in `TxStats` order.
    fn counters(&self) -> Vec<u64> {
        let s = &self.q.stats;
        let mut counters = vec![
            s.packets.get(),
            s.bytes.get(),
            s.errors.get(),
            s.linearized.get(),
            s.cqe_unexpected.get(),
            s.cq_overflow.get(),
            s.cqe_stale.get(),
            s.cqe_wrong_queue.get(),
            s.cqe_bad_wqe.get(),
            s.missed.get(),
        ];
        counters.extend(s.drops.iter().map(|c| c.get()));
        counters.extend(s.cqe_errors.iter().map(|c| c.get()));
        counters
    }

    /// Counters, ring positions, run records, the mbufs in flight and
    /// free (as indices), every mbuf's bytes (pointers as indices).
    fn summary(&self) -> String {
        let st = self.state();
        let counters = self.counters();
        let inflight: Vec<usize> = (0..st.inflight.len())
            .map(|i| self.index(st.inflight.at(st.inflight.tail.wrapping_add(i))))
            .collect();
        let runs: Vec<(u32, u32, u32, bool)> = (0..st.run_head.wrapping_sub(st.run_tail))
            .map(|i| {
                // SAFETY: a run record in flight, inside the records `new`
                // carved out.
                let r = unsafe { *st.runs.add(st.inflight.index(st.run_tail.wrapping_add(i))) };
                (r.end, r.sq_end, r.last, r.fast)
            })
            .collect();
        let free: Vec<usize> = self.free.0.iter().map(|m| self.index(m.cast())).collect();
        let base = self.bufs.as_ptr() as usize;
        let mut m_bytes = Vec::new();
        for m in &self.mbufs {
            let p = m as *const rte_mbuf;
            // SAFETY: plain bytes of a live mbuf.
            let b = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), size_of::<rte_mbuf>()) };
            let skip = |at: usize| at..at + 8;
            let skips = [
                skip(offset_of!(rte_mbuf, buf_addr)),
                skip(offset_of!(rte_mbuf, pool)),
                skip(offset_of!(rte_mbuf, next)),
            ];
            m_bytes.extend(
                b.iter()
                    .enumerate()
                    .filter(|(i, _)| !skips.iter().any(|r| r.contains(i)))
                    .map(|(_, v)| *v),
            );
            let a = m.buf_addr as usize;
            let a = if (base..base + self.bufs.len()).contains(&a) {
                a - base
            } else {
                a
            };
            m_bytes.extend(a.to_le_bytes());
            m_bytes.extend(self.index(m.next).to_le_bytes());
            assert!(
                std::ptr::eq(m.pool.cast_const(), &*self.mp),
                "an mbuf changed pools"
            );
        }
        format!(
            "counters {counters:?}\nsq head {} tail {} cq head {}\ninflight {inflight:?} \
             (head {} tail {})\nruns {runs:?} (head {} tail {})\nfree {free:?}\nmbufs {:x?}",
            st.sq.head,
            st.sq.tail,
            st.cq.head(),
            st.inflight.head,
            st.inflight.tail,
            st.run_head,
            st.run_tail,
            m_bytes,
        )
    }

    /// The SQ's bytes, every word that is an address in this side's
    /// buffers made relative to them.
    fn sq_relative(&self) -> Vec<u8> {
        let base = self.bufs.as_ptr() as u64;
        let end = base + self.bufs.len() as u64;
        // SAFETY: plain bytes of the vector.
        let b = unsafe {
            std::slice::from_raw_parts(self.sq.as_ptr().cast::<u8>(), self.sq.len() * 64)
        };
        let mut out = Vec::with_capacity(b.len());
        for w in b.chunks_exact(8) {
            let v = u64::from_le_bytes(w.try_into().unwrap());
            let v = if (base..=end).contains(&v) {
                v - base
            } else {
                v
            };
            out.extend(v.to_le_bytes());
        }
        out
    }
}

fn compare(sides: &[Side; 2], when: &str) {
    let (a, b) = (sides[0].summary(), sides[1].summary());
    assert!(
        a == b,
        "{when}: the paths disagree\nvector:\n{a}\nscalar:\n{b}"
    );
    assert!(
        sides[0].sq_relative() == sides[1].sq_relative(),
        "{when}: the SQs differ"
    );
}

/// One completion, written to both queues' CQ at the producer's slot
/// (`prod`), for a WQE of side 0's SQ (the sides agree so far).
fn complete(inp: &mut Input<'_>, prod: &mut u32, s: &Shape, sides: &mut [Side; 2]) {
    let mode = inp.u8();
    let st = sides[0].state();
    let oldest_last = (st.run_tail != st.run_head).then(|| {
        // SAFETY: the oldest run record, inside the records carved out.
        unsafe { (*st.runs.add(st.inflight.index(st.run_tail))).last }
    });
    let mut ty = CqeType::TxOkay as u8;
    let mut off = oldest_last.unwrap_or(0);
    let mut wq = SQ_ID;
    let mut is_sq = true;
    let mut owner = owner_bits(*prod, s.cq_count);
    match mode % 16 {
        // The OK of the oldest run: the common case.
        0..=7 => {}
        // An error for a WQE: the oldest run's last, or any one.
        8 | 9 => {
            ty = CqeType::TxOkay as u8 + 1 + inp.u8() % 10;
            if mode & 0x10 != 0 {
                off = u32::from(inp.u16()) * WQE_BU_SIZE as u32 % s.sq_size;
            }
        }
        // Any offset (off a WQE boundary, outside the ring, far ahead).
        10 => off = inp.u32() & 0x7ff_ffff,
        11 => off = u32::from(inp.u16()) * WQE_BU_SIZE as u32 % s.sq_size,
        // Another queue or the receive direction.
        12 => wq ^= 1 + u32::from(inp.u8()),
        13 => is_sq = false,
        // Any type.
        14 => ty = inp.u8() & 0x3f,
        // Owner bits of another lap.
        _ => owner = (owner + 1 + inp.u8() % 7) & 7,
    }
    let mut data = [0u8; gdma::CQE_DATA_SIZE];
    let hdr = CqeHeader::with_type(CqeType::TxOkay)
        .with_cqe_type_raw(ty)
        .to_raw();
    let offsets = TxCompOffsets::new()
        .with_tx_wqe_offset(off & 0x7ff_ffff)
        .to_raw();
    data[0..4].copy_from_slice(&hdr.to_le_bytes());
    data[8..12].copy_from_slice(&offsets.to_le_bytes());
    let info = CqeInfo::new()
        .with_wq_num(wq & 0xff_ffff)
        .with_is_sq(is_sq)
        .with_owner_bits(owner);
    let slot = (*prod % s.cq_count) as usize;
    for side in sides.iter_mut() {
        let line = &mut side.cq[slot].0;
        line[..gdma::CQE_DATA_SIZE].copy_from_slice(&data);
        line[CQE_SIZE - 4..].copy_from_slice(&info.to_raw().to_le_bytes());
    }
    *prod = prod.wrapping_add(1);
}

/// One packet, built the same on both sides from the input: plain mostly,
/// else a chain, an offload request (checksums, VLAN, TSO, good or bad),
/// a buffer outside the region, lengths up to the buffer's or any.
fn packet(inp: &mut Input<'_>, sides: &mut [Side; 2]) -> Option<[*mut rte_mbuf; 2]> {
    let kind = inp.u8();
    let segs = if kind & 0xe0 == 0xe0 {
        2 + usize::from(inp.u8() % 3)
    } else {
        1
    };
    let mut ol = 0u64;
    if kind & 0x18 == 0x18 {
        use ffi::{
            RTE_MBUF_F_TX_IPV4 as V4, RTE_MBUF_F_TX_IPV6 as V6, RTE_MBUF_F_TX_IP_CKSUM as IPC,
            RTE_MBUF_F_TX_TCP_CKSUM as TCP, RTE_MBUF_F_TX_TCP_SEG as TSO,
            RTE_MBUF_F_TX_UDP_CKSUM as UDP, RTE_MBUF_F_TX_VLAN as VLAN,
        };
        ol = [
            V4 | IPC | TCP,
            V6 | UDP,
            VLAN,
            V4 | IPC | TSO | TCP,
            V4 | UDP | VLAN,
            1 << 63,
        ][usize::from(inp.u8() % 6)];
    }
    let tx_offload = match inp.u8() % 4 {
        0 => inp.u32().into(),
        _ => 14 | (20 << 7) | (20 << 16) | (u64::from(inp.u16() % 2000) << 24),
    };
    let tci = inp.u16();
    let outside = kind & 0x07 == 0x07;
    let mut lens = Vec::with_capacity(segs);
    for _ in 0..segs {
        let off = HEADROOM - 64 + usize::from(inp.u8() % 128);
        let len = match inp.u8() {
            0 => ROOM as u16 + 64 + u16::from(inp.u8()),
            b => 14 + u16::from(b) * 2,
        };
        lens.push((
            off as u16,
            len.min((STRIDE - off) as u16 + u16::from(outside)),
        ));
    }
    // Sometimes a packet length that is not the segments' sum, up to
    // 2^32 - 1 (`Tso::wire` saturates).
    let pkt_len_lie = (inp.u8() >= 0xf0).then(|| inp.u32());
    // The pools run dry alike (their free lists are compared).
    if sides.iter().any(|s| s.free.0.len() < segs) {
        return None;
    }
    let mut heads = [std::ptr::null_mut(); 2];
    for (k, side) in sides.iter_mut().enumerate() {
        let chain: Vec<*mut rte_mbuf> = (0..segs).filter_map(|_| side.alloc()).collect();
        let total: u32 = lens.iter().map(|l| u32::from(l.1)).sum();
        for (j, &m) in chain.iter().enumerate() {
            // SAFETY: fresh mbufs of this side.
            unsafe {
                mbuf::set_data_off(m, lens[j].0);
                mbuf::set_data_len(m, lens[j].1);
                if j + 1 < chain.len() {
                    (*m).next = chain[j + 1];
                }
                if outside {
                    (*m).buf_addr = 0x1000usize.wrapping_mul(j + 1) as *mut _;
                }
            }
        }
        let h = chain[0];
        // SAFETY: the head of the chain just built.
        unsafe {
            mbuf::set_nb_segs(h, segs as u16);
            mbuf::set_pkt_len(h, pkt_len_lie.unwrap_or(total));
            (*h).ol_flags = ol;
            mbuf::set_tx_offload(h, tx_offload);
            mbuf::set_vlan_tci(h, tci);
        }
        heads[k] = h;
    }
    Some(heads)
}

/// Runs the input's bursts through a queue on each path; panics where
/// they disagree. Returns the counters before the teardown (`TxStats`
/// order: packets, bytes, errors, linearized, cqe_unexpected, cq_overflow,
/// cqe_stale, cqe_wrong_queue, cqe_bad_wqe, missed, the three drops, the
/// ten completion errors), for the caller's coverage figures.
pub fn check(data: &[u8]) -> Vec<u64> {
    let _one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let page = db_page();
    let mut inp = Input(data);
    let b = inp.u8();
    let nb_desc = 128u16 >> (b % 6);
    let shape = Shape {
        nb_desc,
        // Room for every descriptor's WQE at one to four units each, or
        // less (the SQ fills before the ring).
        sq_size: (u32::from(nb_desc) * WQE_BU_SIZE as u32) << (b / 6 % 4) >> 1,
        cq_count: u32::from(nb_desc) << (b >> 6 & 1),
        vp_offset: if b & 0x80 != 0 { 0x1ab } else { 7 },
        fast_free: inp.u8() & 1 != 0,
        mbufs: 2 * usize::from(nb_desc) + usize::from(inp.u8() % 64),
    };
    let vector = if TxPath::vector_available() {
        TxPath::VectorAvx2
    } else {
        TxPath::Scalar
    };
    let mut sides = [Side::new(&shape, vector), Side::new(&shape, TxPath::Scalar)];
    compare(&sides, "after setup");
    let mut prod = gdma::cq_initial_index(shape.cq_count);
    let mut round = 0;
    while !inp.is_empty() && round < 64 {
        let c = inp.u8();
        for _ in 0..c % 4 {
            complete(&mut inp, &mut prod, &shape, &mut sides);
        }
        let want = usize::from(inp.u8() % 64);
        let mut pkts: [Vec<*mut rte_mbuf>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..want {
            let Some([a, b]) = packet(&mut inp, &mut sides) else {
                break;
            };
            pkts[0].push(a);
            pkts[1].push(b);
        }
        let mut took = [0u16; 2];
        let mut dbs = [Vec::new(), Vec::new()];
        for k in 0..2 {
            // SAFETY: the harness's doorbell page, DB_WORDS words.
            unsafe { page.write_bytes(0, DB_WORDS) };
            let q = &*sides[k].q as *const TxQueue as *mut std::ffi::c_void;
            // SAFETY: a started queue of the harness and its packets.
            took[k] = unsafe { tx_burst(q, pkts[k].as_mut_ptr(), pkts[k].len() as u16) };
            // SAFETY: as above.
            dbs[k] = unsafe { std::slice::from_raw_parts(page, DB_WORDS) }.to_vec();
            for &m in &pkts[k][usize::from(took[k])..] {
                sides[k].give_back(m);
            }
        }
        assert_eq!(took[0], took[1], "round {round}: packets taken");
        assert!(dbs[0] == dbs[1], "round {round}: the doorbells differ");
        compare(&sides, &format!("round {round}"));
        round += 1;
    }
    let out = sides[0].counters();
    for side in sides.iter_mut() {
        // The harness is single-threaded: the gate closes with no burst
        // inside.
        side.q.gate.close(|| {});
        // SAFETY: a closed gate and no other thread: the state is ours.
        let st = unsafe { &mut *side.q.state.get() };
        side.q.detach(st);
    }
    compare(&sides, "after teardown");
    for side in &sides {
        assert_eq!(
            side.free.0.len(),
            side.mbufs.len(),
            "every mbuf back in its pool"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    /// xorshift64*: reproducible inputs without a dependency.
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
            })
            .collect()
    }

    /// The fuzz target's committed seeds (`fuzz/seeds/tx_paths`), then
    /// generated inputs: the paths agree on every burst, and the inputs
    /// reach the checks: packets sent, drops of each kind, completions
    /// refused for each reason, error completions and missed ones.
    #[test]
    fn the_transmit_paths_agree_on_the_seeds_and_generated_bursts() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/tx_paths");
        let mut seeds: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        seeds.sort();
        assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
        for p in &seeds {
            super::check(&std::fs::read(p).unwrap());
        }
        let mut seen = vec![0u64; 23];
        for seed in 0..150u64 {
            // Two in three biased towards plain packets: most bytes small.
            let mut d = bytes(seed, 6000);
            for (i, b) in d.iter_mut().enumerate() {
                if seed % 3 != 0 && i % 3 != 0 {
                    *b &= 0x47;
                }
            }
            for (s, c) in seen.iter_mut().zip(super::check(&d)) {
                *s += c;
            }
        }
        eprintln!("counters (TxStats order) over the generated inputs: {seen:?}");
        // packets, errors, cq_overflow, cqe_wrong_queue, cqe_bad_wqe,
        // missed, drops (no region, bad TSO), a completion error.
        for i in [0, 2, 5, 7, 8, 9, 10, 12, 14] {
            assert!(seen[i] > 0, "counter {i} never moved: {seen:?}");
        }
        assert!(seen[0] > 10_000, "{seen:?}");
    }
}
