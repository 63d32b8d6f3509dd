//! The one-buffer receive loop's vector step (x86-64 AVX2): four
//! single-packet completions at a time.
//!
//! A group is taken only if all four are clean: ready for this queue in
//! this lap and naming the next four WQEs (one compare of the info and
//! WQE-offset dwords), `RX_OKAY` without a VLAN tag or outer-checksum
//! verdict, 14 to `buf_len` bytes long, and, without a hash type, an IPv4
//! or IPv6 frame. Anything else ends the step where that group starts, and
//! the scalar loop (`Burst::run`) takes the next completions one by one
//! with every check, counter and resync it has; so a lying device meets
//! the same code whichever path runs.
//!
//! The flags go through the scalar path's folded table with one gather
//! (`rx_flags::folded`); a frame without a hash type is looked up with the
//! hash-type bit its EtherType stands for. Each mbuf gets its packet type,
//! lengths, VLAN TCI and RSS hash in one 16-byte store (the layout
//! [`layout_fits`] checks) and its `ol_flags` in one 8-byte store.

use crate::dataplane::rx_flags::folded;
use crate::ffi::{self, mbuf, rte_mbuf};
use core::arch::x86_64::*;
use gdma::{Cqe, CqeHeader, CqeType, CQE_SIZE, WQE_BU_SIZE};
use std::ptr;
use std::sync::atomic::{fence, Ordering};

/// Completions per step.
pub const GROUP: usize = 4;

/// What a step needs of the scalar loop's run (see `CqReader::run`).
pub struct Run {
    /// The run's first CQE slot (in a ring of 64-byte aligned slots).
    pub cqes: *const Cqe,
    /// Slots in the run, contiguous.
    pub slots: usize,
    /// The info-dword mask and value of a ready completion of the run.
    pub info_mask: u32,
    pub info_want: u32,
    /// The posted buffers of the run's slots, in order.
    pub bufs: *const *mut rte_mbuf,
    /// Where the run's packets go, one per slot.
    pub out: *mut *mut rte_mbuf,
    /// The WQE offset of the first slot's buffer (the run does not wrap
    /// the RQ: the k-th names `offset + 32k`).
    pub offset: u32,
    /// Bytes a buffer holds.
    pub buf_len: u32,
}

/// Whether the mbuf layout is the one the vector step writes: `buf_addr`
/// first, and packet type, packet length, data length, VLAN TCI and RSS
/// hash in 16 consecutive bytes (DPDK's `rx_descriptor_fields1`).
pub fn layout_fits() -> bool {
    let mut m = rte_mbuf::default();
    let p: *mut rte_mbuf = &mut m;
    let at = |f: usize| f.wrapping_sub(p as usize);
    // SAFETY: `p` is a live mbuf on the stack; only addresses are taken.
    let (pt, pl, dl, tci, hash) = unsafe {
        (
            at(mbuf::packet_type_ptr(p) as usize),
            at(mbuf::pkt_len_ptr(p) as usize),
            at(mbuf::data_len_ptr(p) as usize),
            at(mbuf::vlan_tci_ptr(p) as usize),
            at(mbuf::rss_hash_ptr(p) as usize),
        )
    };
    std::mem::offset_of!(rte_mbuf, buf_addr) == 0
        && (pl, dl, tci, hash) == (pt + 4, pt + 8, pt + 10, pt + 12)
}

const fn dw(v: u32) -> i32 {
    v as i32
}

/// Where a frame's EtherType lies from the buffer's address: the device
/// writes at the headroom, where the refill posts every buffer.
const ETHERTYPE_AT: usize = ffi::RTE_PKTMBUF_HEADROOM as usize + 12;
const ETH_P_IP_LE: i32 = u16::from_be(0x0800) as i32;
const ETH_P_IPV6_LE: i32 = u16::from_be(0x86dd) as i32;
/// The shortest frame the step takes: one with an EtherType.
const MIN_LEN: i32 = 14;

/// From slot `k` of the run on, takes groups of four clean completions
/// (see the module): fills their mbufs and puts them into `out` at the
/// slots' places. Returns the slot it stopped at (where a group that is
/// not clean starts, or fewer than four are left) and the bytes taken.
///
/// # Safety
/// The CPU has AVX2. `run.cqes` points to `run.slots` CQE slots of a live
/// ring, 64-byte aligned; `run.bufs` to as many posted mbufs the caller
/// owns, each with a buffer of at least `MIN_BUF_LEN` bytes after the
/// headroom; `run.out` to room for as many pointers; `k <= run.slots`.
#[target_feature(enable = "avx2")]
#[inline(never)]
pub unsafe fn groups(run: &Run, mut k: usize) -> (usize, u64) {
    debug_assert!((run.cqes as usize).is_multiple_of(CQE_SIZE) && k <= run.slots);
    let cqes = run.cqes as *const u8;
    let bu = WQE_BU_SIZE as u32;
    let off = run.offset.wrapping_add(bu.wrapping_mul(k as u32));
    let (m, w) = (dw(run.info_mask), dw(run.info_want));
    // The four slots' (WQE offset, info) dwords, as the loads below pair
    // them: offsets k, k+1, infos k, k+1 | offsets k+2, k+3, infos k+2, k+3.
    let mut tail_want = _mm256_setr_epi32(
        dw(off),
        dw(off.wrapping_add(bu)),
        w,
        w,
        dw(off.wrapping_add(2 * bu)),
        dw(off.wrapping_add(3 * bu)),
        w,
        w,
    );
    let tail_mask = _mm256_setr_epi32(-1, -1, m, m, -1, -1, m, m);
    let tail_step = _mm256_setr_epi32(dw(4 * bu), dw(4 * bu), 0, 0, dw(4 * bu), dw(4 * bu), 0, 0);
    // Byte offsets in a group of the header and flags dwords, and of the
    // first packet's length and hash.
    let s = CQE_SIZE as i32;
    let hf_at = _mm256_setr_epi32(0, s, 2 * s, 3 * s, 4, s + 4, 2 * s + 4, 3 * s + 4);
    let lh_at = _mm256_setr_epi32(
        8,
        s + 8,
        2 * s + 8,
        3 * s + 8,
        16,
        s + 16,
        2 * s + 16,
        3 * s + 16,
    );
    let okay = dw(CqeHeader::new()
        .with_cqe_type_raw(CqeType::RxOkay as u8)
        .to_raw());
    let ty = dw(CqeHeader::new().with_cqe_type_raw(0x3f).to_raw());
    let tags = dw(folded::TAG_BITS);
    let hf_want = _mm256_setr_epi32(okay, okay, okay, okay, 0, 0, 0, 0);
    let hf_mask = _mm256_setr_epi32(ty, ty, ty, ty, tags, tags, tags, tags);
    let zero = _mm_setzero_si128();
    let low16 = _mm_set1_epi32(0xffff);
    let max_len = _mm_set1_epi32(run.buf_len.min(0xffff) as i32);
    let min_len = _mm_set1_epi32(MIN_LEN);
    let idx_mask = _mm_set1_epi32(dw(folded::MASK));
    let hash_type = _mm_set1_epi32(dw(folded::HASH_TYPE));
    let (eth_v4, eth_v6) = (_mm_set1_epi32(ETH_P_IP_LE), _mm_set1_epi32(ETH_P_IPV6_LE));
    let (idx_v4, idx_v6) = (
        _mm_set1_epi32(dw(folded::IDX_IPV4)),
        _mm_set1_epi32(dw(folded::IDX_IPV6)),
    );
    let ol_mask = _mm_set1_epi32((1 << folded::OL_BITS) - 1);
    let rss = _mm_set1_epi32(dw(folded::RSS_HASH));
    let ether = _mm_set1_epi32(dw(folded::L2_ETHER));
    let table = folded::table().as_ptr() as *const i32;
    let mut bytes = _mm_setzero_si128();
    while k + GROUP <= run.slots {
        // SAFETY: `k + 4 <= slots`: the four slots lie in the ring, and
        // so do their buffers and `out` places (the caller's contract).
        unsafe {
            let c = cqes.add(k * CQE_SIZE);
            // The last 16 bytes of each slot (its WQE offset and info
            // dwords), first: aligned 16-byte loads, single accesses on
            // a CPU with AVX, as the info dword's read is on the scalar
            // path.
            let tail = |i: usize| ptr::read_volatile(c.add(i * CQE_SIZE + 48) as *const __m128i);
            let (t0, t1, t2, t3) = (tail(0), tail(1), tail(2), tail(3));
            let v = _mm256_set_m128i(_mm_unpackhi_epi32(t2, t3), _mm_unpackhi_epi32(t0, t1));
            if _mm256_testz_si256(_mm256_xor_si256(v, tail_want), tail_mask) == 0 {
                break;
            }
            // The owner bits were read before the CQEs' data (GDMA rule).
            fence(Ordering::Acquire);
            let hf = _mm256_i32gather_epi32::<1>(c as *const i32, hf_at);
            let lh = _mm256_i32gather_epi32::<1>(c as *const i32, lh_at);
            if _mm256_testz_si256(_mm256_xor_si256(hf, hf_want), hf_mask) == 0 {
                break;
            }
            let len = _mm_and_si128(_mm256_castsi256_si128(lh), low16);
            let bad = _mm_or_si128(_mm_cmpgt_epi32(len, max_len), _mm_cmpgt_epi32(min_len, len));
            if _mm_testz_si128(bad, bad) == 0 {
                break;
            }
            let flags = _mm256_extracti128_si256::<1>(hf);
            let mut idx =
                _mm_and_si128(_mm_srli_epi32::<{ folded::SHIFT as i32 }>(flags), idx_mask);
            let hashless = _mm_cmpeq_epi32(_mm_and_si128(idx, hash_type), zero);
            let bufs = run.bufs.add(k);
            if _mm_testz_si128(hashless, hashless) == 0 {
                // The frames' EtherTypes, through their mbufs' `buf_addr`
                // (offset 0: `layout_fits`); the base pointers add only
                // the fields' offsets to the addresses in the index.
                let mbufs = _mm256_loadu_si256(bufs as *const __m256i);
                let addr = _mm256_i64gather_epi64::<1>(ptr::null(), mbufs);
                let et = _mm256_i64gather_epi32::<1>(ptr::without_provenance(ETHERTYPE_AT), addr);
                let et = _mm_and_si128(et, low16);
                let (v4, v6) = (_mm_cmpeq_epi32(et, eth_v4), _mm_cmpeq_epi32(et, eth_v6));
                // Tags and other EtherTypes: the scalar path.
                if _mm_testc_si128(_mm_or_si128(v4, v6), hashless) == 0 {
                    break;
                }
                let bits = _mm_or_si128(_mm_and_si128(v4, idx_v4), _mm_and_si128(v6, idx_v6));
                idx = _mm_or_si128(idx, _mm_and_si128(bits, hashless));
            }
            let e = _mm_and_si128(_mm_i32gather_epi32::<2>(table, idx), low16);
            // `RSS_HASH` only where the completion had a hash type.
            let ol = _mm_andnot_si128(_mm_and_si128(hashless, rss), _mm_and_si128(e, ol_mask));
            let pt = _mm_or_si128(
                _mm_slli_epi32::<{ folded::PT_SHIFT as i32 }>(_mm_srli_epi32::<
                    { folded::OL_BITS as i32 },
                >(e)),
                ether,
            );
            let hash = _mm256_extracti128_si256::<1>(lh);
            // Per mbuf: packet type, packet length, data length with a
            // zero TCI above it, hash.
            let (a, b) = (_mm_unpacklo_epi32(pt, len), _mm_unpacklo_epi32(len, hash));
            let (d0, d1) = (_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b));
            let (a, b) = (_mm_unpackhi_epi32(pt, len), _mm_unpackhi_epi32(len, hash));
            let (d2, d3) = (_mm_unpacklo_epi64(a, b), _mm_unpackhi_epi64(a, b));
            let (o01, o23) = (_mm_unpacklo_epi32(ol, zero), _mm_unpackhi_epi32(ol, zero));
            let [m0, m1, m2, m3] = *(bufs as *const [*mut rte_mbuf; GROUP]);
            let fields = |m: *mut rte_mbuf| mbuf::packet_type_ptr(m) as *mut __m128i;
            let ol_flags = |m: *mut rte_mbuf| ptr::addr_of_mut!((*m).ol_flags);
            _mm_storeu_si128(fields(m0), d0);
            _mm_storeu_si128(fields(m1), d1);
            _mm_storeu_si128(fields(m2), d2);
            _mm_storeu_si128(fields(m3), d3);
            _mm_storel_epi64(ol_flags(m0) as *mut __m128i, o01);
            _mm_storeh_pd(ol_flags(m1) as *mut f64, _mm_castsi128_pd(o01));
            _mm_storel_epi64(ol_flags(m2) as *mut __m128i, o23);
            _mm_storeh_pd(ol_flags(m3) as *mut f64, _mm_castsi128_pd(o23));
            _mm256_storeu_si256(
                run.out.add(k) as *mut __m256i,
                _mm256_loadu_si256(bufs as *const __m256i),
            );
            bytes = _mm_add_epi32(bytes, len);
        }
        tail_want = _mm256_add_epi32(tail_want, tail_step);
        k += GROUP;
    }
    // At most 65535 packets of at most 65535 bytes: the sum fits 32 bits.
    let b = _mm_add_epi32(bytes, _mm_shuffle_epi32::<0b01_00_11_10>(bytes));
    let b = _mm_add_epi32(b, _mm_shuffle_epi32::<0b10_11_00_01>(b));
    (k, u64::from(_mm_cvtsi128_si32(b) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataplane::rx_flags;
    use gdma::{CqeInfo, RxCompFlags, CQE_DATA_SIZE};

    const SLOTS: usize = 16;
    const BUF_LEN: u32 = 200;
    const HEADROOM: usize = ffi::RTE_PKTMBUF_HEADROOM as usize;
    const WQ: u32 = 0x12345;
    const OWNER: u8 = 3;
    const UNSET: u64 = 0x5a5a_5a5a_5a5a_5a5a;

    #[repr(C, align(64))]
    struct Ring([Cqe; SLOTS]);

    use crate::dataplane::test_rng::Rng;

    /// One completion as the test writes it, and what the step must
    /// make of it.
    #[derive(Clone, Copy)]
    struct Slot {
        ty: u8,
        flags: u32,
        len: u16,
        hash: u32,
        offset: u32,
        info: u32,
        ethertype: u16,
    }

    impl Slot {
        /// What the module says a clean completion is, written out.
        fn clean(&self, offset: u32) -> bool {
            let f = RxCompFlags::from_raw(self.flags);
            let want = CqeInfo::new()
                .with_wq_num(WQ)
                .with_owner_bits(OWNER)
                .to_raw();
            let info = CqeInfo::from_raw(self.info);
            let relevant = CqeInfo::new()
                .with_wq_num(info.wq_num())
                .with_is_sq(info.is_sq())
                .with_owner_bits(info.owner_bits())
                .to_raw();
            relevant == want
                && self.offset == offset
                && self.ty == CqeType::RxOkay as u8
                && !f.rx_vlantag_present()
                && !f.rx_outer_iphdr_csum_fail()
                && (14..=BUF_LEN).contains(&u32::from(self.len))
                && (f.rx_hashtype() != 0 || matches!(self.ethertype, 0x0800 | 0x86dd))
        }

        fn cqe(&self) -> Cqe {
            let mut d = [0u8; CQE_DATA_SIZE];
            let hdr = CqeHeader::with_type(CqeType::RxOkay)
                .with_cqe_type_raw(self.ty)
                .to_raw();
            d[0..4].copy_from_slice(&hdr.to_le_bytes());
            d[4..8].copy_from_slice(&self.flags.to_le_bytes());
            d[8..10].copy_from_slice(&self.len.to_le_bytes());
            // A must-be-zero half a lying device may set: not the length.
            d[10..12].copy_from_slice(&0xffffu16.to_le_bytes());
            d[16..20].copy_from_slice(&self.hash.to_le_bytes());
            d[56..60].copy_from_slice(&self.offset.to_le_bytes());
            Cqe::from_parts(&d, CqeInfo::from_raw(self.info))
        }
    }

    /// A slot that is clean, or (one time in `1 / bad`) wrong in one way.
    fn slot(r: &mut Rng, offset: u32, bad: u64) -> Slot {
        let mut flags = (r.next() as u32) & (folded::MASK << folded::SHIFT);
        if r.below(3) == 0 {
            // No hash type, as without RSS.
            flags &= !(folded::HASH_TYPE << folded::SHIFT);
        }
        let mut s = Slot {
            ty: CqeType::RxOkay as u8,
            flags,
            len: 14 + r.below(u64::from(BUF_LEN) - 13) as u16,
            hash: r.next() as u32,
            offset,
            info: CqeInfo::new()
                .with_wq_num(WQ)
                .with_owner_bits(OWNER)
                .to_raw()
                | ((r.next() as u32) & CqeInfo::new().with_reserved(0xf).to_raw()),
            ethertype: if r.below(2) == 0 { 0x0800 } else { 0x86dd },
        };
        if r.below(bad) == 0 {
            match r.below(9) {
                0 => s.ty = r.below(64) as u8,
                1 => s.flags |= RxCompFlags::new().with_rx_vlantag_present(true).to_raw(),
                2 => {
                    s.flags |= RxCompFlags::new()
                        .with_rx_outer_iphdr_csum_fail(true)
                        .to_raw()
                }
                3 => s.len = r.below(u64::from(BUF_LEN) + 40) as u16,
                4 => s.offset = s.offset.wrapping_add(32 * (1 + r.below(3) as u32)),
                5 => s.info ^= CqeInfo::new().with_owner_bits(1 << r.below(3)).to_raw(),
                6 => s.info ^= 1 << r.below(25),
                7 => s.ethertype = [0x8100, 0x88a8, 0x0806][r.below(3) as usize],
                _ => s.len = r.below(14) as u16,
            }
        }
        s
    }

    /// Random runs, mostly clean: the step takes the groups before the
    /// first one that is not clean, fills their mbufs exactly as the
    /// scalar path's `packet_meta` says, and touches nothing else.
    #[test]
    fn the_vector_step_takes_clean_groups_as_the_scalar_path_would() {
        if !super::super::RxPath::vector_available() {
            eprintln!("no AVX2 on this CPU: the vector step is not tested here");
            return;
        }
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        let mut ring = Box::new(Ring(std::array::from_fn(|_| Cqe::default())));
        let mut bufs = vec![[0u8; HEADROOM + BUF_LEN as usize]; SLOTS];
        let mut mbufs: Vec<rte_mbuf> = (0..SLOTS).map(|_| rte_mbuf::default()).collect();
        let mut taken = 0;
        for round in 0..20_000 {
            let bad = [4, 20, 200][round % 3];
            let start = 32 * r.below(64) as u32;
            let slots: Vec<Slot> = (0..SLOTS)
                .map(|i| slot(&mut r, start + 32 * i as u32, bad))
                .collect();
            for (i, s) in slots.iter().enumerate() {
                ring.0[i] = s.cqe();
                bufs[i].fill(r.next() as u8);
                bufs[i][HEADROOM + 12..HEADROOM + 14].copy_from_slice(&s.ethertype.to_be_bytes());
                let m: *mut rte_mbuf = &mut mbufs[i];
                // SAFETY: a live mbuf of the test.
                unsafe {
                    (*m).buf_addr = bufs[i].as_mut_ptr().cast();
                    (*m).ol_flags = UNSET;
                    mbuf::packet_type_ptr(m)
                        .cast::<[u64; 2]>()
                        .write_unaligned([UNSET; 2]);
                }
            }
            let ptrs: Vec<*mut rte_mbuf> = mbufs.iter_mut().map(|m| m as *mut _).collect();
            let mut out = vec![ptr::null_mut(); SLOTS];
            let k0 = r.below(SLOTS as u64 + 1) as usize;
            let run = Run {
                cqes: ring.0.as_ptr(),
                slots: SLOTS,
                info_mask: CqeInfo::new()
                    .with_wq_num(0xff_ffff)
                    .with_is_sq(true)
                    .with_owner_bits(7)
                    .to_raw(),
                info_want: CqeInfo::new()
                    .with_wq_num(WQ)
                    .with_owner_bits(OWNER)
                    .to_raw(),
                bufs: ptrs.as_ptr(),
                out: out.as_mut_ptr(),
                offset: start,
                buf_len: BUF_LEN,
            };
            // SAFETY: AVX2 checked; the ring, mbufs and `out` hold SLOTS.
            let (k, bytes) = unsafe { groups(&run, k0) };
            let mut want_k = k0;
            while want_k + 4 <= SLOTS
                && (want_k..want_k + 4).all(|i| slots[i].clean(start + 32 * i as u32))
            {
                want_k += 4;
            }
            assert_eq!(k, want_k, "round {round}: from {k0}");
            taken += k - k0;
            let mut want_bytes = 0;
            for i in 0..SLOTS {
                let m = ptrs[i];
                // SAFETY: a live mbuf of the test.
                let got = unsafe {
                    (
                        (*m).ol_flags,
                        mbuf::packet_type(m),
                        mbuf::pkt_len(m),
                        mbuf::data_len(m),
                        mbuf::vlan_tci(m),
                        mbuf::rss_hash(m),
                    )
                };
                if (k0..k).contains(&i) {
                    let s = slots[i];
                    let b = &bufs[i];
                    let (ol, pt, tci) = rx_flags::packet_meta(s.flags, s.len, |at| {
                        u16::from_be_bytes([b[HEADROOM + at], b[HEADROOM + at + 1]])
                    });
                    let want = (ol, pt, u32::from(s.len), s.len, tci, s.hash);
                    assert_eq!(got, want, "round {round} slot {i}: flags {:#010x}", s.flags);
                    assert_eq!(out[i], m);
                    want_bytes += u64::from(s.len);
                } else {
                    let u = UNSET as u32;
                    let want = (UNSET, u, u, u as u16, u as u16, u);
                    assert_eq!(got, want, "round {round} slot {i}: written");
                    assert!(out[i].is_null());
                }
            }
            assert_eq!(bytes, want_bytes);
        }
        assert!(taken > 20_000, "too few clean groups: {taken} slots");
    }

    #[test]
    fn the_mbuf_layout_is_the_one_the_vector_step_writes() {
        assert!(layout_fits());
    }
}
