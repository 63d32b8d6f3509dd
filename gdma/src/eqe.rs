//! Event queue entries (`struct gdma_eqe`, 16 bytes): completion events
//! naming a CQ, test events, and the events that hand the hardware channel's
//! parameters to the driver while the HWC is being established.
//!
//! EQs use the CQ owner-bit protocol ([`owner_bits`](crate::owner_bits)):
//! the producer index starts at the entry count, the owner bits of an entry
//! are `(index / count) & 7`, and the info dword is written last.

use bitfield_struct::bitfield;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::error::{check_bits, mbz};
use crate::le::U32;
use crate::{assert_size, DecodeError, EncodeError, WireType, EQE_SIZE};

/// Event types (`enum gdma_eqe_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(non_camel_case_types)]
pub enum EqeType {
    /// A CQ has completions (`details[0]` = CQ id).
    GDMA_EQE_COMPLETION = 3,
    /// Answer to `GDMA_GENERATE_TEST_EQE`.
    GDMA_EQE_TEST_EVENT = 64,
    /// HWC setup: EQ id and doorbell page ([`HwcInitEqIdDb`]).
    GDMA_EQE_HWC_INIT_EQ_ID_DB = 129,
    /// HWC setup: one parameter ([`HwcInitTypeData`]).
    GDMA_EQE_HWC_INIT_DATA = 130,
    /// HWC setup finished.
    GDMA_EQE_HWC_INIT_DONE = 131,
    /// HWC reconfiguration.
    GDMA_EQE_HWC_SOC_RECONFIG = 132,
    /// HWC reconfiguration data.
    GDMA_EQE_HWC_SOC_RECONFIG_DATA = 133,
    /// Service reset (`GDMA_EQE_HWC_RESET_REQUEST`): kernels that handle it
    /// (`mana_serv_reset`, 2025) suspend the function, wait 10 s and
    /// resume it; 6.12 ignores it.
    GDMA_EQE_HWC_RESET_REQUEST = 135,
    /// An RC QP failed (RDMA).
    GDMA_EQE_RNIC_QP_FATAL = 176,
}

impl EqeType {
    /// The type for a raw value, if defined.
    pub fn from_raw(v: u8) -> Option<Self> {
        use EqeType::*;
        [
            GDMA_EQE_COMPLETION,
            GDMA_EQE_TEST_EVENT,
            GDMA_EQE_HWC_INIT_EQ_ID_DB,
            GDMA_EQE_HWC_INIT_DATA,
            GDMA_EQE_HWC_INIT_DONE,
            GDMA_EQE_HWC_SOC_RECONFIG,
            GDMA_EQE_HWC_SOC_RECONFIG_DATA,
            GDMA_EQE_HWC_RESET_REQUEST,
            GDMA_EQE_RNIC_QP_FATAL,
        ]
        .into_iter()
        .find(|t| *t as u8 == v)
    }
}

/// The EQE info dword at byte 12 (`union gdma_eqe_info`).
#[bitfield(u32, repr = U32, from = U32::new, into = U32::get)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned, PartialEq, Eq)]
pub struct EqeInfo {
    /// [`EqeType`] (bits 0-7).
    #[bits(8)]
    pub ty: u8,
    /// Must be zero (bits 8-15).
    #[bits(8)]
    pub reserved1: u8,
    /// Client id (bits 16-17).
    #[bits(2)]
    pub client_id: u8,
    /// Must be zero (bits 18-28).
    #[bits(11)]
    pub reserved2: u16,
    /// Phase (bits 29-31).
    #[bits(3)]
    pub owner_bits: u8,
}
assert_size!(EqeInfo, 4);

impl EqeInfo {
    /// Builds the info dword of an event; fails if `owner` exceeds 3 bits.
    pub fn try_new(ty: EqeType, owner: u8) -> Result<Self, EncodeError> {
        let ow = check_bits(Self::NAME, "owner_bits", owner as u64, 3)? as u8;
        Ok(Self::new().with_ty(ty as u8).with_owner_bits(ow))
    }
    /// The raw dword.
    pub const fn to_raw(self) -> u32 {
        self.0.get()
    }
}

impl WireType for EqeInfo {
    const NAME: &'static str = "gdma_eqe.eqe_info";
    fn validate(&self) -> Result<(), DecodeError> {
        mbz(Self::NAME, "reserved1", self.reserved1() as u64)?;
        mbz(Self::NAME, "reserved2", self.reserved2() as u64)?;
        if EqeType::from_raw(self.ty()).is_none() {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "type",
                value: self.ty() as u64,
                expected: "a gdma_eqe_type",
            });
        }
        Ok(())
    }
}

/// A 16-byte event queue entry (`struct gdma_eqe`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned,
)]
#[repr(C)]
pub struct Eqe {
    /// Event data (`details[3]`).
    pub details: [U32; 3],
    /// Type and owner bits.
    pub info: EqeInfo,
}
assert_size!(Eqe, EQE_SIZE);

impl Eqe {
    /// Byte offset of the info dword (written last).
    pub const INFO_OFFSET: usize = 12;

    /// An event with its first detail dword.
    pub fn new(ty: EqeType, detail0: u32, owner: u8) -> Result<Self, EncodeError> {
        let mut e = Self::new_zeroed();
        e.details[0] = U32::new(detail0);
        e.info = EqeInfo::try_new(ty, owner)?;
        Ok(e)
    }
}

impl WireType for Eqe {
    const NAME: &'static str = "gdma_eqe";
    fn validate(&self) -> Result<(), DecodeError> {
        self.info.validate()
    }
}

/// `details[0]` of a `GDMA_EQE_HWC_INIT_EQ_ID_DB` event
/// (`union hwc_init_eq_id_db`).
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct HwcInitEqIdDb {
    /// The HWC EQ's id (bits 0-15).
    #[bits(16)]
    pub eq_id: u16,
    /// The HWC's doorbell page (bits 16-31).
    #[bits(16)]
    pub doorbell: u16,
}

/// `details[0]` of a `GDMA_EQE_HWC_INIT_DATA` or `..._SOC_RECONFIG_DATA`
/// event (`union hwc_init_type_data`).
#[bitfield(u32)]
#[derive(PartialEq, Eq)]
pub struct HwcInitTypeData {
    /// The parameter's value (bits 0-23).
    #[bits(24)]
    pub value: u32,
    /// A [`HwcInitData`] (bits 24-31).
    #[bits(8)]
    pub ty: u8,
}

impl HwcInitTypeData {
    /// One parameter; fails if `value` exceeds 24 bits.
    pub fn try_new(ty: HwcInitData, value: u32) -> Result<Self, EncodeError> {
        let v = check_bits("hwc_init_type_data", "value", value as u64, 24)? as u32;
        Ok(Self::new().with_ty(ty as u8).with_value(v))
    }
}

/// HWC parameters (`HWC_INIT_DATA_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
#[allow(missing_docs, non_camel_case_types)]
pub enum HwcInitData {
    HWC_INIT_DATA_CQID = 1,
    HWC_INIT_DATA_RQID = 2,
    HWC_INIT_DATA_SQID = 3,
    HWC_INIT_DATA_QUEUE_DEPTH = 4,
    HWC_INIT_DATA_MAX_REQUEST = 5,
    HWC_INIT_DATA_MAX_RESPONSE = 6,
    HWC_INIT_DATA_MAX_NUM_CQS = 7,
    HWC_INIT_DATA_PDID = 8,
    HWC_INIT_DATA_GPA_MKEY = 9,
    HWC_INIT_DATA_PF_DEST_RQ_ID = 10,
    HWC_INIT_DATA_PF_DEST_CQ_ID = 11,
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn golden_eqe() {
        let e = Eqe::new(EqeType::GDMA_EQE_COMPLETION, 0x12_3456, 5).unwrap();
        assert_eq!(
            e.as_bytes(),
            &[0x56, 0x34, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x03, 0, 0, 0xa0]
        );
        assert_eq!(Eqe::decode(e.as_bytes()).unwrap(), e);
        let mut b = e.as_bytes().to_vec();
        b[12] = 200;
        assert_eq!(Eqe::decode(&b).unwrap_err().field(), Some("type"));
        let mut b = e.as_bytes().to_vec();
        b[13] = 1;
        assert_eq!(Eqe::decode(&b).unwrap_err().field(), Some("reserved1"));
        assert!(EqeInfo::try_new(EqeType::GDMA_EQE_TEST_EVENT, 8).is_err());
    }

    #[test]
    fn golden_init_data() {
        assert_eq!(
            HwcInitEqIdDb::new()
                .with_eq_id(3)
                .with_doorbell(7)
                .into_bits(),
            0x0007_0003
        );
        let d = HwcInitTypeData::try_new(HwcInitData::HWC_INIT_DATA_MAX_REQUEST, 0x1000).unwrap();
        assert_eq!(d.into_bits(), 0x0500_1000);
        assert!(HwcInitTypeData::try_new(HwcInitData::HWC_INIT_DATA_PDID, 1 << 24).is_err());
        for v in 0..=255u8 {
            assert_eq!(
                EqeType::from_raw(v).map(|t| t as u8),
                EqeType::from_raw(v).map(|_| v)
            );
        }
        assert_eq!(
            EqeType::from_raw(129),
            Some(EqeType::GDMA_EQE_HWC_INIT_EQ_ID_DB)
        );
    }
}
