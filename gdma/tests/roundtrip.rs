//! Property tests: encode/decode round trips, and decoders that accept
//! exactly the values whose reserved bits (given here independently as raw
//! bit masks from the reference's bit positions) are zero.

use gdma::le::{U16, U32};
use gdma::*;
use proptest::prelude::*;
use zerocopy::IntoBytes;

fn bits(w: u32) -> impl Strategy<Value = u64> {
    if w == 64 {
        any::<u64>().boxed()
    } else {
        (0..(1u64 << w)).boxed()
    }
}

/// A raw value whose `reserved` bits are zero or random, 50/50.
fn raw64(reserved: u64) -> impl Strategy<Value = u64> {
    (any::<u64>(), any::<bool>()).prop_map(move |(v, keep)| if keep { v & !reserved } else { v })
}

fn raw32(reserved: u32) -> impl Strategy<Value = u32> {
    (any::<u32>(), any::<bool>()).prop_map(move |(v, keep)| if keep { v & !reserved } else { v })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    // ----- doorbells -----------------------------------------------------

    #[test]
    fn sq_doorbell(id in bits(24), tail in any::<u32>()) {
        let d = SqDoorbell::try_new(id as u32, tail).unwrap();
        prop_assert_eq!(d.to_raw(), (tail as u64) << 32 | id);
        prop_assert_eq!(Doorbell::decode(0, d.to_raw()).unwrap(), Doorbell::Sq(d));
    }

    #[test]
    fn rq_doorbell(id in bits(24), tail in any::<u32>()) {
        let d = RqDoorbell::try_new(id as u32, tail).unwrap();
        prop_assert_eq!(d.to_raw(), (tail as u64) << 32 | id);
        prop_assert_eq!(Doorbell::decode(0x400, d.to_raw()).unwrap(), Doorbell::Rq(d));
    }

    #[test]
    fn cq_doorbell(id in bits(24), tail in bits(31), arm in any::<bool>()) {
        let d = CqDoorbell::try_new(id as u32, tail as u32, arm).unwrap();
        prop_assert_eq!(d.to_raw(), (arm as u64) << 63 | tail << 32 | id);
        prop_assert_eq!(Doorbell::decode(0x800, d.to_raw()).unwrap(), Doorbell::Cq(d));
    }

    #[test]
    fn eq_doorbell(id in bits(16), tail in bits(31), arm in any::<bool>()) {
        let d = EqDoorbell::try_new(id as u32, tail as u32, arm).unwrap();
        prop_assert_eq!(d.to_raw(), (arm as u64) << 63 | tail << 32 | id);
        prop_assert_eq!(Doorbell::decode(0xff8, d.to_raw()).unwrap(), Doorbell::Eq(d));
    }

    #[test]
    fn doorbell_raw_decode(
        sq in raw64(0xff00_0000), rq in any::<u64>(), cq in raw64(0xff00_0000), eq in raw64(0xffff_0000)
    ) {
        for (off, v, res) in [(0x000, sq, 0xff00_0000u64), (0x400, rq, 0), (0x800, cq, 0xff00_0000), (0xff8, eq, 0xffff_0000)] {
            match Doorbell::decode(off, v) {
                Ok(d) => {
                    prop_assert_eq!(v & res, 0);
                    prop_assert_eq!(d.to_raw(), v);
                    prop_assert_eq!(d.offset(), off);
                }
                Err(e) => {
                    prop_assert_ne!(v & res, 0);
                    prop_assert_eq!(e.field(), Some("reserved"));
                }
            }
        }
    }

    #[test]
    fn short_doorbells(wq in raw32(0xf000_0000), cq in raw32(0x7000_0000), id in bits(12), inc in bits(16), arm in any::<bool>()) {
        for off in [0x10, 0x410] {
            match ShortDoorbell::decode(off, wq) {
                Ok(d) => { prop_assert_eq!(wq & 0xf000_0000, 0); prop_assert_eq!(d.to_raw(), wq); }
                Err(e) => { prop_assert_ne!(wq & 0xf000_0000, 0); prop_assert_eq!(e.field(), Some("reserved")); }
            }
        }
        for off in [0x810, 0xff0] {
            match ShortDoorbell::decode(off, cq) {
                Ok(d) => { prop_assert_eq!(cq & 0x7000_0000, 0); prop_assert_eq!(d.to_raw(), cq); }
                Err(e) => { prop_assert_ne!(cq & 0x7000_0000, 0); prop_assert_eq!(e.field(), Some("reserved")); }
            }
        }
        let d = ShortWqDoorbell::try_new(id as u32, inc as u32).unwrap();
        prop_assert_eq!(d.to_raw() as u64, id << 16 | inc);
        let d = ShortCqDoorbell::try_new(id as u32, inc as u32, arm).unwrap();
        prop_assert_eq!(d.to_raw() as u64, (arm as u64) << 31 | id << 16 | inc);
    }

    #[test]
    fn doorbell_overflow_rejected(id in (1u32 << 24)..) {
        prop_assert!(SqDoorbell::try_new(id, 0).is_err());
        prop_assert!(RqDoorbell::try_new(id, 0).is_err());
        prop_assert!(CqDoorbell::try_new(id, 0, false).is_err());
        prop_assert!(EqDoorbell::try_new(id, 0, false).is_err());
        prop_assert!(ShortWqDoorbell::try_new(id, 0).is_err());
    }

    // ----- WQE header and SGE ----------------------------------------------

    #[test]
    fn wqe_header_roundtrip(n in bits(8), big in any::<bool>(), cdu in bits(14), lv in bits(8)) {
        let oob = if big { 24 } else { 8 };
        let h = WqeHeader::try_new(n as usize, oob, cdu as u32).unwrap().with_last_vbytes(lv as u8);
        let raw = u64::from_le_bytes(h.as_bytes().try_into().unwrap());
        prop_assert_eq!(raw, lv << 24 | n << 32 | ((oob as u64) / 4) << 40 | cdu << 48);
        let d = WqeHeader::decode(h.as_bytes()).unwrap();
        prop_assert_eq!(d, h);
        prop_assert_eq!((d.num_sge() as u64, d.inline_oob_size(), d.client_data_unit() as u64), (n, oob, cdu));
    }

    #[test]
    fn wqe_header_raw(raw in raw64(0xff_ffff | 0xf << 44 | 0x3 << 62)) {
        let div4 = (raw >> 40) & 7;
        let r = WqeHeader::decode(&raw.to_le_bytes());
        let expect_field = if raw & 0xff_ffff != 0 {
            Some("reserved")
        } else if raw & (0xf << 44) != 0 {
            Some("reserved1")
        } else if raw & (0x3 << 62) != 0 {
            Some("reserved2")
        } else if div4 != 2 && div4 != 6 {
            Some("inline_oob_size_div4")
        } else {
            None
        };
        match r {
            Ok(h) => { prop_assert_eq!(expect_field, None); prop_assert_eq!(h.as_bytes(), &raw.to_le_bytes()); }
            Err(e) => prop_assert_eq!(e.field(), expect_field),
        }
    }

    #[test]
    fn sge_roundtrip(a in any::<u64>(), k in any::<u32>(), s in any::<u32>()) {
        let sge = Sge::new(a, k, s);
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&a.to_le_bytes());
        b[8..12].copy_from_slice(&k.to_le_bytes());
        b[12..].copy_from_slice(&s.to_le_bytes());
        prop_assert_eq!(sge.as_bytes(), &b);
        prop_assert_eq!(Sge::decode(&b).unwrap(), sge);
    }

    // ----- WQEs in a ring --------------------------------------------------

    #[test]
    fn wqe_ring_roundtrip(
        log_len in 9u32..=12,
        head_bu in any::<u32>(),
        is_sq in any::<bool>(),
        oob in proptest::collection::vec(any::<u8>(), 0..=24),
        sges in proptest::collection::vec((any::<u64>(), any::<u32>(), any::<u32>()), 0..=30),
    ) {
        let wq = if is_sq { WqType::Sq } else { WqType::Rq };
        let oob: &[u8] = if is_sq { &oob } else { &[] };
        let sges: Vec<Sge> = sges
            .iter()
            .take(wq.max_sges())
            .map(|&(a, k, s)| Sge::new(a, k, s))
            .collect();
        let mut ring = vec![0xeeu8; 1 << log_len];
        let bu = write_wqe(&mut ring, head_bu, wq, oob, &sges, 0).unwrap();
        prop_assert_eq!(bu, wqe_size_bu(oob.len(), sges.len()));
        let len = ring.len();
        let start = (head_bu as usize * 32) & (len - 1);
        // Bytes outside the WQE (with wrap) are untouched.
        for (i, b) in ring.iter().enumerate() {
            let rel = (i + len - start) & (len - 1);
            if rel >= bu as usize * 32 {
                prop_assert_eq!(*b, 0xee, "byte {} outside the WQE", i);
            }
        }
        let v = read_wqe(&ring, head_bu.wrapping_mul(32), wq).unwrap();
        prop_assert_eq!(v.size_bu(), bu);
        prop_assert_eq!(&v.inline_oob()[..oob.len()], oob);
        prop_assert!(v.inline_oob()[oob.len()..].iter().all(|&b| b == 0));
        prop_assert_eq!(v.sges().collect::<Vec<_>>(), sges);
    }

    #[test]
    fn lso_wqe_ring_roundtrip(
        log_len in 9u32..=12,
        head_bu in any::<u32>(),
        big in any::<bool>(),
        mss in 1u32..=0x3fff,
        hdr in 1u32..=255,
        payload in proptest::collection::vec((any::<u64>(), any::<u32>(), any::<u32>()), 1..=28),
    ) {
        let oob = vec![0x5au8; if big { 24 } else { 8 }];
        let mut sges = vec![Sge::new(0x1000, 9, hdr)];
        sges.extend(payload.iter().map(|&(a, k, s)| Sge::new(a, k, s)));
        let mut ring = vec![0xeeu8; 1 << log_len];
        let bu = write_lso_wqe(&mut ring, head_bu, &oob, &sges, mss).unwrap();
        prop_assert_eq!(bu, wqe_size_bu(oob.len(), sges.len()));
        let v = read_wqe(&ring, head_bu.wrapping_mul(32), WqType::Sq).unwrap();
        // Raw header bits: last_vbytes, num_sge, OOB size, bit 11, MSS.
        let raw = u64::from_le_bytes(v.header.as_bytes().try_into().unwrap());
        let want = (hdr as u64) << 24
            | (sges.len() as u64) << 32
            | ((oob.len() as u64) / 4) << 40
            | 1 << 43
            | (mss as u64) << 48;
        prop_assert_eq!(raw, want);
        prop_assert_eq!(v.lso(), Some(Lso { mss: mss as u16, header_len: hdr as u8 }));
        prop_assert_eq!(v.sges().collect::<Vec<_>>(), sges);
        prop_assert_eq!(v.inline_oob(), &oob[..]);
    }

    // ----- TX OOBs ------------------------------------------------------------

    #[test]
    fn tx_short_raw(raw in any::<u64>()) {
        match TxShortOob::decode(&raw.to_le_bytes()) {
            Ok(o) => {
                prop_assert!(raw & 3 <= 1);
                prop_assert_eq!(o.as_bytes(), &raw.to_le_bytes());
                // Getters pick the documented bit positions.
                prop_assert_eq!(o.vcq_num() as u64, (raw >> 8) & 0xff_ffff);
                prop_assert_eq!(o.trans_off() as u64, (raw >> 32) & 0x3ff);
                prop_assert_eq!(o.vsq_frame() as u64, (raw >> 42) & 0x3fff);
                prop_assert_eq!(o.short_vp_offset() as u64, raw >> 56);
                prop_assert_eq!(o.suppress_txcqe_gen(), raw & 0x80 != 0);
            }
            Err(e) => { prop_assert!(raw & 3 > 1); prop_assert_eq!(e.field(), Some("pkt_fmt")); }
        }
    }

    #[test]
    fn tx_long_raw(lo in raw64(0xfff0 | 0xf << 60), hi in raw64(u64::MAX)) {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&lo.to_le_bytes());
        b[8..].copy_from_slice(&hi.to_le_bytes());
        let expect = if lo & 0xfff0 != 0 {
            Some("reserved1")
        } else if lo & (0xf << 60) != 0 {
            Some("reserved2")
        } else if hi & 0xffff_ffff != 0 {
            Some("reserved3")
        } else if hi != 0 {
            Some("reserved4")
        } else {
            None
        };
        match TxLongOob::decode(&b) {
            Ok(o) => {
                prop_assert_eq!(expect, None);
                prop_assert_eq!(o.as_bytes(), &b);
                prop_assert_eq!(o.vlan_id() as u64, (lo >> 20) & 0xfff);
                prop_assert_eq!(o.pcp() as u64, (lo >> 16) & 7);
                prop_assert_eq!(o.long_vp_offset() as u64, (lo >> 48) & 0xfff);
            }
            Err(e) => prop_assert_eq!(e.field(), expect),
        }
    }

    #[test]
    fn tx_inline_oob_roundtrip(
        cq in bits(24), sq in any::<u32>(), vp in bits(8), trans in bits(10),
        flags in bits(6), vlan in proptest::option::of(any::<u16>()),
    ) {
        let mut s = TxShortOob::for_queue(cq as u32, sq, vp as u32).unwrap()
            .with_trans_off(trans as u16)
            .with_is_outer_ipv4(flags & 1 != 0)
            .with_is_outer_ipv6(flags & 2 != 0)
            .with_comp_iphdr_csum(flags & 4 != 0)
            .with_comp_tcp_csum(flags & 8 != 0)
            .with_comp_udp_csum(flags & 16 != 0)
            .with_suppress_txcqe_gen(flags & 32 != 0);
        let oob = match vlan {
            None => TxInlineOob::Short(s),
            Some(tci) => {
                s = s.with_packet_format(PacketFormat::Long);
                TxInlineOob::Long(TxOob { s_oob: s, l_oob: TxLongOob::new().with_vlan_tci(tci) })
            }
        };
        prop_assert_eq!(TxInlineOob::decode(oob.as_bytes()).unwrap(), oob);
        prop_assert_eq!(oob.short().vsq_frame(), vsq_frame(sq));
        if let Some(tci) = vlan {
            prop_assert_eq!(oob.long().unwrap().vlan_tci(), tci);
        }
        // Through a real WQE.
        let mut ring = vec![0u8; 1024];
        write_wqe(&mut ring, 3, WqType::Sq, oob.as_bytes(), &[Sge::new(1, 2, 3)], 0).unwrap();
        let v = read_wqe(&ring, 96, WqType::Sq).unwrap();
        prop_assert_eq!(TxInlineOob::decode(v.inline_oob()).unwrap(), oob);
    }

    // ----- CQEs ------------------------------------------------------------------

    #[test]
    fn cqe_info_raw(raw in raw32(0xf << 25)) {
        match CqeInfo::decode(&raw.to_le_bytes()) {
            Ok(i) => {
                prop_assert_eq!(raw & (0xf << 25), 0);
                prop_assert_eq!(i.to_raw(), raw);
                prop_assert_eq!(i.wq_num(), raw & 0xff_ffff);
                prop_assert_eq!(i.is_sq(), raw & (1 << 24) != 0);
                prop_assert_eq!(i.owner_bits() as u32, raw >> 29);
            }
            Err(e) => prop_assert_eq!(e.field(), Some("reserved")),
        }
    }

    #[test]
    fn cqe_header_raw(raw in any::<u32>()) {
        let t = (raw & 0x3f) as u8;
        match CqeHeader::decode(&raw.to_le_bytes()) {
            Ok(h) => {
                prop_assert!(t <= 4 || (32..=41).contains(&t));
                prop_assert_eq!(h.cqe_type().unwrap() as u8, t);
                prop_assert_eq!(h.client_type() as u32, (raw >> 6) & 3);
                prop_assert_eq!(h.vendor_err(), raw >> 8);
            }
            Err(e) => prop_assert_eq!(e, DecodeError::UnknownCqeType { value: t }),
        }
    }

    #[test]
    fn rx_comp_roundtrip(
        t in prop_oneof![Just(CqeType::RxOkay), Just(CqeType::RxCoalesced4), Just(CqeType::RxObjectFence), Just(CqeType::RxTruncated)],
        vendor in bits(24), flags in any::<u32>(),
        ppi in proptest::array::uniform4((any::<u16>(), any::<u32>())), wqe_off in any::<u32>(),
    ) {
        let flags = RxCompFlags::from_bits(U32::new(flags & !(1 << 15 | 1 << 31)));
        let o = RxCompOob {
            cqe_hdr: CqeHeader::with_type(t).with_vendor_err(vendor as u32),
            flags,
            ppi: ppi.map(|(l, h)| RxPacketInfo::new(l, h)),
            rx_wqe_offset: U32::new(wqe_off),
        };
        let d = RxCompOob::decode(o.as_bytes()).unwrap();
        prop_assert_eq!(d, o);
        // Through a full CQE.
        let c = Cqe::from_parts(o.as_bytes().try_into().unwrap(), CqeInfo::try_new(9, false, 3).unwrap());
        let c2 = Cqe::decode(c.as_bytes()).unwrap();
        prop_assert!(c2.validate_full().is_ok());
        prop_assert_eq!(c2.rx_oob(), &o);
        prop_assert_eq!(c2.header().cqe_type().unwrap(), t);
    }

    #[test]
    fn rx_comp_raw(data in proptest::array::uniform32(any::<u8>()), tail in proptest::array::uniform28(any::<u8>()), clean in any::<bool>()) {
        let mut b = [0u8; 60];
        b[..32].copy_from_slice(&data);
        b[32..].copy_from_slice(&tail);
        b[0] = (b[0] & 0xc0) | (1 + b[0] % 4); // an RX type
        if clean {
            b[5] &= 0x7f; // reserved1 (bit 15)
            b[7] &= 0x7f; // reserved2 (bit 31)
            for i in 0..4 {
                let p = 8 + 12 * i;
                b[p + 2..p + 8].fill(0);
            }
        }
        let mut expect = None;
        if b[5] & 0x80 != 0 {
            expect = Some("reserved1".to_string());
        } else if b[7] & 0x80 != 0 {
            expect = Some("reserved2".to_string());
        } else {
            for i in 0..4 {
                let p = 8 + 12 * i;
                if b[p + 2..p + 4] != [0, 0] {
                    expect = Some(format!("ppi[{i}].reserved1"));
                    break;
                }
                if b[p + 4..p + 8] != [0; 4] {
                    expect = Some(format!("ppi[{i}].reserved2"));
                    break;
                }
            }
        }
        match RxCompOob::decode(&b) {
            Ok(o) => { prop_assert_eq!(expect, None); prop_assert_eq!(o.as_bytes(), &b); }
            Err(e) => prop_assert_eq!(e.field().map(str::to_string), expect),
        }
    }

    #[test]
    fn tx_comp_raw(t in 32u8..=41, rest in proptest::collection::vec(any::<u8>(), 59), which in 0usize..13) {
        let mut b = [0u8; 60];
        b[0] = t;
        b[1..].copy_from_slice(&rest);
        // Zero all reserved words except possibly one.
        for i in 0..12 {
            if i != which {
                b[12 + 4 * i..16 + 4 * i].fill(0);
            }
        }
        let bad = which < 12 && b[12 + 4 * which..16 + 4 * which] != [0; 4];
        match TxCompOob::decode(&b) {
            Ok(o) => {
                prop_assert!(!bad);
                prop_assert_eq!(o.as_bytes(), &b);
                let w2 = u32::from_le_bytes(b[8..12].try_into().unwrap());
                prop_assert_eq!(o.offsets.tx_sgl_offset() as u32, w2 & 0x1f);
                prop_assert_eq!(o.offsets.tx_wqe_offset(), w2 >> 5);
            }
            Err(e) => {
                prop_assert!(bad);
                let name = format!("reserved[{which}]");
                prop_assert_eq!(e.field(), Some(name.as_str()));
            }
        }
    }

    #[test]
    fn ppi_layout(len in any::<u16>(), r1 in any::<u16>(), r2 in any::<u32>(), h in any::<u32>()) {
        let p = RxPacketInfo { pkt_len: U16::new(len), reserved1: U16::new(r1), reserved2: U32::new(r2), pkt_hash: U32::new(h) };
        let dw0 = u32::from_le_bytes(p.as_bytes()[..4].try_into().unwrap());
        prop_assert_eq!(dw0, (r1 as u32) << 16 | len as u32);
    }

    // ----- CQ owner-bit phase ------------------------------------------------------

    #[test]
    fn owner_phase(count in 1u32..300, ops in proptest::collection::vec(0u32..400, 1..60)) {
        let mut ring = vec![0u8; count as usize];
        let (mut p, mut c) = (cq_initial_index(count), cq_initial_index(count));
        for n in ops {
            let n = n % (count + 1);
            let n = n.min(count - (p - c));
            for _ in 0..n {
                ring[cq_slot(p, count) as usize] = owner_bits(p, count);
                p += 1;
            }
            let mut seen = 0;
            loop {
                match cqe_state(ring[cq_slot(c, count) as usize], c, count) {
                    CqeState::Ready => { c += 1; seen += 1; }
                    CqeState::Empty => break,
                    CqeState::Overflow => prop_assert!(false, "spurious overflow"),
                }
            }
            prop_assert_eq!(seen, n);
            prop_assert_eq!(c, p);
        }
    }

    #[test]
    fn owner_overflow_detected(count in 1u32..300, extra in 1u32..300) {
        let extra = extra.min(count * 6);
        let mut ring = vec![0u8; count as usize];
        let c = cq_initial_index(count);
        for p in c..c + count + extra {
            ring[cq_slot(p, count) as usize] = owner_bits(p, count);
        }
        prop_assert_eq!(cqe_state(ring[cq_slot(c, count) as usize], c, count), CqeState::Overflow);
    }

    // ----- Toeplitz ----------------------------------------------------------------

    #[test]
    fn toeplitz_is_linear(a in proptest::array::uniform12(any::<u8>()), b in proptest::array::uniform12(any::<u8>())) {
        let x: Vec<u8> = a.iter().zip(&b).map(|(p, q)| p ^ q).collect();
        for key in [&MICROSOFT_RSS_KEY, &DPDK_MANA_DEFAULT_RSS_KEY] {
            prop_assert_eq!(toeplitz(key, &x), toeplitz(key, &a) ^ toeplitz(key, &b));
        }
    }
}
