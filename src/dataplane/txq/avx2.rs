//! The plain send run's vector step (x86-64 AVX2): four packets at a time.
//!
//! A group is taken only if all four are plain: one segment, none of the
//! flags the scalar run rejects (TSO, checksum offload, VLAN insertion),
//! and the data (`buf_addr + data_off`, `data_len` bytes) inside the
//! memory region the burst is in, by the same arithmetic as
//! `Bounds::covers`. Anything else ends the step where that group starts,
//! and the scalar run (`Fast::run_fixed`) takes the next packets one by one
//! with every check it has; so bad input meets the same code whichever
//! path runs, and the in-flight ring, the counters and the SQ end up the
//! same (the `tx_paths` side-by-side check).
//!
//! The four mbufs' fields come in with four gathers (`buf_addr`, the rearm
//! word with `data_off` and `nb_segs`, `ol_flags`, and the word with
//! `pkt_len` and `data_len`: the offsets [`layout_fits`] checks); each WQE
//! (header, short OOB, SGE: one basic unit) is one 32-byte store, and the
//! four mbuf pointers join the in-flight ring with one more.

use super::{bits, Fast};
use crate::ffi::{mbuf, rte_mbuf};
use core::arch::x86_64::*;
use gdma::WQE_BU_SIZE;
use std::ptr;

/// Packets per step.
pub const GROUP: usize = 4;

/// Where the step reads an mbuf: `buf_addr`, the rearm word (`data_off`
/// in bits 0-15, `nb_segs` in 32-47), `ol_flags`, and the word holding
/// `pkt_len` (bits 0-31) and `data_len` (32-47).
const BUF_ADDR_AT: usize = 0;
const REARM_AT: usize = 16;
const OL_FLAGS_AT: usize = 24;
const LENS_AT: usize = 36;

/// Whether the mbuf layout is the one the step reads (DPDK's, on every
/// release the driver builds against; checked once at queue setup).
pub fn layout_fits() -> bool {
    let mut m = rte_mbuf::default();
    let p: *mut rte_mbuf = &mut m;
    let at = |f: usize| f.wrapping_sub(p as usize);
    // SAFETY: `p` is a live mbuf on the stack; only addresses are taken.
    let (off, segs, pl, dl) = unsafe {
        (
            at(mbuf::data_off_ptr(p) as usize),
            at(mbuf::nb_segs_ptr(p) as usize),
            at(mbuf::pkt_len_ptr(p) as usize),
            at(mbuf::data_len_ptr(p) as usize),
        )
    };
    std::mem::offset_of!(rte_mbuf, buf_addr) == BUF_ADDR_AT
        && std::mem::offset_of!(rte_mbuf, ol_flags) == OL_FLAGS_AT
        && (off, segs) == (REARM_AT, REARM_AT + 4)
        && (pl, dl) == (LENS_AT, LENS_AT + 4)
}

/// One stretch of the plain run the step may fill: packets, as many
/// contiguous WQE units and in-flight slots.
pub struct Run {
    pub pkts: *const *mut rte_mbuf,
    /// Packets, units and slots available (the step takes whole groups).
    pub n: usize,
    /// The SQ at the head: room for `n` one-unit WQEs before its end.
    pub wqes: *mut u8,
    /// The in-flight ring's vacant slots from its head, `n` of them.
    pub slots: *mut *mut rte_mbuf,
    pub header: u64,
    pub oob: u64,
    /// The region (`Bounds::parts`) and its key.
    pub start: usize,
    pub size: usize,
    pub lkey: u32,
    /// Flags that send a packet to the scalar run.
    pub reject: u64,
}

/// Takes groups of four plain packets from the start of the run (see the
/// module): writes their WQEs and ring slots. Returns how many packets it
/// took (a multiple of four; it stops at a group that is not plain) and
/// the sum of their `pkt_len`.
///
/// # Safety
/// The CPU has AVX2 and [`layout_fits`]. `run.pkts` points to `run.n`
/// valid mbufs; `run.wqes` to `32 * run.n` writable bytes of the SQ;
/// `run.slots` to `run.n` writable in-flight slots.
#[target_feature(enable = "avx2")]
#[inline(never)]
pub unsafe fn groups(run: &Run) -> (usize, u64) {
    let sign = _mm256_set1_epi64x(i64::MIN);
    let start = _mm256_set1_epi64x(run.start as i64);
    let size = _mm256_set1_epi64x(run.size as i64);
    let size_s = _mm256_xor_si256(size, sign);
    let reject = _mm256_set1_epi64x(run.reject as i64);
    let segs_mask = _mm256_set1_epi64x(0xffff << 32);
    let one_seg = _mm256_set1_epi64x(1 << 32);
    let low16 = _mm256_set1_epi64x(0xffff);
    let low32 = _mm256_set1_epi64x(0xffff_ffff);
    let data_len = _mm256_set1_epi64x(0xffff << 32);
    let lkey = _mm256_set1_epi64x(i64::from(run.lkey));
    let zero = _mm256_setzero_si256();
    let ones = _mm256_set1_epi64x(-1);
    let head = _mm256_setr_epi64x(run.header as i64, run.oob as i64, 0, 0);
    let mut bytes = _mm256_setzero_si256();
    let mut k = 0;
    while k + GROUP <= run.n {
        // SAFETY: `k + 4 <= n`: the four packets, WQE units and slots lie
        // within what the caller gave; the gathers read fields of valid
        // mbufs (the base pointers add only the fields' offsets, which
        // `layout_fits` checked, to the mbufs' addresses in the index).
        unsafe {
            let ms = _mm256_loadu_si256(run.pkts.add(k) as *const __m256i);
            let field =
                |at: usize| _mm256_i64gather_epi64::<1>(ptr::without_provenance::<i64>(at), ms);
            let (buf, rearm, ol, lens) = (
                field(BUF_ADDR_AT),
                field(REARM_AT),
                field(OL_FLAGS_AT),
                field(LENS_AT),
            );
            let addr = _mm256_add_epi64(buf, _mm256_and_si256(rearm, low16));
            let len = _mm256_srli_epi64::<32>(_mm256_and_si256(lens, data_len));
            // `Bounds::covers`: off = addr - start; off <= size and
            // len <= size - off, unsigned (sign-flipped for the signed
            // compares).
            let off = _mm256_sub_epi64(addr, start);
            let off_bad = _mm256_cmpgt_epi64(_mm256_xor_si256(off, sign), size_s);
            let room = _mm256_xor_si256(_mm256_sub_epi64(size, off), sign);
            let len_bad = _mm256_cmpgt_epi64(_mm256_xor_si256(len, sign), room);
            let plain = _mm256_and_si256(
                _mm256_cmpeq_epi64(_mm256_and_si256(rearm, segs_mask), one_seg),
                _mm256_cmpeq_epi64(_mm256_and_si256(ol, reject), zero),
            );
            let ok = _mm256_andnot_si256(_mm256_or_si256(off_bad, len_bad), plain);
            if _mm256_testc_si256(ok, ones) == 0 {
                break;
            }
            // The SGE's second word: key, then data length.
            let w3 = _mm256_or_si256(_mm256_and_si256(lens, data_len), lkey);
            // Per packet (lanes 0, 2 in `lo`, 1, 3 in `hi`): address, w3.
            let lo = _mm256_unpacklo_epi64(addr, w3);
            let hi = _mm256_unpackhi_epi64(addr, w3);
            let w = run.wqes.add(k * WQE_BU_SIZE) as *mut __m256i;
            _mm256_storeu_si256(w, _mm256_permute2x128_si256::<0x20>(head, lo));
            _mm256_storeu_si256(w.add(1), _mm256_permute2x128_si256::<0x20>(head, hi));
            _mm256_storeu_si256(w.add(2), _mm256_permute2x128_si256::<0x30>(head, lo));
            _mm256_storeu_si256(w.add(3), _mm256_permute2x128_si256::<0x30>(head, hi));
            _mm256_storeu_si256(run.slots.add(k) as *mut __m256i, ms);
            bytes = _mm256_add_epi64(bytes, _mm256_and_si256(lens, low32));
        }
        k += GROUP;
    }
    let b = _mm_add_epi64(
        _mm256_castsi256_si128(bytes),
        _mm256_extracti128_si256::<1>(bytes),
    );
    let b = _mm_add_epi64(b, _mm_unpackhi_epi64(b, b));
    (k, _mm_cvtsi128_si64(b) as u64)
}

impl Fast<'_> {
    /// The plain run of one-unit WQEs on the vector path: groups of four
    /// through [`groups`] over the contiguous stretch of the SQ and the
    /// in-flight ring, then the next packets (at most a group: the one the
    /// step refused, or those left before a wrap or the end) through the
    /// scalar run; again until the scalar run stops short. Returns how
    /// many packets were posted, as `run_fixed::<1>` would have.
    #[inline(always)]
    pub(super) fn run_vector(&mut self, pkts: &[*mut rte_mbuf], reject: u64) -> usize {
        let header = bits::HDR_PLAIN;
        let mut done = 0;
        loop {
            let rest = &pkts[done..];
            let max = (rest.len() as u32)
                .min(self.wq.free_bu())
                .min(self.wq.contiguous_bu());
            let slots = self.ring.vacant_run(max);
            let n = slots.len() & !(GROUP - 1);
            if n > 0 {
                let (start, size) = self.region.parts();
                let run = Run {
                    pkts: rest.as_ptr(),
                    n,
                    wqes: self.wq.head_ptr(),
                    slots: slots.as_mut_ptr().cast(),
                    header,
                    oob: self.template,
                    start,
                    size,
                    lkey: self.region.lkey,
                    reject,
                };
                // SAFETY: the queue's path is `VectorAvx2` only where the
                // CPU has AVX2 and the layout fits (`TxPath::choose`);
                // `n` packets of `pkts`, `n` vacant slots from the ring's
                // head and `n` units before the SQ's end and within its
                // free units (`max`).
                let (k, b) = unsafe { groups(&run) };
                if k > 0 {
                    self.wq.advance(k as u32);
                    self.ring.commit(k as u32);
                    self.bytes += b;
                    self.last_oob = self.wq.last_oob(1);
                    done += k;
                }
            }
            let next = &pkts[done..pkts.len().min(done + GROUP)];
            if next.is_empty() {
                break;
            }
            let s =
                self.run_fixed::<1>(next, header, [self.template, 0, 0], 0, reject, |_, _| true);
            done += s;
            if s < next.len() {
                break;
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Memo, TxPath};
    use super::*;
    use crate::dataplane::mbuf_ring::MbufRing;
    use crate::dataplane::mr_cache::Region;
    use crate::ffi;
    use crate::hw::ring::WorkQueue;

    use crate::dataplane::test_rng::Rng;

    const MBUFS: usize = 48;
    const SLOTS: u32 = 64;
    const SQ_BYTES: usize = 32 * 64;

    #[repr(C, align(64))]
    struct Sq([u8; SQ_BYTES]);

    /// What one side ended with: posted, the SQ's bytes and head, the
    /// in-flight slots and head, bytes counted, the last OOB's offset.
    type Outcome = (usize, Vec<u8>, u32, Vec<usize>, u32, u64, Option<usize>);

    struct Case {
        sq_bu: u32,
        sq_head: u32,
        sq_used: u32,
        ring_head: u32,
        ring_used: u32,
        region: Region,
        template: u64,
        long_template: u64,
        n: usize,
    }

    fn run_side(c: &Case, mbufs: &mut [rte_mbuf], vector: bool) -> Outcome {
        let mut sq = Box::new(Sq([0xee; SQ_BYTES]));
        let mut slots = vec![ptr::null_mut::<rte_mbuf>(); SLOTS as usize];
        let base = sq.0.as_mut_ptr();
        // SAFETY: the buffer holds `sq_bu * 32` bytes (at most SQ_BYTES),
        // alive until the end of the function; the slots likewise.
        let (mut wq, mut ring) = unsafe {
            (
                WorkQueue::new(base, c.sq_bu * 32, 7),
                MbufRing::new(slots.as_mut_ptr(), SLOTS),
            )
        };
        wq.head = c.sq_head;
        wq.tail = c.sq_head.wrapping_sub(c.sq_used);
        ring.head = c.ring_head;
        ring.tail = c.ring_head.wrapping_sub(c.ring_used);
        let pkts: Vec<*mut rte_mbuf> = mbufs.iter_mut().take(c.n).map(|m| m as *mut _).collect();
        let (k, bytes, last, ring) = {
            let mut f = Fast {
                template: c.template,
                long_template: c.long_template,
                region: c.region.bounds(),
                wq: wq.writer(),
                ring,
                last_oob: ptr::null_mut(),
                bytes: 0,
                memo: Memo::NONE,
                vector,
            };
            let k = f.run(&pkts);
            let last = (!f.last_oob.is_null()).then(|| f.last_oob as usize - base as usize);
            (k, f.bytes, last, f.ring)
        };
        let at = |m: *mut rte_mbuf| {
            mbufs
                .iter()
                .position(|x| ptr::eq(x, m))
                .unwrap_or(usize::MAX)
        };
        (
            k,
            sq.0.to_vec(),
            wq.head,
            slots.iter().map(|&m| at(m)).collect(),
            ring.head,
            bytes,
            last,
        )
    }

    /// Random bursts, mostly plain, over every position of the SQ and the
    /// in-flight ring (wraps, little room): the plain run on the vector
    /// path posts exactly what the scalar run posts, byte for byte: the
    /// WQEs, the ring's slots and positions, the bytes counted and the
    /// OOB the burst patches last.
    #[test]
    fn the_vector_run_posts_what_the_scalar_run_posts() {
        if !TxPath::vector_available() {
            eprintln!("no AVX2 on this CPU: the vector step is not tested here");
            return;
        }
        let mut r = Rng(0x2545_f491_4f6c_dd1d);
        let mut mbufs: Vec<rte_mbuf> = (0..MBUFS).map(|_| rte_mbuf::default()).collect();
        let (mut vector_took, mut stopped_short) = (0, 0);
        for round in 0..20_000 {
            let sq_bu = [4u32, 16, 64, 64][r.below(4) as usize];
            // Mostly room, sometimes little.
            let room = |r: &mut Rng, n: u32| match r.below(4) {
                0 => r.below(u64::from(n) + 1) as u32,
                _ => r.below(4) as u32,
            };
            let ring_used = room(&mut r, SLOTS);
            let region = match r.below(8) {
                0 => Region::NONE,
                1 => Region {
                    start: usize::MAX - 0xfff,
                    end: usize::MAX,
                    lkey: r.next() as u32,
                },
                _ => {
                    let start = 0x1000 * (1 + r.below(1 << 20)) as usize;
                    Region {
                        start,
                        end: start + 0x800 + r.below(0x10000) as usize,
                        lkey: r.next() as u32,
                    }
                }
            };
            let bad = [8, 60, 600][round % 3];
            for m in mbufs.iter_mut() {
                let p: *mut rte_mbuf = m;
                let (start, size) = region.bounds().parts();
                // Mostly inside the region, sometimes at or across its
                // edges, sometimes anywhere.
                let addr = match r.below(bad) {
                    0 => r.next() as usize,
                    1 => start.wrapping_add(size).wrapping_sub(r.below(300) as usize),
                    2 => start.wrapping_sub(r.below(300) as usize),
                    _ => start.wrapping_add(r.below(size.max(1) as u64) as usize / 2),
                };
                let data_off = r.below(256) as u16;
                let data_len = match r.below(bad) {
                    0 => r.next() as u16,
                    _ => 60 + r.below(1500) as u16,
                };
                let pkt_len = match r.below(bad) {
                    0 => r.next() as u32,
                    _ => u32::from(data_len),
                };
                let nb_segs = if r.below(bad) == 0 {
                    r.below(4) as u16
                } else {
                    1
                };
                let ol = match r.below(bad) {
                    0 => 1 << r.below(64),
                    1 => ffi::RTE_MBUF_F_TX_IEEE1588_TMST,
                    _ => 0,
                };
                // SAFETY: a live mbuf of the test; nothing reads its data.
                unsafe {
                    (*p).buf_addr = addr.wrapping_sub(usize::from(data_off)) as *mut _;
                    (*p).ol_flags = ol;
                    mbuf::set_data_off(p, data_off);
                    mbuf::set_refcnt(p, r.next() as u16);
                    mbuf::set_nb_segs(p, nb_segs);
                    mbuf::set_port(p, r.next() as u16);
                    mbuf::set_data_len(p, data_len);
                    mbuf::set_pkt_len(p, pkt_len);
                    mbuf::set_vlan_tci(p, r.next() as u16);
                    mbuf::set_packet_type(p, r.next() as u32);
                }
            }
            let c = Case {
                sq_bu,
                sq_head: r.next() as u32,
                sq_used: room(&mut r, sq_bu).min(sq_bu),
                ring_head: r.next() as u32,
                ring_used,
                region,
                template: (r.next() & 0xffff_ff7f_ffff_ffff) | bits::SUPPRESS,
                long_template: if r.below(8) == 0 { r.next() | 1 } else { 0 },
                n: (SLOTS - ring_used).min(MBUFS as u32 - r.below(8) as u32) as usize,
            };
            let scalar = run_side(&c, &mut mbufs, false);
            let vector = run_side(&c, &mut mbufs, true);
            assert_eq!(scalar.0, vector.0, "round {round}: posted");
            assert!(scalar == vector, "round {round}: the paths differ");
            vector_took += scalar.0;
            stopped_short += usize::from(scalar.0 < c.n);
        }
        eprintln!("{vector_took} posted, {stopped_short} runs stopped short");
        assert!(
            vector_took > 150_000 && stopped_short > 2_000,
            "too few plain runs or too few stops: {vector_took} posted, {stopped_short} stopped"
        );
    }

    #[test]
    fn the_mbuf_layout_is_the_one_the_vector_step_reads() {
        assert!(layout_fits());
    }
}
