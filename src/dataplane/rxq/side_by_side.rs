//! The vector and scalar receive paths side by side, for the `rx_paths`
//! fuzz target and its replay under `cargo test`: two receive queues on
//! plain memory (CQ and RQ rings, mbufs of a mempool of their own, a
//! doorbell page), no EAL and no device. A device model driven by the
//! input writes the same completions and frame heads to both; each queue
//! runs `rx_burst` on its own path, and after every burst the two must
//! agree exactly: packets delivered, every byte of every mbuf and buffer
//! (pointers as indices), every counter, the rings' positions, the WQEs
//! reposted and the doorbell written. Guards around every buffer and
//! `pkts`, and the CQ (which the driver writes only to scrub a skipped
//! slot's owner bits), catch a stray access.
//!
//! Built for tests and with the `fuzzing` feature only.

use super::{rx_burst, RxConf, RxHw, RxPath, RxQueue, RxState, RxStats};
use crate::dataplane::mbuf_ring::MbufRing;
use crate::dataplane::mr_cache::Region;
use crate::ffi::{self, rte_mbuf, rte_mempool};
use crate::hw::doorbell;
use gdma::{owner_bits, CqeInfo, RxCompFlags, CQE_SIZE, WQE_BU_SIZE};
use std::collections::VecDeque;
use std::ffi::{c_int, c_uint, c_void};
use std::mem::offset_of;
use std::sync::{Mutex, OnceLock};

const HEADROOM: usize = ffi::RTE_PKTMBUF_HEADROOM as usize;
/// Bytes before and after each buffer that nothing may change.
const GUARD: usize = 64;
const GUARD_BYTE: u8 = 0xa5;
/// The port both queues claim: their doorbell page is the harness's.
pub(crate) const PORT: u16 = (ffi::RTE_MAX_ETHPORTS - 1) as u16;
pub(crate) const DB_WORDS: usize = 512;

/// Reads the fuzz input front to back; zeros once it runs out.
pub(crate) struct Input<'a>(pub(crate) &'a [u8]);

impl Input<'_> {
    pub(crate) fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The free mbufs of a harness pool, first in first out (as a ring pool).
pub(crate) struct Free(pub(crate) VecDeque<*mut c_void>);

/// # Safety (all four)
/// Called by DPDK's mempool functions with a pool of a [`Side`], whose
/// `pool_config` (a plain field in every DPDK release, unlike the union
/// `pool_data` lies in) is its live `Free`.
unsafe extern "C" fn pool_alloc(_mp: *mut rte_mempool) -> c_int {
    0
}

unsafe extern "C" fn pool_enqueue(
    mp: *mut rte_mempool,
    objs: *const *mut c_void,
    n: c_uint,
) -> c_int {
    // SAFETY: see above; `objs` holds `n` pointers (DPDK's contract).
    unsafe {
        let f = &mut *((*mp).pool_config as *mut Free);
        for i in 0..n as usize {
            f.0.push_back(*objs.add(i));
        }
    }
    0
}

unsafe extern "C" fn pool_dequeue(
    mp: *mut rte_mempool,
    objs: *mut *mut c_void,
    n: c_uint,
) -> c_int {
    // SAFETY: see above; `objs` has room for `n` pointers.
    unsafe {
        let f = &mut *((*mp).pool_config as *mut Free);
        if f.0.len() < n as usize {
            return -libc::ENOBUFS;
        }
        for i in 0..n as usize {
            *objs.add(i) = f.0.pop_front().unwrap_or(std::ptr::null_mut());
        }
    }
    0
}

unsafe extern "C" fn pool_count(mp: *const rte_mempool) -> c_uint {
    // SAFETY: see above.
    unsafe { (*((*mp).pool_config as *const Free)).0.len() as c_uint }
}

/// The index of the harness's mempool operations in DPDK's table
/// (registered once per process; needs no EAL).
pub(crate) fn ops_index() -> c_int {
    static INDEX: OnceLock<c_int> = OnceLock::new();
    *INDEX.get_or_init(|| {
        let mut ops = ffi::rte_mempool_ops::default();
        for (d, s) in ops.name.iter_mut().zip(b"net_mana_side_by_side\0") {
            *d = *s as _;
        }
        ops.alloc = Some(pool_alloc);
        ops.enqueue = Some(pool_enqueue);
        ops.dequeue = Some(pool_dequeue);
        ops.get_count = Some(pool_count);
        // SAFETY: a complete ops structure; DPDK copies it.
        let i = unsafe { ffi::rte_mempool_register_ops(&ops) };
        assert!(i >= 0, "rte_mempool_register_ops: {i}");
        i
    })
}

/// The harness's doorbell page (one for the process: the harness runs
/// under [`LOCK`]).
pub(crate) fn db_page() -> *mut u64 {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        let p = Box::leak(vec![0u64; DB_WORDS].into_boxed_slice()).as_mut_ptr();
        doorbell::set_page(PORT, p.cast());
        p as usize
    }) as *mut u64
}

pub(crate) static LOCK: Mutex<()> = Mutex::new(());

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

/// What the input sets up: the same for both queues.
struct Shape {
    nb_desc: u16,
    cq_count: u32,
    buf_len: u32,
    mbufs: usize,
    rq_id: u32,
    strip: bool,
}

/// One receive queue on plain memory, with its pool, mbufs and buffers.
struct Side {
    q: Box<RxQueue>,
    mp: Box<rte_mempool>,
    free: Box<Free>,
    mbufs: Vec<rte_mbuf>,
    bufs: Vec<u8>,
    stride: usize,
    cq: Vec<Line>,
    rq: Vec<Line>,
    _desc: Vec<*mut rte_mbuf>,
    /// What the device last wrote to the CQ (the driver may change only
    /// owner bits).
    cq_written: Vec<Line>,
    /// Packets the application holds, freed after the comparison.
    held: Vec<*mut rte_mbuf>,
}

impl Side {
    fn new(s: &Shape, path: RxPath, frames: &[u8]) -> Side {
        let stride = GUARD + HEADROOM + s.buf_len as usize + GUARD;
        let mut bufs = vec![GUARD_BYTE; stride * s.mbufs];
        for (i, b) in bufs.iter_mut().enumerate() {
            let at = i % stride;
            if (GUARD..stride - GUARD).contains(&at) && !frames.is_empty() {
                *b = frames[i % frames.len()];
            }
        }
        let mut free = Box::new(Free(VecDeque::new()));
        let mut mp = Box::new(rte_mempool::default());
        mp.ops_index = ops_index();
        mp.pool_config = (&mut *free as *mut Free).cast();
        mp.size = s.mbufs as u32;
        let mut mbufs: Vec<rte_mbuf> = (0..s.mbufs).map(|_| rte_mbuf::default()).collect();
        for (i, m) in mbufs.iter_mut().enumerate() {
            let p: *mut rte_mbuf = m;
            // SAFETY: `p` is a live mbuf of the vector; the buffer lies in
            // `bufs`, which outlives it.
            unsafe {
                (*p).buf_addr = bufs.as_mut_ptr().add(i * stride + GUARD).cast();
                ffi::mbuf::set_buf_len(p, (HEADROOM + s.buf_len as usize) as u16);
                (*p).pool = &mut *mp;
                ffi::mbuf::set_rearm(p, ffi::mbuf::rearm_word(HEADROOM as u16, PORT));
            }
            free.0.push_back(p.cast());
        }
        let slots = usize::from(s.nb_desc);
        let mut desc = vec![std::ptr::null_mut(); slots];
        let conf = RxConf {
            port_id: PORT,
            queue_id: 0,
            socket: 0,
            nb_desc: s.nb_desc,
            buf_len: s.buf_len,
            segs: 1,
            mp: &mut *mp,
            conf: ffi::rte_eth_rxconf::default(),
            path,
        };
        let offloads = if s.strip {
            ffi::consts::RX_OFFLOAD_VLAN_STRIP
        } else {
            0
        };
        let q = Box::new(RxQueue {
            gate: super::Gate::new(),
            state: std::cell::UnsafeCell::new(RxState {
                rq: crate::hw::ring::WorkQueue::empty(),
                rq_db: doorbell::Doorbell::default(),
                cq: crate::hw::ring::CompQueue::empty(),
                // SAFETY: `desc` holds `slots` (a power of two) pointers
                // and lives as long as the queue (kept in `Side`).
                posted: unsafe { MbufRing::new(desc.as_mut_ptr(), slots as u32) },
                deficit: 0,
                pending: None,
                mr: crate::dataplane::mr_cache::Cache::new(),
                rearm: ffi::mbuf::rearm_word(HEADROOM as u16, PORT),
                segs: 1,
            }),
            stats: RxStats::default(),
            offloads: std::sync::atomic::AtomicU64::new(offloads),
            conf,
        });
        let mut cq = vec![Line([0; 64]); s.cq_count as usize];
        // The RQ holds twice the WQEs posted (as `Wq::create_rq` sizes it).
        let rq_size = 2 * u32::from(s.nb_desc) * WQE_BU_SIZE as u32;
        let mut rq = vec![Line([0; 64]); rq_size as usize / 64];
        let hw = RxHw {
            rq_buf: rq.as_mut_ptr().cast(),
            rq_size,
            rq_id: s.rq_id,
            cq_buf: cq.as_mut_ptr().cast(),
            cq_count: s.cq_count,
            cq_id: 1,
        };
        let side = Side {
            q,
            mp,
            free,
            mbufs,
            bufs,
            stride,
            cq_written: cq.clone(),
            cq,
            rq,
            _desc: desc,
            held: Vec::new(),
        };
        {
            // SAFETY: the gate starts closed: nothing else reaches the state.
            let st = unsafe { &mut *side.q.state.get() };
            st.mr.insert(Region {
                start: 0,
                end: usize::MAX,
                lkey: 0x5eed,
            });
            // SAFETY: the rings live in `side` as long as the queue.
            let r = unsafe { side.q.attach(st, &hw) };
            side.q.gate.open();
            if r.is_err() {
                // Not enough mbufs for a full ring: the queue is not started.
                side.q.gate.close(|| {});
            }
        }
        side
    }

    fn index(&self, m: *mut rte_mbuf) -> usize {
        let base = self.mbufs.as_ptr() as usize;
        let i = (m as usize).wrapping_sub(base) / size_of::<rte_mbuf>();
        assert!(
            i < self.mbufs.len() && m as usize == base + i * size_of::<rte_mbuf>(),
            "a pointer that is no mbuf of the pool: {m:?}"
        );
        i
    }

    /// The buffer address a posted WQE at byte `offset` of the RQ names,
    /// as an offset into `bufs` (None if none of ours: never posted).
    fn wqe_buffer(&self, offset: u32) -> Option<usize> {
        let size = self.rq.len() * 64;
        let at = (offset as usize % size) & !(WQE_BU_SIZE - 1);
        let bytes = self.rq_bytes();
        let addr = u64::from_le_bytes(bytes[at + 16..at + 24].try_into().ok()?) as usize;
        let rel = addr.checked_sub(self.bufs.as_ptr() as usize)?;
        (rel < self.bufs.len()).then_some(rel)
    }

    fn rq_bytes(&self) -> &[u8] {
        // SAFETY: plain bytes of the vector.
        unsafe { std::slice::from_raw_parts(self.rq.as_ptr().cast(), self.rq.len() * 64) }
    }

    /// The RQ with each WQE's buffer address made relative to `bufs`.
    fn rq_relative(&self) -> Vec<u8> {
        let mut b = self.rq_bytes().to_vec();
        let base = self.bufs.as_ptr() as u64;
        for w in b.chunks_exact_mut(WQE_BU_SIZE) {
            let a = u64::from_le_bytes(w[16..24].try_into().unwrap());
            if a != 0 {
                w[16..24].copy_from_slice(&a.wrapping_sub(base).to_le_bytes());
            }
        }
        b
    }

    /// Every mbuf's bytes, its buffer address and pool taken out.
    fn mbuf_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.mbufs.len() * size_of::<rte_mbuf>());
        let skip = [
            offset_of!(rte_mbuf, buf_addr)..offset_of!(rte_mbuf, buf_addr) + 8,
            offset_of!(rte_mbuf, pool)..offset_of!(rte_mbuf, pool) + 8,
        ];
        for m in &self.mbufs {
            // SAFETY: plain bytes of a live mbuf.
            let b = unsafe {
                std::slice::from_raw_parts(
                    (m as *const rte_mbuf).cast::<u8>(),
                    size_of::<rte_mbuf>(),
                )
            };
            out.extend(
                b.iter()
                    .enumerate()
                    .filter(|(i, _)| !skip.iter().any(|r| r.contains(i)))
                    .map(|(_, v)| *v),
            );
            assert!(
                std::ptr::eq(m.pool.cast_const(), &*self.mp),
                "an mbuf changed pools"
            );
        }
        out
    }

    fn counters(&self) -> [u64; 14] {
        let s = &self.q.stats;
        [
            &s.packets,
            &s.bytes,
            &s.errors,
            &s.nombuf,
            &s.truncated,
            &s.cqe_unexpected,
            &s.cq_overflow,
            &s.cqe_stale,
            &s.cqe_wrong_queue,
            &s.cqe_bad_wqe,
            &s.bad_length,
            &s.missed,
            &s.vlan_reinsert_failed,
            &s.lost_to_reset,
        ]
        .map(|c| c.get())
    }

    /// Counters, ring positions, posted buffers (as indices), the pending
    /// rest of a coalesced completion (as a slot), the free list.
    fn state(&self) -> String {
        // SAFETY: no burst runs (the harness is single-threaded).
        let st = unsafe { &*self.q.state.get() };
        let counters = self.counters();
        let posted: Vec<usize> = (0..st.posted.len())
            .map(|i| self.index(st.posted.at(st.posted.tail.wrapping_add(i))))
            .collect();
        let pending = st
            .pending
            .map(|(c, k)| ((c as usize - self.cq.as_ptr() as usize) / CQE_SIZE, k));
        let free: Vec<usize> = self.free.0.iter().map(|m| self.index(m.cast())).collect();
        format!(
            "counters {counters:?}\nrq head {} tail {} doorbell tail {}\ncq head {}\n\
             posted {:?} (head {} tail {})\ndeficit {} pending {pending:?}\nfree {free:?}",
            st.rq.head,
            st.rq.tail,
            st.rq.doorbell_tail(),
            st.cq.head(),
            posted,
            st.posted.head,
            st.posted.tail,
            st.deficit,
        )
    }
}

/// The device of both queues: where it writes the next completion and
/// which WQE it expects to fill next.
struct Device {
    prod: u32,
    wqe: u32,
}

/// One completion written by the device to both queues' CQ, and the frame
/// head it wrote into the buffer the completion names.
/// `clean`: one the vector step takes (an `RX_OKAY` for the next WQE,
/// no tag or outer-checksum verdict, a length that fits, an IP frame).
fn complete(inp: &mut Input<'_>, d: &mut Device, s: &Shape, sides: &mut [Side; 2], clean: bool) {
    let mode = if clean { 0 } else { inp.u8() };
    let mut data = [0u8; gdma::CQE_DATA_SIZE];
    let rq_bytes = 2 * u32::from(s.nb_desc) * WQE_BU_SIZE as u32;
    let mut owner = owner_bits(d.prod, s.cq_count);
    let mut wq = s.rq_id & 0xff_ffff;
    let mut is_sq = false;
    let offset;
    if mode & 7 == 7 {
        // Any bytes at all, any info dword.
        for b in data.iter_mut() {
            *b = inp.u8();
        }
        let info = CqeInfo::from_raw(inp.u32());
        owner = info.owner_bits();
        wq = info.wq_num();
        is_sq = info.is_sq();
        offset = u32::from_le_bytes(data[56..60].try_into().unwrap());
    } else {
        // A completion of the kind the device writes, then perhaps wrong
        // in one or more ways.
        let ty = match mode >> 3 & 7 {
            0..=3 => 1,           // RX_OKAY
            4 => 2,               // RX_COALESCED_4
            5 => 4,               // RX_TRUNCATED
            6 => 3,               // RX_OBJECT_FENCE
            _ => inp.u8() & 0x3f, // anything
        };
        data[0] = ty;
        let mut flags = inp.u32();
        if clean {
            flags &= !RxCompFlags::new()
                .with_rx_vlantag_present(true)
                .with_rx_outer_iphdr_csum_fail(true)
                .to_raw();
        }
        data[4..8].copy_from_slice(&flags.to_le_bytes());
        let pkts = if ty == 2 {
            1 + usize::from(inp.u8() % 4)
        } else {
            1
        };
        for k in 0..pkts {
            let len = match inp.u8() % 8 {
                6 if !clean => inp.u16(),
                7 if !clean => u16::from(inp.u8() % 16),
                // The edges of what either path takes.
                5 => {
                    let b = s.buf_len as u16;
                    [0, 1, 12, 13, 14, 15, b - 1, b, b + 1, 0xffff][usize::from(inp.u8() % 10)]
                }
                _ => 14 + u16::from(inp.u8()) * 4 % (s.buf_len as u16 - 13),
            };
            let at = 8 + 12 * k;
            data[at..at + 2].copy_from_slice(&len.to_le_bytes());
            data[at + 8..at + 12].copy_from_slice(&inp.u32().to_le_bytes());
        }
        let mut off = d.wqe;
        if mode & 0x40 != 0 {
            let wrong = inp.u8();
            match wrong % 8 {
                0 => owner = owner.wrapping_add(1 + wrong / 8 % 7) & 7,
                1 => wq ^= 1 << (wrong / 8 % 24),
                2 => is_sq = true,
                3 => off = off.wrapping_add(WQE_BU_SIZE as u32 * u32::from(wrong / 8)),
                4 => off = off.wrapping_sub(WQE_BU_SIZE as u32 * u32::from(1 + wrong / 8)),
                5 => off = off.wrapping_add(u32::from(wrong / 8) + 1),
                6 => data[10] = wrong,
                _ => data[usize::from(wrong / 8) % 56] ^= 1 << (wrong % 8),
            }
        }
        offset = off % rq_bytes;
        data[56..60].copy_from_slice(&offset.to_le_bytes());
        let used = if ty == 2 { pkts as u32 } else { 1 };
        d.wqe = offset.wrapping_add(used * WQE_BU_SIZE as u32) % rq_bytes;
    }
    let info = CqeInfo::new()
        .with_wq_num(wq & 0xff_ffff)
        .with_is_sq(is_sq)
        .with_owner_bits(owner & 7);
    let cqe = gdma::Cqe::from_parts(&data, info);
    // The frame head the device wrote: EtherType (maybe behind a tag),
    // the rest from the input.
    let mut head = [0u8; 64];
    for b in head.iter_mut() {
        *b = inp.u8();
    }
    let et = |c: u8, raw: u16| match c % 6 {
        0 => 0x0800u16,
        1 => 0x86dd,
        2 => 0x8100,
        3 => 0x88a8,
        4 => 0x0806,
        _ => raw,
    };
    let c = inp.u8();
    let (outer, inner) = (
        et(
            if clean { c % 2 } else { c },
            u16::from_be_bytes([head[12], head[13]]),
        ),
        et(c / 6, u16::from_be_bytes([head[16], head[17]])),
    );
    head[12..14].copy_from_slice(&outer.to_be_bytes());
    head[16..18].copy_from_slice(&inner.to_be_bytes());
    if mode & 0x87 == 0x86 {
        // A completion lost: its slot stays as it was (stale), its WQE
        // used without one (missed).
        d.prod = d.prod.wrapping_add(1);
    }
    let slot = (d.prod % s.cq_count) as usize;
    for side in sides.iter_mut() {
        if let Some(rel) = side.wqe_buffer(offset) {
            let at = rel;
            let n = head.len().min(side.stride - GUARD - (at % side.stride));
            side.bufs[at..at + n].copy_from_slice(&head[..n]);
        }
        const _: () = assert!(size_of::<gdma::Cqe>() == 64);
        // SAFETY: `Cqe` is 64 bytes of plain integers (the wire format),
        // no padding: any of its values is 64 initialised bytes.
        let bytes: [u8; 64] = unsafe { std::mem::transmute_copy(&cqe) };
        side.cq[slot] = Line(bytes);
        side.cq_written[slot] = Line(bytes);
    }
    d.prod = d.prod.wrapping_add(1);
}

fn compare(sides: &[Side; 2], what: &str) {
    let [a, b] = sides;
    assert_eq!(a.state(), b.state(), "{what}: queue state (vector, scalar)");
    assert!(a.mbuf_bytes() == b.mbuf_bytes(), "{what}: mbufs differ");
    assert!(a.bufs == b.bufs, "{what}: buffers differ");
    assert!(a.rq_relative() == b.rq_relative(), "{what}: RQ differs");
    let cq = |v: &[Line]| v.iter().flat_map(|l| l.0).collect::<Vec<u8>>();
    assert!(cq(&a.cq) == cq(&b.cq), "{what}: CQ differs");
    for s in sides {
        // The driver writes the CQ only to scrub a skipped slot's owner
        // bits (`CompQueue::scrub`).
        let owner = CqeInfo::new().with_owner_bits(7).to_raw().to_le_bytes();
        let (now, was) = (cq(&s.cq), cq(&s.cq_written));
        if let Some(at) = (0..now.len()).find(|&i| {
            let keep = if i % 64 >= 60 {
                !owner[i % 64 - 60]
            } else {
                0xff
            };
            (now[i] ^ was[i]) & keep != 0
        }) {
            panic!(
                "{what}: the CQ was written at byte {at}: {:02x?}, the device wrote {:02x?}",
                &now[at & !63..(at & !63) + 64],
                &was[at & !63..(at & !63) + 64]
            );
        }
        for (i, c) in s.bufs.chunks_exact(s.stride).enumerate() {
            let guards = c[..GUARD].iter().chain(&c[s.stride - GUARD..]);
            assert!(
                guards.into_iter().all(|b| *b == GUARD_BYTE),
                "{what}: a write outside buffer {i}"
            );
        }
    }
}

/// Slots the vector step took, over the process (tests only: that the
/// inputs reach it).
#[cfg(test)]
pub static VECTOR_TAKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs the input through both paths and panics where they differ (see
/// the module). Without AVX2 only the scalar path runs, against itself.
/// Returns the queues' counters (`RxStats` in order) at the end.
pub fn check(data: &[u8]) -> [u64; 14] {
    let _one = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let page = db_page();
    let mut inp = Input(data);
    let b = inp.u8();
    let nb_desc = 128u16 >> (b % 6);
    let shape = Shape {
        nb_desc,
        cq_count: u32::from(nb_desc) << (b / 6 % 2),
        buf_len: 64 + u32::from(inp.u8()) * 4,
        mbufs: usize::from(nb_desc) + usize::from(inp.u16() % (2 * nb_desc + 1)),
        rq_id: inp.u32() & 0xff_ffff,
        strip: b & 0x80 != 0,
    };
    let frames: Vec<u8> = (0..64).map(|_| inp.u8()).collect();
    let vector = if RxPath::vector_available() {
        RxPath::VectorAvx2
    } else {
        RxPath::Scalar
    };
    let mut sides = [
        Side::new(&shape, vector, &frames),
        Side::new(&shape, RxPath::Scalar, &frames),
    ];
    compare(&sides, "after setup");
    let mut dev = Device {
        prod: gdma::cq_initial_index(shape.cq_count),
        wqe: 0,
    };
    let mut round = 0;
    while !inp.is_empty() && round < 64 {
        // Perhaps a run of clean completions (the vector step's case),
        // then up to two laps of the CQ of any kind (overflow included).
        let r = inp.u8();
        let clean = if r & 1 == 0 {
            16 - u32::from(r >> 1) % 17
        } else {
            0
        };
        for _ in 0..clean.min(shape.cq_count) {
            complete(&mut inp, &mut dev, &shape, &mut sides, true);
        }
        let n = match inp.u8() {
            b if b & 0x80 != 0 => u32::from(b & 0x7f) % ((2 * shape.cq_count).min(127) + 1),
            b => u32::from(b) % 5,
        };
        for _ in 0..n {
            complete(&mut inp, &mut dev, &shape, &mut sides, false);
        }
        let want = 64 - usize::from(inp.u8() % 64);
        let p = inp.u8();
        let keep = p % 4 == 3;
        // Sometimes enough polls for the stale-slot search to come due.
        let polls = if p & 0x70 == 0x70 {
            crate::hw::ring::STALE_SCAN_EVERY + 2
        } else {
            1
        };
        let mut got = [0usize; 2];
        let mut dbs = [0u64; 2];
        for (i, _) in (0..2).flat_map(|i| (0..polls).map(move |p| (i, p))) {
            let side = &mut sides[i];
            // Room for `want`, then guards: the burst may use all of its
            // room (DPDK's contract), nothing past it.
            let guard = std::ptr::dangling_mut::<rte_mbuf>();
            let mut pkts = vec![guard; want + 8];
            pkts[..want].fill(std::ptr::null_mut());
            // SAFETY: the page is the harness's, serialised by `LOCK`.
            unsafe { page.write_bytes(0, DB_WORDS) };
            let q: *const RxQueue = &*side.q;
            // SAFETY: one of our queues, and room for `want` mbufs.
            let g = unsafe { rx_burst(q as *mut c_void, pkts.as_mut_ptr(), want as u16) };
            got[i] += usize::from(g);
            // SAFETY: as above; the RQ doorbell is the only one rung.
            dbs[i] |= (0..DB_WORDS).fold(0, |acc, w| acc | unsafe { *page.add(w) });
            let g = usize::from(g);
            side.held.extend_from_slice(&pkts[..g]);
            assert!(
                pkts[want..].iter().all(|p| *p == guard),
                "written past the room"
            );
        }
        let what = format!("round {round}");
        assert_eq!(got[0], got[1], "{what}: packets (vector, scalar)");
        assert_eq!(dbs[0], dbs[1], "{what}: doorbell (vector, scalar)");
        let held = |s: &Side| s.held.iter().map(|m| s.index(*m)).collect::<Vec<_>>();
        assert_eq!(held(&sides[0]), held(&sides[1]), "{what}: delivered");
        compare(&sides, &what);
        if !keep {
            for side in sides.iter_mut() {
                for m in side.held.drain(..) {
                    // SAFETY: a delivered mbuf, ours to free.
                    unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
                }
            }
        }
        round += 1;
    }
    for side in sides.iter_mut() {
        for m in side.held.drain(..) {
            // SAFETY: as above.
            unsafe { ffi::rte_pktmbuf_free_bulk(&mut { m }, 1) };
        }
        side.q.gate.close(|| {});
        // SAFETY: the gate is closed (no burst inside, none can enter):
        // the state is ours; the rings are still alive.
        let st = unsafe { &mut *side.q.state.get() };
        side.q.detach(st);
    }
    compare(&sides, "after detach");
    for s in &sides {
        assert_eq!(s.free.0.len(), s.mbufs.len(), "mbufs lost");
    }
    sides[1].counters()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64: generated inputs that reproduce.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    /// The fuzz target's committed seeds (`fuzz/seeds/rx_paths`), then
    /// generated inputs: the paths agree on every one.
    #[test]
    fn the_vector_and_scalar_paths_agree_on_the_seeds_and_generated_inputs() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/rx_paths");
        let mut seeds: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        seeds.sort();
        assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
        for p in &seeds {
            let data = std::fs::read(p).unwrap();
            let r = std::panic::catch_unwind(|| check(&data));
            assert!(r.is_ok(), "seed {} fails", p.display());
        }
        let mut rng = Rng(0x005e_ed0f_0a75);
        let mut seen = [0u64; 14];
        for i in 0..400 {
            let len = 64 + (rng.next() % 3000) as usize;
            // Half of them mostly zeros: the input's neutral choices, runs
            // of clean completions and full bursts.
            let sparse = i % 2 == 0;
            let data: Vec<u8> = (0..len)
                .map(|_| match rng.next() {
                    r if sparse && r % 4 != 0 => 0,
                    r => (r >> 8) as u8,
                })
                .collect();
            let r = std::panic::catch_unwind(|| check(&data));
            let c = r.unwrap_or_else(|_| panic!("generated input {i} fails: {data:02x?}"));
            for (s, c) in seen.iter_mut().zip(c) {
                *s += c;
            }
        }
        // The inputs reach every check of both paths: each counter but
        // `lost_to_reset` (no reset here) moved, and the vector step took
        // groups.
        eprintln!("counters (RxStats order) over the generated inputs: {seen:?}");
        for (i, n) in seen.iter().enumerate().take(13) {
            assert!(*n > 0, "counter {i} of RxStats never moved");
        }
        let taken = VECTOR_TAKEN.load(std::sync::atomic::Ordering::Relaxed);
        eprintln!("slots the vector step took: {taken}");
        if RxPath::vector_available() {
            assert!(taken > 3000, "the vector step took only {taken} slots");
        }
    }
}
