//! Target `eqe`: event queue entries as the driver side reads them (any 16
//! bytes as `gdma_eqe`), then events built by the encoders, and the HWC
//! setup events' detail words.

use arbitrary::{Arbitrary, Unstructured};
use gdma::{Eqe, EqeInfo, EqeType, HwcInitData, HwcInitTypeData, WireType, EQE_SIZE};
use zerocopy::IntoBytes;

use crate::bits::{assert_decode_err, assert_encode_err, field, le32, padded};

/// The `gdma_eqe_type` values (Linux `include/net/mana/gdma.h`).
const TYPES: [u8; 9] = [3, 64, 129, 130, 131, 132, 133, 135, 176];

/// Decodes the bytes as an EQE, then runs the encoders on what follows.
pub fn check(data: &[u8]) {
    decode(data);
    let _ = encoders(&mut Unstructured::new(data));
}

fn decode(data: &[u8]) {
    let r = Eqe::decode(data);
    if data.len() < EQE_SIZE {
        let e = r.expect_err("a short EQE accepted");
        assert_decode_err(&e, "gdma_eqe", &["length"], &data);
        return;
    }
    let b: [u8; EQE_SIZE] = padded(data);
    let info = u64::from(le32(&b, 12));
    let ty = field(info, 0, 8) as u8;
    let mut wrong = Vec::new();
    if field(info, 8, 8) != 0 {
        wrong.push("reserved1");
    }
    if field(info, 18, 11) != 0 {
        wrong.push("reserved2");
    }
    if !TYPES.contains(&ty) {
        wrong.push("type");
    }
    match r {
        Ok(e) => {
            assert!(
                wrong.is_empty(),
                "EQE accepted with {wrong:?} wrong: {b:02x?}"
            );
            assert_eq!(e.info.ty(), ty);
            assert_eq!(u64::from(e.info.client_id()), field(info, 16, 2));
            assert_eq!(u64::from(e.info.owner_bits()), field(info, 29, 3));
            for i in 0..3 {
                assert_eq!(e.details[i].get(), le32(&b, 4 * i));
            }
            assert_eq!(EqeType::from_raw(ty).map(|t| t as u8), Some(ty));
            assert_eq!(e.as_bytes(), &b[..], "decode/encode is not the identity");
        }
        Err(e) => {
            assert!(!wrong.is_empty(), "valid EQE refused ({e}): {b:02x?}");
            assert_decode_err(&e, "gdma_eqe", &wrong, &b);
        }
    }
    // Every type the decoder accepts, and only those, has a name.
    for v in 0..=u8::MAX {
        assert_eq!(
            EqeType::from_raw(v).is_some(),
            TYPES.contains(&v),
            "type {v}"
        );
    }
}

fn encoders(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let ty = EqeType::from_raw(TYPES[usize::from(u8::arbitrary(u)?) % TYPES.len()]).unwrap();
    let owner = u8::arbitrary(u)?;
    let detail = u32::arbitrary(u)?;
    match Eqe::new(ty, detail, owner) {
        Ok(e) => {
            assert!(owner < 8, "owner {owner} accepted");
            let back = Eqe::decode(e.as_bytes()).expect("an encoded EQE decodes");
            assert_eq!(back.info.ty(), ty as u8);
            assert_eq!(back.info.owner_bits(), owner);
            assert_eq!(back.details[0].get(), detail);
            assert_eq!((back.details[1].get(), back.details[2].get()), (0, 0));
        }
        Err(e) => {
            assert!(owner >= 8, "owner {owner} refused: {e}");
            assert_encode_err(&e, &["owner_bits"], &owner);
        }
    }
    match EqeInfo::try_new(ty, owner) {
        Ok(i) => assert_eq!(i.to_raw(), u32::from(ty as u8) | u32::from(owner) << 29),
        Err(e) => assert_encode_err(&e, &["owner_bits"], &owner),
    }
    // HWC setup parameters: 24-bit values.
    let kinds = [
        HwcInitData::HWC_INIT_DATA_CQID,
        HwcInitData::HWC_INIT_DATA_RQID,
        HwcInitData::HWC_INIT_DATA_SQID,
        HwcInitData::HWC_INIT_DATA_QUEUE_DEPTH,
        HwcInitData::HWC_INIT_DATA_MAX_REQUEST,
        HwcInitData::HWC_INIT_DATA_MAX_RESPONSE,
        HwcInitData::HWC_INIT_DATA_MAX_NUM_CQS,
        HwcInitData::HWC_INIT_DATA_PDID,
        HwcInitData::HWC_INIT_DATA_GPA_MKEY,
        HwcInitData::HWC_INIT_DATA_PF_DEST_RQ_ID,
        HwcInitData::HWC_INIT_DATA_PF_DEST_CQ_ID,
    ];
    let kind = kinds[usize::from(u8::arbitrary(u)?) % kinds.len()];
    let value = u32::arbitrary(u)?;
    match HwcInitTypeData::try_new(kind, value) {
        Ok(d) => {
            assert!(value < 1 << 24, "value {value:#x} accepted");
            let raw: u32 = d.into();
            assert_eq!(raw, value | u32::from(kind as u8) << 24);
        }
        Err(e) => {
            assert!(value >= 1 << 24, "value {value:#x} refused: {e}");
            assert_encode_err(&e, &["value"], &value);
        }
    }
    Ok(())
}
