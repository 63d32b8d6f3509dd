//! Target `tx_oob`: the TX inline OOB of a send WQE as the device decodes
//! it ([`TxInlineOob::decode`]: short or long format, 8- or 24-byte slot,
//! reserved bits), then OOBs built by the driver's encoders.

use arbitrary::{Arbitrary, Unstructured};
use gdma::{
    vsq_frame, DecodeError, PacketFormat, TxInlineOob, TxLongOob, TxOob, TxShortOob, WireType,
};
use zerocopy::IntoBytes;

use crate::bits::{assert_decode_err, assert_encode_err, field, le64};

/// Decodes `data` as a slot, then builds OOBs from it as structured input.
pub fn check(data: &[u8]) {
    decode_slot(data);
    let _ = encoders(&mut Unstructured::new(data));
}

fn decode_slot(slot: &[u8]) {
    let r = TxInlineOob::decode(slot);
    if slot.len() != 8 && slot.len() != 24 {
        let e = r.expect_err("slot of a size other than 8 or 24 accepted");
        assert_decode_err(&e, "mana_tx_oob", &["inline_oob_size"], &slot);
        return;
    }
    let s = le64(slot, 0);
    let fmt = field(s, 0, 2);
    let mut wrong = Vec::new();
    match fmt {
        0 if slot.len() == 24 && slot[8..].iter().any(|&b| b != 0) => wrong.push("l_oob"),
        0 => {}
        1 if slot.len() == 8 => wrong.push("pkt_fmt"),
        1 => {
            let lo = le64(slot, 8);
            let hi = le64(slot, 16);
            if field(lo, 4, 12) != 0 {
                wrong.push("reserved1");
            }
            if field(lo, 60, 4) != 0 {
                wrong.push("reserved2");
            }
            if field(hi, 0, 32) != 0 {
                wrong.push("reserved3");
            }
            if field(hi, 32, 32) != 0 {
                wrong.push("reserved4");
            }
        }
        _ => wrong.push("pkt_fmt"),
    }
    let o = match r {
        Err(e) => {
            let what = match e.field() {
                Some("pkt_fmt") => "mana_tx_short_oob",
                Some("l_oob") => "mana_tx_oob",
                _ => "mana_tx_long_oob",
            };
            assert_decode_err(&e, what, &wrong, &slot);
            assert!(!wrong.is_empty(), "good OOB refused: {e}");
            return;
        }
        Ok(o) => o,
    };
    assert!(
        wrong.is_empty(),
        "OOB with {wrong:?} wrong accepted: {slot:?}"
    );
    let short = o.short();
    assert_eq!(short.to_raw(), s);
    assert_eq!(short.pkt_fmt() as u64, fmt);
    assert_eq!(short.is_outer_ipv4() as u64, field(s, 2, 1));
    assert_eq!(short.is_outer_ipv6() as u64, field(s, 3, 1));
    assert_eq!(short.comp_iphdr_csum() as u64, field(s, 4, 1));
    assert_eq!(short.comp_tcp_csum() as u64, field(s, 5, 1));
    assert_eq!(short.comp_udp_csum() as u64, field(s, 6, 1));
    assert_eq!(short.suppress_txcqe_gen() as u64, field(s, 7, 1));
    assert_eq!(short.vcq_num() as u64, field(s, 8, 24));
    assert_eq!(short.trans_off() as u64, field(s, 32, 10));
    assert_eq!(short.vsq_frame() as u64, field(s, 42, 14));
    assert_eq!(short.short_vp_offset() as u64, field(s, 56, 8));
    match (o, fmt) {
        (TxInlineOob::Short(_), 0) => {
            assert_eq!(o.long(), None);
            assert_eq!(o.as_bytes(), &slot[..8]);
        }
        (TxInlineOob::Long(full), 1) => {
            assert_eq!(o.as_bytes(), slot);
            assert_eq!(full.as_bytes(), slot);
            let l = o.long().expect("long part");
            let lo = le64(slot, 8);
            assert_eq!(l.is_encap() as u64, field(lo, 0, 1));
            assert_eq!(l.inner_is_ipv6() as u64, field(lo, 1, 1));
            assert_eq!(l.inner_tcp_opt() as u64, field(lo, 2, 1));
            assert_eq!(l.inject_vlan_pri_tag() as u64, field(lo, 3, 1));
            assert_eq!(l.pcp() as u64, field(lo, 16, 3));
            assert_eq!(l.dei() as u64, field(lo, 19, 1));
            assert_eq!(l.vlan_id() as u64, field(lo, 20, 12));
            assert_eq!(l.inner_frame_offset() as u64, field(lo, 32, 10));
            assert_eq!(l.inner_ip_rel_offset() as u64, field(lo, 42, 6));
            assert_eq!(l.long_vp_offset() as u64, field(lo, 48, 12));
            // The 802.1Q TCI the device inserts: PCP, DEI, VID.
            assert_eq!(
                l.vlan_tci() as u64,
                field(lo, 16, 3) << 13 | field(lo, 19, 1) << 12 | field(lo, 20, 12)
            );
            assert_eq!(TxOob::decode(slot), Ok(full));
        }
        _ => panic!("format {fmt} decoded as {o:?}"),
    }
}

/// Builds OOBs with the encoders and checks the device decodes them back.
fn encoders(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let (cq, sq, vp) = (u32::arbitrary(u)?, u32::arbitrary(u)?, u32::arbitrary(u)?);
    let (cq, vp) = if bool::arbitrary(u)? {
        (cq & 0xff_ffff, vp & 0xff)
    } else {
        (cq, vp)
    };
    let short = match TxShortOob::for_queue(cq, sq, vp) {
        Err(e) => {
            let mut f = Vec::new();
            if cq > 0xff_ffff {
                f.push("vcq_num");
            }
            if vp > 0xff {
                f.push("short_vp_offset");
            }
            assert!(
                !f.is_empty(),
                "for_queue({cq:#x}, {sq:#x}, {vp}) refused: {e}"
            );
            assert_encode_err(&e, &f, &(cq, sq, vp));
            return Ok(());
        }
        Ok(s) => s,
    };
    assert!(cq <= 0xff_ffff && vp <= 0xff);
    assert_eq!(short.vcq_num(), cq);
    assert_eq!(short.short_vp_offset() as u32, vp);
    assert_eq!(short.vsq_frame() as u32, (sq >> 10) & 0x3fff);
    assert_eq!(short.vsq_frame(), vsq_frame(sq));
    assert_eq!(short.packet_format(), Ok(PacketFormat::Short));

    // Per-packet flags, as the TX path sets them.
    let f = u8::arbitrary(u)?;
    let trans_off = u16::arbitrary(u)? & 0x3ff;
    let short = short
        .with_is_outer_ipv4(f & 1 != 0)
        .with_is_outer_ipv6(f & 2 != 0)
        .with_comp_iphdr_csum(f & 4 != 0)
        .with_comp_tcp_csum(f & 8 != 0)
        .with_comp_udp_csum(f & 16 != 0)
        .with_suppress_txcqe_gen(f & 32 != 0)
        .with_trans_off(trans_off);
    assert_eq!(
        TxInlineOob::decode(short.as_bytes()),
        Ok(TxInlineOob::Short(short))
    );
    let mut padded = [0u8; 24];
    padded[..8].copy_from_slice(short.as_bytes());
    assert_eq!(TxInlineOob::decode(&padded), Ok(TxInlineOob::Short(short)));

    // The long format: VLAN insertion and a long vPort offset.
    let tci = u16::arbitrary(u)?;
    let long_vp = u16::arbitrary(u)? & 0xfff;
    let mut l = TxLongOob::new().with_long_vp_offset(long_vp);
    if f & 64 != 0 {
        l = l.with_vlan_tci(tci);
        assert_eq!(l.vlan_tci(), tci);
        assert!(l.inject_vlan_pri_tag());
    }
    let full = TxOob {
        s_oob: short.with_packet_format(PacketFormat::Long),
        l_oob: l,
    };
    let d = TxInlineOob::decode(full.as_bytes());
    assert_eq!(d, Ok(TxInlineOob::Long(full)));
    assert_eq!(d.unwrap().as_bytes(), full.as_bytes());
    // The same long OOB in an 8-byte slot is refused.
    assert_eq!(
        TxInlineOob::decode(&full.as_bytes()[..8]).map_err(|e| e.field()),
        Err(Some("pkt_fmt"))
    );
    // And a reserved bit anywhere in the long part is refused.
    let bit = u8::arbitrary(u)? % 128;
    let reserved = (4..16).contains(&bit) || bit >= 60;
    let mut bytes = [0u8; 24];
    bytes.copy_from_slice(full.as_bytes());
    bytes[8 + usize::from(bit / 8)] ^= 1 << (bit % 8);
    let r = TxInlineOob::decode(&bytes);
    assert_eq!(r.is_err(), reserved, "bit {bit} of the long OOB: {r:?}");
    if let Err(e) = r {
        assert!(matches!(e, DecodeError::ReservedNonZero { .. }), "{e}");
    }
    Ok(())
}
