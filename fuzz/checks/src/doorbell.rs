//! Target `doorbell`: doorbell writes as the device decodes them (64-bit
//! SQ/RQ/CQ/EQ values and the 32-bit short forms, by offset in the doorbell
//! page), then doorbells built by the driver's encoders.

use arbitrary::{Arbitrary, Unstructured};
use gdma::{
    CqDoorbell, Doorbell, EqDoorbell, RqDoorbell, ShortCqDoorbell, ShortDoorbell, ShortWqDoorbell,
    SqDoorbell, WireType, DOORBELL_OFFSET_CQ, DOORBELL_OFFSET_EQ, DOORBELL_OFFSET_RQ,
    DOORBELL_OFFSET_SQ, DOORBELL_SHORT_OFFSET_CQ, DOORBELL_SHORT_OFFSET_EQ,
    DOORBELL_SHORT_OFFSET_RQ, DOORBELL_SHORT_OFFSET_SQ,
};

use crate::bits::{assert_decode_err, assert_encode_err, field, mask};

const OFFSETS: [usize; 8] = [
    DOORBELL_OFFSET_SQ,
    DOORBELL_OFFSET_RQ,
    DOORBELL_OFFSET_CQ,
    DOORBELL_OFFSET_EQ,
    DOORBELL_SHORT_OFFSET_SQ,
    DOORBELL_SHORT_OFFSET_RQ,
    DOORBELL_SHORT_OFFSET_CQ,
    DOORBELL_SHORT_OFFSET_EQ,
];

/// Decodes one write read from `data`, then runs the encoders.
pub fn check(data: &[u8]) {
    let mut u = Unstructured::new(data);
    if let Ok((offset, value)) = write(&mut u) {
        decode64(offset, value);
        decode32(offset, value as u32);
    }
    let _ = encoders(&mut u);
}

fn write(u: &mut Unstructured<'_>) -> arbitrary::Result<(usize, u64)> {
    let sel = u8::arbitrary(u)?;
    let offset = if sel < 0xf0 {
        OFFSETS[usize::from(sel) % OFFSETS.len()]
    } else {
        usize::from(u16::arbitrary(u)?)
    };
    Ok((offset, u64::arbitrary(u)?))
}

/// (reserved bit mask, id width, tail width, arm bit?) of a 64-bit doorbell.
fn layout64(offset: usize) -> Option<(u64, u32, u32, bool)> {
    Some(match offset {
        DOORBELL_OFFSET_SQ => (mask(8) << 24, 24, 32, false),
        DOORBELL_OFFSET_RQ => (0, 24, 32, false),
        DOORBELL_OFFSET_CQ => (mask(8) << 24, 24, 31, true),
        DOORBELL_OFFSET_EQ => (mask(16) << 16, 16, 31, true),
        _ => return None,
    })
}

fn decode64(offset: usize, v: u64) {
    let r = Doorbell::decode(offset, v);
    let Some((reserved, id_bits, tail_bits, arm)) = layout64(offset) else {
        let e = r.expect_err("a 64-bit doorbell at an unknown offset accepted");
        assert_decode_err(&e, "doorbell page", &["offset"], &offset);
        return;
    };
    let d = match r {
        Err(e) => {
            assert_ne!(
                v & reserved,
                0,
                "doorbell {v:#x} at {offset:#x} refused: {e}"
            );
            assert_decode_err(&e, "gdma_doorbell_entry", &["reserved"], &v);
            return;
        }
        Ok(d) => d,
    };
    assert_eq!(
        v & reserved,
        0,
        "reserved bits accepted: {v:#x} at {offset:#x}"
    );
    assert_eq!(d.offset(), offset);
    assert_eq!(d.to_raw(), v);
    assert_eq!(d.id() as u64, field(v, 0, id_bits));
    let (tail, armed) = match d {
        Doorbell::Sq(s) => {
            assert_eq!(SqDoorbell::decode(&v.to_le_bytes()), Ok(s));
            (s.tail_ptr(), false)
        }
        Doorbell::Rq(q) => {
            assert_eq!(q.wqe_cnt() as u64, field(v, 24, 8));
            assert_eq!(q.validate_strict().is_ok(), field(v, 24, 8) == 0);
            (q.tail_ptr(), false)
        }
        Doorbell::Cq(c) => (c.tail_ptr(), c.arm()),
        Doorbell::Eq(e) => (e.tail_ptr(), e.arm()),
    };
    assert_eq!(tail as u64, field(v, 32, tail_bits));
    assert_eq!(armed, arm && field(v, 63, 1) == 1);
}

fn decode32(offset: usize, v: u32) {
    let r = ShortDoorbell::decode(offset, v);
    let v64 = u64::from(v);
    let (reserved, cq) = match offset {
        DOORBELL_SHORT_OFFSET_SQ | DOORBELL_SHORT_OFFSET_RQ => (mask(4) << 28, false),
        DOORBELL_SHORT_OFFSET_CQ | DOORBELL_SHORT_OFFSET_EQ => (mask(3) << 28, true),
        _ => {
            let e = r.expect_err("a short doorbell at an unknown offset accepted");
            assert_decode_err(&e, "doorbell page", &["offset"], &offset);
            return;
        }
    };
    let d = match r {
        Err(e) => {
            assert_ne!(v64 & reserved, 0, "short doorbell {v:#x} refused: {e}");
            assert_decode_err(&e, "gdma_short_doorbell_entry", &["reserved"], &v);
            return;
        }
        Ok(d) => d,
    };
    assert_eq!(
        v64 & reserved,
        0,
        "reserved bits accepted: {v:#x} at {offset:#x}"
    );
    assert_eq!((d.offset(), d.to_raw()), (offset, v));
    let (incr, id, arm) = match d {
        ShortDoorbell::Sq(w) | ShortDoorbell::Rq(w) => {
            assert!(!cq);
            (w.tail_ptr_incr(), w.id(), false)
        }
        ShortDoorbell::Cq(c) | ShortDoorbell::Eq(c) => {
            assert!(cq);
            (c.tail_ptr_incr(), c.id(), c.arm())
        }
    };
    assert_eq!(incr as u64, field(v64, 0, 16));
    assert_eq!(id as u64, field(v64, 16, 12));
    assert_eq!(arm, cq && field(v64, 31, 1) == 1);
}

/// A value that often fits `bits` and sometimes does not.
fn value(u: &mut Unstructured<'_>, bits: u32) -> arbitrary::Result<u32> {
    let v = u32::arbitrary(u)?;
    Ok(if bool::arbitrary(u)? {
        (v as u64 & mask(bits)) as u32
    } else {
        v
    })
}

/// Expects `r` to succeed exactly when every `(value, width, field)` fits.
fn expect_fit<T>(
    r: Result<T, gdma::EncodeError>,
    fields: &[(u32, u32, &'static str)],
) -> Option<T> {
    let over: Vec<&str> = fields
        .iter()
        .filter(|(v, w, _)| u64::from(*v) > mask(*w))
        .map(|f| f.2)
        .collect();
    match r {
        Ok(d) => {
            assert!(over.is_empty(), "accepted with {over:?} too wide");
            Some(d)
        }
        Err(e) => {
            assert!(!over.is_empty(), "refused: {e}");
            assert_encode_err(&e, &over, &fields);
            None
        }
    }
}

fn encoders(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let id = value(u, 24)?;
    let tail = value(u, 31)?;
    let arm = bool::arbitrary(u)?;
    let head = u32::arbitrary(u)?;

    if let Some(d) = expect_fit(SqDoorbell::try_new(id, tail), &[(id, 24, "id")]) {
        assert_eq!(d.to_raw(), u64::from(tail) << 32 | u64::from(id));
        assert_eq!(
            Doorbell::decode(SqDoorbell::OFFSET, d.to_raw()),
            Ok(Doorbell::Sq(d))
        );
        let h = SqDoorbell::for_head_bu(id, head).unwrap();
        assert_eq!(h.tail_ptr(), head.wrapping_mul(32));
    }
    if let Some(d) = expect_fit(RqDoorbell::try_new(id, tail), &[(id, 24, "id")]) {
        assert_eq!(d.wqe_cnt(), 0);
        assert_eq!(d.validate_strict(), Ok(()));
        assert_eq!(
            Doorbell::decode(RqDoorbell::OFFSET, d.to_raw()),
            Ok(Doorbell::Rq(d))
        );
        let h = RqDoorbell::for_head_bu(id, head).unwrap();
        assert_eq!(h.tail_ptr(), head.wrapping_mul(32));
    }
    let fields = [(id, 24, "id"), (tail, 31, "tail_ptr")];
    if let Some(d) = expect_fit(CqDoorbell::try_new(id, tail, arm), &fields) {
        assert_eq!(
            d.to_raw(),
            u64::from(arm) << 63 | u64::from(tail) << 32 | u64::from(id)
        );
        assert_eq!(
            Doorbell::decode(CqDoorbell::OFFSET, d.to_raw()),
            Ok(Doorbell::Cq(d))
        );
    }
    let fields = [(id, 16, "id"), (tail, 31, "tail_ptr")];
    if let Some(d) = expect_fit(EqDoorbell::try_new(id, tail, arm), &fields) {
        assert_eq!(
            Doorbell::decode(EqDoorbell::OFFSET, d.to_raw()),
            Ok(Doorbell::Eq(d))
        );
        assert_eq!(d.id() as u32, id);
    }

    // The CQ arm doorbell the RX/TX paths ring: tail = head mod 8 * count.
    let count = u32::arbitrary(u)?;
    let r = CqDoorbell::arm_at(id, head, count);
    if count == 0 {
        let e = r.expect_err("arm_at a CQ of 0 entries");
        assert_encode_err(&e, &["count"], &(id, head, count));
    } else {
        let t = u64::from(head) % (u64::from(count) * 8);
        let fields = [
            (id, 24, "id"),
            (t.min(u32::MAX.into()) as u32, 31, "tail_ptr"),
        ];
        if let Some(d) = expect_fit(r, &fields) {
            assert!(d.arm());
            assert_eq!(u64::from(d.tail_ptr()), t);
        }
    }

    // Short doorbells.
    let sid = value(u, 12)?;
    let inc = value(u, 16)?;
    let fields = [(sid, 12, "id"), (inc, 16, "tail_ptr_incr")];
    if let Some(d) = expect_fit(ShortWqDoorbell::try_new(sid, inc), &fields) {
        for off in [DOORBELL_SHORT_OFFSET_SQ, DOORBELL_SHORT_OFFSET_RQ] {
            let got = ShortDoorbell::decode(off, d.to_raw()).unwrap();
            assert_eq!((got.offset(), got.to_raw()), (off, d.to_raw()));
        }
        assert_eq!(ShortWqDoorbell::decode(&d.to_raw().to_le_bytes()), Ok(d));
    }
    if let Some(d) = expect_fit(ShortCqDoorbell::try_new(sid, inc, arm), &fields) {
        assert_eq!(d.arm(), arm);
        for off in [DOORBELL_SHORT_OFFSET_CQ, DOORBELL_SHORT_OFFSET_EQ] {
            let got = ShortDoorbell::decode(off, d.to_raw()).unwrap();
            assert_eq!((got.offset(), got.to_raw()), (off, d.to_raw()));
        }
    }
    Ok(())
}
