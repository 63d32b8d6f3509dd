//! Doorbells: 64-bit values written to the doorbell page (`union
//! gdma_doorbell_entry`) and the 32-bit "short" form used on 32-bit hosts.

use crate::error::{check_bits, mbz};
use crate::le::{U32, U64};
use crate::{
    wire_type, DecodeError, EncodeError, WireType, DOORBELL_OFFSET_CQ, DOORBELL_OFFSET_EQ,
    DOORBELL_OFFSET_RQ, DOORBELL_OFFSET_SQ, DOORBELL_SHORT_OFFSET_CQ, DOORBELL_SHORT_OFFSET_EQ,
    DOORBELL_SHORT_OFFSET_RQ, DOORBELL_SHORT_OFFSET_SQ, WQE_BU_SIZE,
};

/// What the 64-bit doorbells add to their raw conversions: the register's
/// offset and a validating decode.
macro_rules! db64_common {
    ($t:ident, $off:expr) => {
        impl $t {
            /// Offset of this doorbell in the doorbell page.
            pub const OFFSET: usize = $off;
            /// Reinterprets and validates a raw register value.
            #[inline]
            pub fn decode_raw(v: u64) -> Result<Self, DecodeError> {
                let d = Self::from_raw(v);
                d.validate()?;
                Ok(d)
            }
        }
    };
}

wire_type! {
    /// Send queue doorbell (offset 0x000).
    ///
    /// `tail_ptr` is the producer position in **bytes** (`head_bu * 32`), a
    /// running value that is never reduced modulo the queue size.
    pub struct SqDoorbell: u64 as U64 {
        /// Send queue id (bits 0-23).
        #[bits(24)]
        pub id: u32,
        /// Must be zero (bits 24-31).
        #[bits(8)]
        pub reserved: u8,
        /// Producer byte offset (bits 32-63).
        #[bits(32)]
        pub tail_ptr: u32,
    }
}
db64_common!(SqDoorbell, DOORBELL_OFFSET_SQ);

impl SqDoorbell {
    /// Builds a doorbell; fails if `id` does not fit 24 bits.
    pub fn try_new(id: u32, tail_ptr: u32) -> Result<Self, EncodeError> {
        let id = check_bits(Self::NAME, "id", id as u64, 24)? as u32;
        Ok(Self::new().with_id(id).with_tail_ptr(tail_ptr))
    }
    /// Doorbell for a producer position counted in BUs (`tail = head * 32`,
    /// wrapping at 2^32 like the C driver's `uint32_t`).
    pub fn for_head_bu(id: u32, head_bu: u32) -> Result<Self, EncodeError> {
        Self::try_new(id, head_bu.wrapping_mul(WQE_BU_SIZE as u32))
    }
}

impl WireType for SqDoorbell {
    const NAME: &'static str = "gdma_doorbell_entry.sq";
    fn validate(&self) -> Result<(), DecodeError> {
        mbz(Self::NAME, "reserved", self.reserved() as u64)
    }
}

wire_type! {
    /// Receive queue doorbell (offset 0x400).
    ///
    /// `wqe_cnt` must be written as 0 (kernel: "Hardware Spec specifies that
    /// software client should set 0 for wqe_cnt"), but DPDK 22.11.0 wrote other
    /// values there, so the decoder reports it instead of rejecting it; use
    /// [`RqDoorbell::validate_strict`] to reject it.
    pub struct RqDoorbell: u64 as U64 {
        /// Receive queue id (bits 0-23).
        #[bits(24)]
        pub id: u32,
        /// WQE count (bits 24-31); software writes 0.
        #[bits(8)]
        pub wqe_cnt: u8,
        /// Producer byte offset (bits 32-63).
        #[bits(32)]
        pub tail_ptr: u32,
    }
}
db64_common!(RqDoorbell, DOORBELL_OFFSET_RQ);

impl RqDoorbell {
    /// Builds a doorbell with `wqe_cnt = 0`; fails if `id` does not fit 24 bits.
    pub fn try_new(id: u32, tail_ptr: u32) -> Result<Self, EncodeError> {
        let id = check_bits(Self::NAME, "id", id as u64, 24)? as u32;
        Ok(Self::new().with_id(id).with_tail_ptr(tail_ptr))
    }
    /// Doorbell for a producer position counted in BUs.
    pub fn for_head_bu(id: u32, head_bu: u32) -> Result<Self, EncodeError> {
        Self::try_new(id, head_bu.wrapping_mul(WQE_BU_SIZE as u32))
    }
    /// Like `validate`, but also requires `wqe_cnt == 0`.
    pub fn validate_strict(&self) -> Result<(), DecodeError> {
        self.validate()?;
        mbz(Self::NAME, "wqe_cnt", self.wqe_cnt() as u64)
    }
}

impl WireType for RqDoorbell {
    const NAME: &'static str = "gdma_doorbell_entry.rq";
    fn validate(&self) -> Result<(), DecodeError> {
        Ok(())
    }
}

wire_type! {
    /// Completion queue doorbell (offset 0x800). Only used to arm a CQ for
    /// interrupts: `tail_ptr = head % (count * 8)` and `arm = 1`.
    pub struct CqDoorbell: u64 as U64 {
        /// Completion queue id (bits 0-23).
        #[bits(24)]
        pub id: u32,
        /// Must be zero (bits 24-31).
        #[bits(8)]
        pub reserved: u8,
        /// Consumer index in CQEs modulo `count << 3` (bits 32-62).
        #[bits(31)]
        pub tail_ptr: u32,
        /// Request an event on the next CQE (bit 63).
        pub arm: bool,
    }
}
db64_common!(CqDoorbell, DOORBELL_OFFSET_CQ);

impl CqDoorbell {
    /// Builds a doorbell; fails if `id` exceeds 24 bits or `tail_ptr` 31 bits.
    pub fn try_new(id: u32, tail_ptr: u32, arm: bool) -> Result<Self, EncodeError> {
        let id = check_bits(Self::NAME, "id", id as u64, 24)? as u32;
        let tail = check_bits(Self::NAME, "tail_ptr", tail_ptr as u64, 31)? as u32;
        Ok(Self::new().with_id(id).with_tail_ptr(tail).with_arm(arm))
    }
    /// The arm doorbell for a consumer index `head` of a CQ with `count`
    /// entries: `tail_ptr = head % (count << 3)`, `arm = 1`. Fails on
    /// `count == 0`, as on a value that does not fit.
    pub fn arm_at(id: u32, head: u32, count: u32) -> Result<Self, EncodeError> {
        if count == 0 {
            return Err(EncodeError::InvalidValue {
                what: Self::NAME,
                field: "count",
                value: 0,
                expected: "a CQ of at least one entry",
            });
        }
        Self::try_new(id, crate::cq_arm_tail(head, count), true)
    }
}

impl WireType for CqDoorbell {
    const NAME: &'static str = "gdma_doorbell_entry.cq";
    fn validate(&self) -> Result<(), DecodeError> {
        mbz(Self::NAME, "reserved", self.reserved() as u64)
    }
}

wire_type! {
    /// Event queue doorbell (offset 0xFF8; kernel / HWC only).
    pub struct EqDoorbell: u64 as U64 {
        /// Event queue id (bits 0-15).
        #[bits(16)]
        pub id: u16,
        /// Must be zero (bits 16-31).
        #[bits(16)]
        pub reserved: u16,
        /// Consumer index (bits 32-62).
        #[bits(31)]
        pub tail_ptr: u32,
        /// Request an interrupt (bit 63).
        pub arm: bool,
    }
}
db64_common!(EqDoorbell, DOORBELL_OFFSET_EQ);

impl EqDoorbell {
    /// Builds a doorbell; fails if `id` exceeds 16 bits or `tail_ptr` 31 bits.
    pub fn try_new(id: u32, tail_ptr: u32, arm: bool) -> Result<Self, EncodeError> {
        let id = check_bits(Self::NAME, "id", id as u64, 16)? as u16;
        let tail = check_bits(Self::NAME, "tail_ptr", tail_ptr as u64, 31)? as u32;
        Ok(Self::new().with_id(id).with_tail_ptr(tail).with_arm(arm))
    }
}

impl WireType for EqDoorbell {
    const NAME: &'static str = "gdma_doorbell_entry.eq";
    fn validate(&self) -> Result<(), DecodeError> {
        mbz(Self::NAME, "reserved", self.reserved() as u64)
    }
}

/// A 64-bit doorbell write, classified by its offset in the doorbell page.
/// This is what an emulator trapping doorbell writes decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doorbell {
    /// Written at 0x000.
    Sq(SqDoorbell),
    /// Written at 0x400.
    Rq(RqDoorbell),
    /// Written at 0x800.
    Cq(CqDoorbell),
    /// Written at 0xFF8.
    Eq(EqDoorbell),
}

impl Doorbell {
    /// Decodes a 64-bit write at `offset` (relative to the doorbell page)
    /// and validates it. Unknown offsets are rejected.
    pub fn decode(offset: usize, value: u64) -> Result<Self, DecodeError> {
        Ok(match offset {
            DOORBELL_OFFSET_SQ => Self::Sq(SqDoorbell::decode_raw(value)?),
            DOORBELL_OFFSET_RQ => Self::Rq(RqDoorbell::decode_raw(value)?),
            DOORBELL_OFFSET_CQ => Self::Cq(CqDoorbell::decode_raw(value)?),
            DOORBELL_OFFSET_EQ => Self::Eq(EqDoorbell::decode_raw(value)?),
            _ => {
                return Err(DecodeError::InvalidField {
                    what: "doorbell page",
                    field: "offset",
                    value: offset as u64,
                    expected: "0x000 (SQ), 0x400 (RQ), 0x800 (CQ) or 0xFF8 (EQ)",
                })
            }
        })
    }
    /// Offset of this doorbell in the doorbell page.
    pub const fn offset(&self) -> usize {
        match self {
            Self::Sq(_) => DOORBELL_OFFSET_SQ,
            Self::Rq(_) => DOORBELL_OFFSET_RQ,
            Self::Cq(_) => DOORBELL_OFFSET_CQ,
            Self::Eq(_) => DOORBELL_OFFSET_EQ,
        }
    }
    /// The raw value to write.
    pub const fn to_raw(&self) -> u64 {
        match self {
            Self::Sq(d) => d.to_raw(),
            Self::Rq(d) => d.to_raw(),
            Self::Cq(d) => d.to_raw(),
            Self::Eq(d) => d.to_raw(),
        }
    }
    /// The queue id the doorbell addresses.
    pub const fn id(&self) -> u32 {
        match self {
            Self::Sq(d) => d.id(),
            Self::Rq(d) => d.id(),
            Self::Cq(d) => d.id(),
            Self::Eq(d) => d.id() as u32,
        }
    }
}

// ---------------------------------------------------------------------------
// Short (32-bit) doorbells
// ---------------------------------------------------------------------------

wire_type! {
    /// 32-bit short SQ/RQ doorbell (offsets 0x010 / 0x410): the tail
    /// **increment** in bytes since the previous doorbell.
    pub struct ShortWqDoorbell: u32 as U32 {
        /// Bytes posted since the last doorbell (bits 0-15).
        #[bits(16)]
        pub tail_ptr_incr: u16,
        /// Queue id (bits 16-27).
        #[bits(12)]
        pub id: u16,
        /// Must be zero (bits 28-31).
        #[bits(4)]
        pub reserved: u8,
    }
}

wire_type! {
    /// 32-bit short CQ/EQ doorbell (offsets 0x810 / 0xFF0).
    pub struct ShortCqDoorbell: u32 as U32 {
        /// Entries consumed since the last doorbell (bits 0-15).
        #[bits(16)]
        pub tail_ptr_incr: u16,
        /// Queue id (bits 16-27).
        #[bits(12)]
        pub id: u16,
        /// Must be zero (bits 28-30).
        #[bits(3)]
        pub reserved: u8,
        /// Arm (bit 31).
        pub arm: bool,
    }
}

impl ShortWqDoorbell {
    /// Builds a doorbell; fails if `id` exceeds 12 bits or `incr` 16 bits
    /// (DPDK returns -EINVAL in the same cases).
    pub fn try_new(id: u32, incr: u32) -> Result<Self, EncodeError> {
        let id = check_bits(Self::NAME, "id", id as u64, 12)? as u16;
        let incr = check_bits(Self::NAME, "tail_ptr_incr", incr as u64, 16)? as u16;
        Ok(Self::new().with_id(id).with_tail_ptr_incr(incr))
    }
}

impl ShortCqDoorbell {
    /// Builds a doorbell; fails if `id` exceeds 12 bits or `incr` 16 bits.
    pub fn try_new(id: u32, incr: u32, arm: bool) -> Result<Self, EncodeError> {
        let id = check_bits(Self::NAME, "id", id as u64, 12)? as u16;
        let incr = check_bits(Self::NAME, "tail_ptr_incr", incr as u64, 16)? as u16;
        Ok(Self::new()
            .with_id(id)
            .with_tail_ptr_incr(incr)
            .with_arm(arm))
    }
}

impl WireType for ShortWqDoorbell {
    const NAME: &'static str = "gdma_short_doorbell_entry.sq/rq";
    fn validate(&self) -> Result<(), DecodeError> {
        mbz(Self::NAME, "reserved", self.reserved() as u64)
    }
}

impl WireType for ShortCqDoorbell {
    const NAME: &'static str = "gdma_short_doorbell_entry.cq/eq";
    fn validate(&self) -> Result<(), DecodeError> {
        mbz(Self::NAME, "reserved", self.reserved() as u64)
    }
}

/// A 32-bit short doorbell write, classified by offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShortDoorbell {
    /// Written at 0x010.
    Sq(ShortWqDoorbell),
    /// Written at 0x410.
    Rq(ShortWqDoorbell),
    /// Written at 0x810.
    Cq(ShortCqDoorbell),
    /// Written at 0xFF0.
    Eq(ShortCqDoorbell),
}

impl ShortDoorbell {
    /// Decodes a 32-bit write at `offset` in the doorbell page and validates it.
    pub fn decode(offset: usize, value: u32) -> Result<Self, DecodeError> {
        let wq = || {
            let d = ShortWqDoorbell::from_raw(value);
            d.validate().map(|_| d)
        };
        let cq = || {
            let d = ShortCqDoorbell::from_raw(value);
            d.validate().map(|_| d)
        };
        Ok(match offset {
            DOORBELL_SHORT_OFFSET_SQ => Self::Sq(wq()?),
            DOORBELL_SHORT_OFFSET_RQ => Self::Rq(wq()?),
            DOORBELL_SHORT_OFFSET_CQ => Self::Cq(cq()?),
            DOORBELL_SHORT_OFFSET_EQ => Self::Eq(cq()?),
            _ => {
                return Err(DecodeError::InvalidField {
                    what: "doorbell page",
                    field: "offset",
                    value: offset as u64,
                    expected: "0x010 (SQ), 0x410 (RQ), 0x810 (CQ) or 0xFF0 (EQ)",
                })
            }
        })
    }
    /// Offset of this doorbell in the doorbell page.
    pub const fn offset(&self) -> usize {
        match self {
            Self::Sq(_) => DOORBELL_SHORT_OFFSET_SQ,
            Self::Rq(_) => DOORBELL_SHORT_OFFSET_RQ,
            Self::Cq(_) => DOORBELL_SHORT_OFFSET_CQ,
            Self::Eq(_) => DOORBELL_SHORT_OFFSET_EQ,
        }
    }
    /// The raw value to write.
    pub const fn to_raw(&self) -> u32 {
        match self {
            Self::Sq(d) | Self::Rq(d) => d.to_raw(),
            Self::Cq(d) | Self::Eq(d) => d.to_raw(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn golden_sq() {
        let d = SqDoorbell::try_new(0x12_3456, 0x89ab_cdef).unwrap();
        assert_eq!(d.to_raw(), 0x89ab_cdef_0012_3456);
        assert_eq!(
            d.as_bytes(),
            &[0x56, 0x34, 0x12, 0x00, 0xef, 0xcd, 0xab, 0x89]
        );
        assert_eq!(SqDoorbell::for_head_bu(5, 3).unwrap().tail_ptr(), 96);
        assert_eq!(
            SqDoorbell::for_head_bu(5, 0x0800_0001).unwrap().tail_ptr(),
            32
        );
    }

    #[test]
    fn golden_rq() {
        let d = RqDoorbell::new()
            .with_id(0xab_cdef)
            .with_wqe_cnt(0x5a)
            .with_tail_ptr(0x0102_0304);
        assert_eq!(d.to_raw(), 0x0102_0304_5aab_cdef);
        assert!(d.validate().is_ok());
        assert_eq!(d.validate_strict().unwrap_err().field(), Some("wqe_cnt"));
    }

    #[test]
    fn golden_cq() {
        let d = CqDoorbell::try_new(0xff_ffff, 0x7fff_ffff, true).unwrap();
        assert_eq!(d.to_raw(), 0xffff_ffff_00ff_ffff);
        let d = CqDoorbell::arm_at(7, 1000, 64).unwrap();
        assert_eq!(d.to_raw(), (1u64 << 63) | ((1000u64 % 512) << 32) | 7);
        assert!(CqDoorbell::try_new(0, 0x8000_0000, false).is_err());
    }

    /// Found by the `doorbell` fuzz target: a CQ of 0 entries divided by
    /// zero in `cq_arm_tail` instead of being refused.
    #[test]
    fn arm_at_empty_cq_refused() {
        assert_eq!(
            CqDoorbell::arm_at(7, 1000, 0),
            Err(EncodeError::InvalidValue {
                what: "gdma_doorbell_entry.cq",
                field: "count",
                value: 0,
                expected: "a CQ of at least one entry",
            })
        );
        assert_eq!(
            CqDoorbell::arm_at(7, 9, 1).unwrap().tail_ptr(),
            9 % 8,
            "one entry: tail modulo 8"
        );
    }

    #[test]
    fn golden_eq() {
        let d = EqDoorbell::try_new(0xbeef, 0x1234_5678, true).unwrap();
        assert_eq!(d.to_raw(), 0x9234_5678_0000_beef);
        assert!(EqDoorbell::try_new(0x1_0000, 0, false).is_err());
    }

    #[test]
    fn golden_short() {
        let d = ShortWqDoorbell::try_new(0xabc, 0x1234).unwrap();
        assert_eq!(d.to_raw(), 0x0abc_1234);
        let d = ShortCqDoorbell::try_new(0xfff, 0xffff, true).unwrap();
        assert_eq!(d.to_raw(), 0x8fff_ffff);
        assert!(ShortWqDoorbell::try_new(0x1000, 0).is_err());
        assert!(ShortWqDoorbell::try_new(0, 0x1_0000).is_err());
        assert_eq!(
            ShortDoorbell::decode(0x10, 0x1000_0000)
                .unwrap_err()
                .field(),
            Some("reserved")
        );
        assert_eq!(
            ShortDoorbell::decode(0x810, 0x7000_0000)
                .unwrap_err()
                .field(),
            Some("reserved")
        );
        assert!(matches!(
            ShortDoorbell::decode(0xFF0, 0x8000_0001),
            Ok(ShortDoorbell::Eq(_))
        ));
        assert!(ShortDoorbell::decode(0x0, 0).is_err());
    }

    #[test]
    fn id_overflow_rejected() {
        let e = SqDoorbell::try_new(0x100_0000, 0).unwrap_err();
        assert!(matches!(
            e,
            EncodeError::FieldOverflow {
                field: "id",
                max: 0xff_ffff,
                ..
            }
        ));
        assert!(RqDoorbell::try_new(0x100_0000, 0).is_err());
        assert!(CqDoorbell::try_new(0x100_0000, 0, false).is_err());
    }

    #[test]
    fn reserved_rejected() {
        for (off, v) in [
            (DOORBELL_OFFSET_SQ, 1u64 << 24),
            (DOORBELL_OFFSET_SQ, 0x80u64 << 24),
            (DOORBELL_OFFSET_CQ, 1u64 << 31),
            (DOORBELL_OFFSET_EQ, 1u64 << 16),
            (DOORBELL_OFFSET_EQ, 1u64 << 31),
        ] {
            let e = Doorbell::decode(off, v).unwrap_err();
            assert_eq!(e.field(), Some("reserved"), "{off:#x} {v:#x}");
        }
        // RQ has no reserved bits in the lenient decoder.
        assert!(Doorbell::decode(DOORBELL_OFFSET_RQ, u64::MAX).is_ok());
    }

    #[test]
    fn decode_by_offset() {
        let d = Doorbell::decode(0x800, (1 << 63) | (5 << 32) | 9).unwrap();
        assert_eq!(d, Doorbell::Cq(CqDoorbell::try_new(9, 5, true).unwrap()));
        assert_eq!(d.offset(), 0x800);
        assert_eq!(d.id(), 9);
        assert!(Doorbell::decode(0x408, 0).is_err());
        assert!(Doorbell::decode(0x10, 0).is_err());
    }
}
