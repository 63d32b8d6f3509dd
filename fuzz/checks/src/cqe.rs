//! Target `cqe`: the 64-byte CQE as the driver reads it from a device it
//! cannot trust, the MANA CQE header, and the RX and TX completion OOBs in
//! its 60 data bytes; then the same types built by their encoders.

use arbitrary::{Arbitrary, Unstructured};
use gdma::{
    Cqe, CqeHeader, CqeInfo, CqeType, DecodeError, RxCompFlags, RxCompOob, TxCompOob, WireType,
    CQE_DATA_SIZE, CQE_SIZE, MANA_CQE_COMPLETION,
};
use zerocopy::IntoBytes;

use crate::bits::{assert_decode_err, assert_encode_err, field, le16, le32, padded};

/// Runs the raw-bytes part on `data`, then the encoder part on `data` read
/// as structured input.
pub fn check(data: &[u8]) {
    check_raw(data);
    let _ = encoders(&mut Unstructured::new(data));
}

/// The defined CQE types, from `enum mana_cqe_type`.
fn known_type(t: u8) -> bool {
    matches!(t, 0..=4 | 32..=41)
}

fn check_raw(data: &[u8]) {
    // Every 6-bit type (and every u8) converts fail-closed.
    for &b in data.iter().take(4) {
        match CqeType::from_raw(b) {
            Some(t) => assert!(known_type(b) && t as u8 == b, "{b}"),
            None => assert!(!known_type(b), "known type {b} refused"),
        }
    }

    let r = Cqe::decode(data);
    if data.len() < CQE_SIZE {
        assert_eq!(
            r.unwrap_err(),
            DecodeError::TooShort {
                what: "gdma_cqe",
                needed: CQE_SIZE,
                got: data.len()
            }
        );
        // The OOBs alone still decode from 60 bytes.
        if data.len() >= CQE_DATA_SIZE {
            let d: [u8; CQE_DATA_SIZE] = padded(data);
            check_rx_oob(&d);
            check_tx_oob(&d);
        }
        return;
    }
    let info = le32(data, 60) as u64;
    let reserved = field(info, 25, 4);
    match r {
        Err(e) => {
            assert_ne!(reserved, 0, "CQE refused: {e}");
            assert_eq!(
                e,
                DecodeError::ReservedNonZero {
                    what: "gdma_cqe.cqe_info",
                    field: "reserved",
                    value: reserved
                }
            );
        }
        Ok(c) => {
            assert_eq!(reserved, 0, "CQE with reserved info bits accepted");
            assert_eq!(c.as_bytes(), &data[..CQE_SIZE]);
            assert_eq!(c.info.wq_num() as u64, field(info, 0, 24));
            assert_eq!(c.info.is_sq(), field(info, 24, 1) == 1);
            assert_eq!(c.info.owner_bits() as u64, field(info, 29, 3));
            let mut out = [0u8; CQE_SIZE];
            assert_eq!(c.encode_into(&mut out), Ok(CQE_SIZE));
            assert_eq!(&out[..], &data[..CQE_SIZE]);
            assert!(c.encode_into(&mut out[..CQE_SIZE - 1]).is_err());
            let by_ref = Cqe::decode_ref(data).expect("decode_ref disagrees with decode");
            assert_eq!(by_ref, &c);

            // validate_full checks the OOB the info dword says it is.
            let d: [u8; CQE_DATA_SIZE] = padded(data);
            let rx = check_rx_oob(&d);
            let tx = check_tx_oob(&d);
            let full = c.validate_full();
            let expect = if c.info.is_sq() { tx } else { rx };
            assert_eq!(full.is_ok(), expect, "validate_full {full:?}");
            assert_eq!(c.rx_oob().as_bytes(), &d);
            assert_eq!(c.tx_oob().as_bytes(), &d);
            // The header the driver reads on the hot path.
            let h = c.header();
            let hw = le32(data, 0) as u64;
            assert_eq!(h.cqe_type_raw() as u64, field(hw, 0, 6));
            assert_eq!(h.client_type() as u64, field(hw, 6, 2));
            assert_eq!(h.vendor_err() as u64, field(hw, 8, 24));
        }
    }
}

/// Decodes the 60 data bytes as an RX OOB; returns whether it was accepted.
fn check_rx_oob(d: &[u8; CQE_DATA_SIZE]) -> bool {
    let t = field(le32(d, 0) as u64, 0, 6) as u8;
    let flags = le32(d, 4) as u64;
    let mut wrong = Vec::new();
    if !known_type(t) || !(1..=4).contains(&t) {
        wrong.push("cqe_type");
    }
    if field(flags, 15, 1) != 0 {
        wrong.push("reserved1");
    }
    if field(flags, 31, 1) != 0 {
        wrong.push("reserved2");
    }
    const R1: [&str; 4] = [
        "ppi[0].reserved1",
        "ppi[1].reserved1",
        "ppi[2].reserved1",
        "ppi[3].reserved1",
    ];
    const R2: [&str; 4] = [
        "ppi[0].reserved2",
        "ppi[1].reserved2",
        "ppi[2].reserved2",
        "ppi[3].reserved2",
    ];
    for i in 0..4 {
        let p = 8 + 12 * i;
        if le16(d, p + 2) != 0 {
            wrong.push(R1[i]);
        }
        if le32(d, p + 4) != 0 {
            wrong.push(R2[i]);
        }
    }
    match RxCompOob::decode(d) {
        Err(e) => {
            if !known_type(t) {
                assert_eq!(e, DecodeError::UnknownCqeType { value: t });
            }
            let what = if known_type(t) {
                "mana_rxcomp_oob"
            } else {
                "mana_cqe_header"
            };
            assert_decode_err(&e, what, &wrong, d);
            false
        }
        Ok(o) => {
            assert!(
                wrong.is_empty(),
                "RX OOB accepted with {wrong:?} wrong: {d:?}"
            );
            assert_eq!(o.as_bytes(), d);
            let ty = o.cqe_hdr.cqe_type().unwrap();
            assert!(ty.is_rx() && ty as u8 == t);
            let f = o.flags;
            assert_eq!(f.rx_vlan_id() as u64, field(flags, 0, 12));
            assert_eq!(f.rx_vlantag_present() as u64, field(flags, 12, 1));
            assert_eq!(f.rx_outer_iphdr_csum_succeed() as u64, field(flags, 13, 1));
            assert_eq!(f.rx_outer_iphdr_csum_fail() as u64, field(flags, 14, 1));
            assert_eq!(f.rx_hashtype() as u64, field(flags, 16, 9));
            assert_eq!(f.rx_iphdr_csum_succeed() as u64, field(flags, 25, 1));
            assert_eq!(f.rx_iphdr_csum_fail() as u64, field(flags, 26, 1));
            assert_eq!(f.rx_tcp_csum_succeed() as u64, field(flags, 27, 1));
            assert_eq!(f.rx_tcp_csum_fail() as u64, field(flags, 28, 1));
            assert_eq!(f.rx_udp_csum_succeed() as u64, field(flags, 29, 1));
            assert_eq!(f.rx_udp_csum_fail() as u64, field(flags, 30, 1));
            let lens: Vec<u16> = (0..4).map(|i| le16(d, 8 + 12 * i)).collect();
            for (i, p) in o.ppi.iter().enumerate() {
                assert_eq!(p.pkt_len(), lens[i]);
                assert_eq!(p.pkt_hash(), le32(d, 8 + 12 * i + 8));
            }
            let n = lens.iter().take_while(|&&l| l != 0).count();
            assert_eq!(o.num_packets(), n);
            assert_eq!(o.rx_wqe_offset(), le32(d, 56));
            let h = field(flags, 16, 9);
            assert_eq!(o.dpdk_hash_valid(), h == 0x049 || h == 0x1b6);
            assert_eq!(RxCompOob::view(d), &o);
            true
        }
    }
}

/// Decodes the 60 data bytes as a TX OOB; returns whether it was accepted.
fn check_tx_oob(d: &[u8; CQE_DATA_SIZE]) -> bool {
    let t = field(le32(d, 0) as u64, 0, 6) as u8;
    let mut wrong = Vec::new();
    if !known_type(t) || !(32..=41).contains(&t) {
        wrong.push("cqe_type");
    }
    const R: [&str; 12] = [
        "reserved[0]",
        "reserved[1]",
        "reserved[2]",
        "reserved[3]",
        "reserved[4]",
        "reserved[5]",
        "reserved[6]",
        "reserved[7]",
        "reserved[8]",
        "reserved[9]",
        "reserved[10]",
        "reserved[11]",
    ];
    for (i, name) in R.iter().enumerate() {
        if le32(d, 12 + 4 * i) != 0 {
            wrong.push(name);
        }
    }
    match TxCompOob::decode(d) {
        Err(e) => {
            if !known_type(t) {
                assert_eq!(e, DecodeError::UnknownCqeType { value: t });
            }
            let what = if known_type(t) {
                "mana_tx_comp_oob"
            } else {
                "mana_cqe_header"
            };
            assert_decode_err(&e, what, &wrong, d);
            false
        }
        Ok(o) => {
            assert!(
                wrong.is_empty(),
                "TX OOB accepted with {wrong:?} wrong: {d:?}"
            );
            assert_eq!(o.as_bytes(), d);
            assert!(o.cqe_hdr.cqe_type().unwrap().is_tx());
            assert_eq!(o.tx_data_offset(), le32(d, 4));
            let w = le32(d, 8) as u64;
            assert_eq!(o.offsets.tx_sgl_offset() as u64, field(w, 0, 5));
            assert_eq!(o.offsets.tx_wqe_offset() as u64, field(w, 5, 27));
            assert_eq!(TxCompOob::view(d), &o);
            true
        }
    }
}

/// Builds CQEs and OOBs with the encoders from structured input and checks
/// that they decode back to what was put in.
fn encoders(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    // The info dword.
    let (wq, is_sq, owner) = (u32::arbitrary(u)?, bool::arbitrary(u)?, u8::arbitrary(u)?);
    let (wq, owner) = if bool::arbitrary(u)? {
        (wq & 0xff_ffff, owner & 7)
    } else {
        (wq, owner)
    };
    let info = match CqeInfo::try_new(wq, is_sq, owner) {
        Err(e) => {
            assert!(
                wq > 0xff_ffff || owner > 7,
                "CqeInfo({wq:#x}, {owner}) refused: {e}"
            );
            let mut f = Vec::new();
            if wq > 0xff_ffff {
                f.push("wq_num");
            }
            if owner > 7 {
                f.push("owner_bits");
            }
            assert_encode_err(&e, &f, &(wq, owner));
            return Ok(());
        }
        Ok(i) => {
            assert!(
                wq <= 0xff_ffff && owner <= 7,
                "CqeInfo({wq:#x}, {owner}) accepted"
            );
            assert_eq!(i.to_raw(), wq | (is_sq as u32) << 24 | (owner as u32) << 29);
            assert_eq!(CqeInfo::decode(i.as_bytes()), Ok(i));
            i
        }
    };

    // A CQE type, known or not, in a header.
    let t = CqeType::ALL[usize::from(u8::arbitrary(u)?) % CqeType::ALL.len()];
    let h = CqeHeader::with_type(t);
    assert_eq!(h.cqe_type(), Ok(t));
    assert_eq!(h.client_type(), MANA_CQE_COMPLETION);
    assert_eq!(h.vendor_err(), 0);
    assert_eq!(CqeHeader::decode(h.as_bytes()), Ok(h));
    let raw = u8::arbitrary(u)? & 0x3f;
    let hr = CqeHeader::new().with_cqe_type_raw(raw);
    assert_eq!(CqeHeader::decode(hr.as_bytes()).is_ok(), known_type(raw));

    // An RX completion of 0..=5 packets with any flags.
    let flags = RxCompFlags::from_raw(u32::arbitrary(u)?);
    let n = usize::from(u8::arbitrary(u)? % 6);
    let mut pkts = Vec::with_capacity(n);
    for _ in 0..n {
        pkts.push((u16::arbitrary(u)?, u32::arbitrary(u)?));
    }
    let reserved_flags = flags.to_raw() & (1 << 15 | 1 << 31) != 0;
    match RxCompOob::packets(flags, &pkts) {
        Err(e) => {
            let ok_count = (1..=4).contains(&n);
            assert!(
                !ok_count || pkts.iter().any(|p| p.0 == 0),
                "RxCompOob::packets({pkts:?}) refused: {e}"
            );
            assert_encode_err(&e, &["ppi", "pkt_len"], &pkts);
        }
        Ok(o) => {
            assert!((1..=4).contains(&n) && pkts.iter().all(|p| p.0 != 0));
            let want = if n == 1 {
                CqeType::RxOkay
            } else {
                CqeType::RxCoalesced4
            };
            assert_eq!(o.cqe_hdr.cqe_type(), Ok(want));
            assert_eq!(o.num_packets(), n);
            for (p, &(len, hash)) in o.ppi.iter().zip(&pkts) {
                assert_eq!((p.pkt_len(), p.pkt_hash()), (len, hash));
            }
            match RxCompOob::decode(o.as_bytes()) {
                Ok(d) => {
                    assert!(!reserved_flags);
                    assert_eq!(d, o);
                }
                Err(e) => {
                    assert!(reserved_flags, "{e}");
                    assert!(matches!(e.field(), Some("reserved1" | "reserved2")));
                }
            }
            if n == 1 {
                assert_eq!(RxCompOob::single(flags, pkts[0].0, pkts[0].1), o);
            }
            // In a CQE, as the device writes it.
            let data: [u8; CQE_DATA_SIZE] = padded(o.as_bytes());
            let c = Cqe::from_parts(&data, info);
            let d = Cqe::decode(c.as_bytes()).unwrap();
            assert_eq!(d, c);
            assert_eq!(d.rx_oob(), &o);
            assert_eq!(d.validate_full().is_ok(), !info.is_sq() && !reserved_flags);
        }
    }

    // A TX completion of any type.
    let tx = TxCompOob::with_type(t);
    assert_eq!(TxCompOob::decode(tx.as_bytes()).is_ok(), t.is_tx());
    let data: [u8; CQE_DATA_SIZE] = padded(tx.as_bytes());
    let c = Cqe::from_parts(&data, info);
    assert_eq!(
        c.validate_full().is_ok(),
        if info.is_sq() { t.is_tx() } else { t.is_rx() }
    );
    Ok(())
}
