//! Targets `wqe` and `wqe_write`: work queue entries as the device reads
//! them from a ring the driver wrote ([`read_wqe`]: header, inline OOB, SGEs
//! across the ring's end), and as the driver writes them ([`write_wqe`],
//! [`write_lso_wqe`]).

use arbitrary::{Arbitrary, Unstructured};
use gdma::{
    read_wqe, write_lso_wqe, write_wqe, Lso, Sge, TxInlineOob, WireType, WqType, WqeHeader,
};
use zerocopy::IntoBytes;

use crate::bits::{assert_decode_err, assert_encode_err, field, le32, le64};

const BU: usize = 32;

/// The limits of a queue type, from the reference: maximum inline OOB,
/// SGEs and WQE bytes.
fn limits(wq: WqType) -> (usize, usize, usize) {
    match wq {
        WqType::Sq => (24, 30, 512),
        WqType::Rq => (0, 15, 256),
    }
}

/// `align32(8 + slot + 16 * max(1, n))`.
fn wqe_bytes(slot: usize, n: usize) -> usize {
    (8 + slot + 16 * n.max(1)).div_ceil(BU) * BU
}

fn ring_len(u: &mut Unstructured<'_>) -> arbitrary::Result<usize> {
    Ok(if u8::arbitrary(u)? < 8 {
        // Mostly refused: not a power of two, or too small.
        usize::from(u16::arbitrary(u)? % 2048)
    } else {
        1 << (5 + u8::arbitrary(u)? % 8)
    })
}

fn wq_type(u: &mut Unstructured<'_>) -> arbitrary::Result<WqType> {
    Ok(if bool::arbitrary(u)? {
        WqType::Sq
    } else {
        WqType::Rq
    })
}

/// Target `wqe`: a ring of arbitrary bytes, read at an arbitrary position.
/// The bytes the fuzzer gives after the parameters land at the read
/// position, so short inputs shape the WQE wherever it starts.
pub fn check_read(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok((wq, len, pos)) = (|| -> arbitrary::Result<_> {
        let wq = wq_type(&mut u)?;
        let len = ring_len(&mut u)?;
        let pos = u32::arbitrary(&mut u)?;
        let pos = if u8::arbitrary(&mut u)? < 224 {
            pos & !31
        } else {
            pos
        };
        Ok((wq, len, pos))
    })() else {
        return;
    };
    let fill = u.take_rest();
    let mut ring = vec![0u8; len];
    if len > 0 {
        let start = pos as usize % len;
        for (j, &b) in fill.iter().take(len).enumerate() {
            ring[(start + j) % len] = b;
        }
    }
    read_one(&ring, pos, wq);
}

/// What the reference finds wrong with the WQE at `pos`, or `None` if the
/// ring itself is refused (with the field that says why).
fn reference_wrong(ring: &[u8], pos: u32, wq: WqType) -> Result<Vec<&'static str>, &'static str> {
    let len = ring.len();
    if !len.is_power_of_two() || len < BU {
        return Err("ring length");
    }
    if pos % BU as u32 != 0 {
        return Err("position");
    }
    let start = pos as usize & (len - 1);
    let h = le64(ring, start);
    let mut header = Vec::new();
    if field(h, 0, 24) != 0 {
        header.push("reserved");
    }
    if field(h, 44, 4) != 0 {
        header.push("reserved1");
    }
    if field(h, 62, 2) != 0 {
        header.push("reserved2");
    }
    let div4 = field(h, 40, 3);
    if div4 != 2 && div4 != 6 {
        header.push("inline_oob_size_div4");
    }
    if !header.is_empty() {
        // The header is refused before anything it describes is read.
        return Ok(header);
    }
    let (last_vbytes, n, in_sgl, cdu) = (
        field(h, 24, 8),
        field(h, 32, 8) as usize,
        field(h, 43, 1) == 1,
        field(h, 48, 14),
    );
    let slot = div4 as usize * 4;
    let (_, max_sge, max_bytes) = limits(wq);
    let mut wrong = Vec::new();
    if in_sgl {
        if wq == WqType::Rq || cdu == 0 {
            wrong.push("client_oob_in_sgl");
        }
        if n < 2 {
            wrong.push("num_sge");
        }
        let sge0_size = le32(ring, (start + 8 + slot + 12) & (len - 1)) as u64;
        if last_vbytes == 0 || last_vbytes != sge0_size {
            wrong.push("last_vbytes");
        }
    } else {
        if cdu != 0 {
            wrong.push("client_data_unit");
        }
        if last_vbytes != 0 {
            wrong.push("last_vbytes");
        }
    }
    if n > max_sge {
        wrong.push("num_sge");
    }
    let size = wqe_bytes(slot, n);
    if size > max_bytes || size > len {
        wrong.push("wqe_size");
    }
    if wq == WqType::Rq {
        if slot != 8 {
            wrong.push("inline_oob_size_div4");
        }
        if ring[start + 8..start + 8 + slot].iter().any(|&b| b != 0) {
            wrong.push("inline_oob");
        }
    }
    Ok(wrong)
}

fn read_one(ring: &[u8], pos: u32, wq: WqType) {
    let len = ring.len();
    let r = read_wqe(ring, pos, wq);
    let wrong = match reference_wrong(ring, pos, wq) {
        Err(why) => {
            let e = r.expect_err("a ring or position the reference refuses was read");
            assert_eq!(e.field(), Some(why), "{e}");
            return;
        }
        Ok(w) => w,
    };
    let what = match wq {
        WqType::Sq => "SQ WQE",
        WqType::Rq => "RQ WQE",
    };
    let v = match r {
        Err(e) => {
            let what = if e.to_string().starts_with("gdma_wqe") {
                "gdma_wqe"
            } else {
                what
            };
            assert_decode_err(&e, what, &wrong, &(pos, wq));
            assert!(!wrong.is_empty(), "refused a good WQE: {e}");
            return;
        }
        Ok(v) => v,
    };
    assert!(wrong.is_empty(), "accepted a WQE with {wrong:?} wrong");
    let start = pos as usize & (len - 1);
    let mask = len - 1;
    let h = le64(ring, start);
    assert_eq!(v.header.to_raw(), h);
    let n = field(h, 32, 8) as usize;
    let slot = field(h, 40, 3) as usize * 4;
    assert_eq!(v.num_sge(), n);
    assert_eq!(v.size_bu() as usize * BU, wqe_bytes(slot, n));
    assert_eq!(v.inline_oob(), &ring[start + 8..start + 8 + slot]);
    let sges: Vec<Sge> = v.sges().collect();
    assert_eq!(sges.len(), n);
    for (i, s) in sges.iter().enumerate() {
        let p = (start + 8 + slot + 16 * i) & mask;
        assert_eq!(s.as_bytes(), &ring[p..p + 16], "SGE {i}");
        assert_eq!(v.sge(i), Some(*s));
    }
    assert_eq!(v.sge(n), None);
    let lso = (field(h, 43, 1) == 1).then(|| Lso {
        mss: field(h, 48, 14) as u16,
        header_len: field(h, 24, 8) as u8,
    });
    assert_eq!(v.lso(), lso);
    // The doorbell's running position: the same WQE one ring further on.
    if let Ok(l) = u32::try_from(len) {
        let again = read_wqe(ring, pos.wrapping_add(l), wq).expect("same WQE a lap later");
        assert_eq!(again.header, v.header);
    }
    if wq == WqType::Sq {
        // The device decodes the OOB next; see the `tx_oob` target.
        let _ = TxInlineOob::decode(v.inline_oob());
    }

    // Written again by the driver's encoder, the fields the device read come
    // out as the same bytes, and nothing outside the WQE changes.
    let mut again = vec![0xa5u8; len];
    let oob = match wq {
        WqType::Sq => v.inline_oob(),
        WqType::Rq => &[][..],
    };
    let bu = match lso {
        Some(l) => write_lso_wqe(&mut again, pos / BU as u32, oob, &sges, l.mss.into()),
        None => write_wqe(&mut again, pos / BU as u32, wq, oob, &sges, 0),
    }
    .unwrap_or_else(|e| panic!("a WQE the device accepts cannot be written: {e}"));
    assert_eq!(bu, v.size_bu());
    assert_eq!(
        &again[start..start + 8 + slot],
        &ring[start..start + 8 + slot]
    );
    for i in 0..n {
        let p = (start + 8 + slot + 16 * i) & mask;
        assert_eq!(&again[p..p + 16], &ring[p..p + 16]);
    }
    let size = wqe_bytes(slot, n);
    for k in size..len {
        assert_eq!(again[(start + k) & mask], 0xa5, "byte {k} past the WQE");
    }
}

/// An SGE from structured input.
fn sge(u: &mut Unstructured<'_>) -> arbitrary::Result<Sge> {
    Ok(Sge::new(
        u64::arbitrary(u)?,
        u32::arbitrary(u)?,
        u32::arbitrary(u)?,
    ))
}

/// Target `wqe_write`: the driver's encoders given any OOB, SGL, MSS, ring
/// and position. They refuse exactly what the reference says the device
/// would refuse, leave the ring untouched when they do, and otherwise write
/// a WQE the device reads back field for field.
pub fn check_write(data: &[u8]) {
    let _ = write_one(&mut Unstructured::new(data));
}

fn write_one(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let wq = wq_type(u)?;
    let len = ring_len(u)?;
    let head_bu = u32::arbitrary(u)?;
    let oob_len = usize::from(u8::arbitrary(u)? % 32);
    let oob: Vec<u8> = (0..oob_len)
        .map(|_| u8::arbitrary(u))
        .collect::<Result<_, _>>()?;
    let n = usize::from(u8::arbitrary(u)? % 34);
    let lso = bool::arbitrary(u)?;
    let mut sges = Vec::with_capacity(n);
    for i in 0..n {
        let mut s = sge(u)?;
        // Realistic sizes often: a header SGE (LSO wants 1..=255).
        if i == 0 && lso && bool::arbitrary(u)? {
            s = Sge::new(s.address(), s.mem_key(), s.size() % 300);
        }
        sges.push(s);
    }
    let cdu = match u8::arbitrary(u)? % 4 {
        0 => u32::arbitrary(u)?,
        1 => u32::from(u16::arbitrary(u)? % 0x4001),
        _ => {
            if lso {
                1448
            } else {
                0
            }
        }
    };
    let fill = u8::arbitrary(u)?;
    let mut ring = vec![fill; len];
    // The LSO writer writes send queues only.
    let wq = if lso { WqType::Sq } else { wq };

    // The reference: every reason to refuse.
    let (max_oob, max_sge, max_bytes) = limits(wq);
    let slot = if oob_len > 8 { 24 } else { 8 };
    let size = wqe_bytes(slot, n);
    let mut wrong = Vec::new();
    if oob_len > max_oob {
        wrong.push("inline_oob_size");
    }
    if n > max_sge {
        wrong.push("num_sge");
    } else if size > max_bytes {
        wrong.push("wqe_size");
    }
    if !len.is_power_of_two() || len < BU || len < size {
        wrong.push("ring length");
    }
    let r = if lso {
        let hdr = sges.first().map_or(0, |s| s.size());
        if n < 2 {
            wrong.push("num_sge");
        }
        if cdu == 0 || cdu > 0x3fff {
            wrong.push("client_data_unit");
        }
        if hdr == 0 || hdr > 255 {
            wrong.push("last_vbytes");
        }
        write_lso_wqe(&mut ring, head_bu, &oob, &sges, cdu)
    } else {
        if cdu != 0 {
            wrong.push("client_data_unit");
        }
        write_wqe(&mut ring, head_bu, wq, &oob, &sges, cdu)
    };
    match r {
        Err(e) => {
            assert!(
                !wrong.is_empty(),
                "refused ({e}): {wq:?} oob {oob_len} sges {n} cdu {cdu} ring {len}"
            );
            assert_encode_err(&e, &wrong, &(wq, oob_len, n, cdu, len));
            assert!(
                ring.iter().all(|&b| b == fill),
                "a refused WQE changed the ring"
            );
        }
        Ok(bu) => {
            assert!(
                wrong.is_empty(),
                "accepted with {wrong:?} wrong: {wq:?} oob {oob_len} sges {n} cdu {cdu} ring {len}"
            );
            assert_eq!(bu as usize * BU, size);
            let pos = head_bu.wrapping_mul(BU as u32);
            let v = read_wqe(&ring, pos, wq)
                .unwrap_or_else(|e| panic!("the device refuses what the driver wrote: {e}"));
            assert_eq!(v.size_bu(), bu);
            assert_eq!(v.sges().collect::<Vec<_>>(), sges);
            let mut want_oob = oob.clone();
            want_oob.resize(slot, 0);
            assert_eq!(v.inline_oob(), &want_oob[..]);
            let want_lso = lso.then(|| Lso {
                mss: cdu as u16,
                header_len: sges[0].size() as u8,
            });
            assert_eq!(v.lso(), want_lso);
            assert_eq!(
                WqeHeader::decode(v.header.as_bytes()),
                Ok(v.header),
                "header"
            );
            let mask = len - 1;
            let start = pos as usize & mask;
            if n == 0 {
                let p = (start + 8 + slot) & mask;
                assert_eq!(&ring[p..p + 16], Sge::DUMMY.as_bytes());
            }
            let used = 8 + slot + 16 * n.max(1);
            for k in used..size {
                assert_eq!(ring[(start + k) & mask], 0, "padding byte {k}");
            }
            for k in size..len {
                assert_eq!(ring[(start + k) & mask], fill, "byte {k} past the WQE");
            }
        }
    }
    Ok(())
}
