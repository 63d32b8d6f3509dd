//! The hardware channel's work request OOBs: [`HwcTxOob`], the inline OOB
//! of a request WQE on the HWC send queue, and [`HwcRxOob`], the completion
//! data of both HWC queues (`include/net/mana/hw_channel.h`).
//!
//! The HWC is an ordinary SQ/RQ/CQ/EQ set whose ids and sizes the device
//! announces in `GDMA_EQE_HWC_INIT_*` events. A request is one SQ WQE (a
//! 24-byte [`HwcTxOob`], one SGE with the message, `gpa_mkey`); the device
//! writes the response into the buffer of the next posted RQ WQE and
//! completes it with an [`HwcRxOob`] whose `tx_oob_data_size` is the
//! response length and `wqe_offset` the RQ WQE's byte offset.

use bitfield_struct::bitfield;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::error::mbz;
use crate::le::U32;
use crate::{assert_size, DecodeError, WireType};

/// Queue depth the 6.12 VF driver uses for the HWC
/// (`HW_CHANNEL_VF_BOOTSTRAP_QUEUE_DEPTH`): one request in flight.
pub const HWC_VF_BOOTSTRAP_QUEUE_DEPTH: u32 = 1;

/// `struct hwc_tx_oob` dword 2.
#[bitfield(u32, repr = U32, from = U32::new, into = U32::get)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned, PartialEq, Eq)]
pub struct HwcTxOobDw2 {
    /// Destination virtual RQ (PF only; 0 from a VF).
    #[bits(24)]
    pub vrq_id: u32,
    /// Destination VF.
    #[bits(8)]
    pub dest_vfid: u8,
}

/// `struct hwc_tx_oob` dword 3.
#[bitfield(u32, repr = U32, from = U32::new, into = U32::get)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned, PartialEq, Eq)]
pub struct HwcTxOobDw3 {
    /// Destination virtual RCQ (PF only).
    #[bits(24)]
    pub vrcq_id: u32,
    /// Must be zero.
    #[bits(8)]
    pub reserved3: u8,
}

/// `struct hwc_tx_oob` dword 4.
#[bitfield(u32, repr = U32, from = U32::new, into = U32::get)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned, PartialEq, Eq)]
pub struct HwcTxOobDw4 {
    /// The HWC CQ the send completes on.
    #[bits(24)]
    pub vscq_id: u32,
    /// Loopback.
    pub loopback: bool,
    /// LSO override.
    pub lso_override: bool,
    /// Destined to the PF.
    pub dest_pf: bool,
    /// Must be zero.
    #[bits(5)]
    pub reserved4: u8,
}

/// `struct hwc_tx_oob` dword 5.
#[bitfield(u32, repr = U32, from = U32::new, into = U32::get)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned, PartialEq, Eq)]
pub struct HwcTxOobDw5 {
    /// The HWC SQ itself.
    #[bits(24)]
    pub vsq_id: u32,
    /// Must be zero.
    #[bits(8)]
    pub reserved5: u8,
}

/// The inline OOB of an HWC request WQE (`struct hwc_tx_oob`, 24 bytes).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned,
)]
#[repr(C)]
pub struct HwcTxOob {
    /// Must be zero.
    pub reserved1: U32,
    /// Must be zero.
    pub reserved2: U32,
    /// Destination RQ / VF.
    pub dw2: HwcTxOobDw2,
    /// Destination RCQ.
    pub dw3: HwcTxOobDw3,
    /// Send CQ and flags.
    pub dw4: HwcTxOobDw4,
    /// Send queue.
    pub dw5: HwcTxOobDw5,
}
assert_size!(HwcTxOob, 24);

impl WireType for HwcTxOob {
    const NAME: &'static str = "hwc_tx_oob";
    fn validate(&self) -> Result<(), DecodeError> {
        mbz(Self::NAME, "reserved1", self.reserved1.get() as u64)?;
        mbz(Self::NAME, "reserved2", self.reserved2.get() as u64)?;
        mbz(Self::NAME, "reserved3", self.dw3.reserved3() as u64)?;
        mbz(Self::NAME, "reserved4", self.dw4.reserved4() as u64)?;
        mbz(Self::NAME, "reserved5", self.dw5.reserved5() as u64)
    }
}

/// `struct hwc_rx_oob` dword 0.
#[bitfield(u32, repr = U32, from = U32::new, into = U32::get)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned, PartialEq, Eq)]
pub struct HwcRxOobDw0 {
    /// Completion type.
    #[bits(6)]
    pub ty: u8,
    /// End of message.
    pub eom: bool,
    /// Start of message.
    pub som: bool,
    /// Vendor error.
    #[bits(8)]
    pub vendor_err: u8,
    /// Must be zero.
    #[bits(16)]
    pub reserved1: u16,
}

/// `struct hwc_rx_oob` dword 1.
#[bitfield(u32, repr = U32, from = U32::new, into = U32::get)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned, PartialEq, Eq)]
pub struct HwcRxOobDw1 {
    /// Source virtual WQ.
    #[bits(24)]
    pub src_virt_wq: u32,
    /// Source VF.
    #[bits(8)]
    pub src_vfid: u8,
}

/// The completion data of an HWC work request (`struct hwc_rx_oob`,
/// 32 bytes at the start of the CQE).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned,
)]
#[repr(C)]
pub struct HwcRxOob {
    /// Type and flags.
    pub dw0: HwcRxOobDw0,
    /// Source.
    pub dw1: HwcRxOobDw1,
    /// Must be zero.
    pub reserved2: U32,
    /// Byte offset of the completed WQE in its queue (`wqe_offset`, or the
    /// low dword of its address).
    pub wqe_offset: U32,
    /// High dword of the WQE address.
    pub wqe_addr_high: U32,
    /// Client data unit (bits 0-13), the rest must be zero.
    pub client_data_unit: U32,
    /// Length of the received message (the response).
    pub tx_oob_data_size: U32,
    /// Chunk offset (bits 0-20), the rest must be zero.
    pub chunk_offset: U32,
}
assert_size!(HwcRxOob, 32);

impl WireType for HwcRxOob {
    const NAME: &'static str = "hwc_rx_oob";
    fn validate(&self) -> Result<(), DecodeError> {
        mbz(Self::NAME, "reserved1", self.dw0.reserved1() as u64)?;
        mbz(Self::NAME, "reserved2", self.reserved2.get() as u64)?;
        mbz(
            Self::NAME,
            "reserved3",
            (self.client_data_unit.get() >> 14) as u64,
        )?;
        mbz(
            Self::NAME,
            "reserved4",
            (self.chunk_offset.get() >> 21) as u64,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::{FromZeros, IntoBytes};

    #[test]
    fn golden_tx_oob() {
        // What mana_hwc_post_tx_wqe writes on a VF: CQ 0x12, SQ 0x34.
        let mut o = HwcTxOob::new_zeroed();
        o.dw4 = HwcTxOobDw4::new().with_vscq_id(0x12);
        o.dw5 = HwcTxOobDw5::new().with_vsq_id(0x34);
        #[rustfmt::skip]
        let golden: [u8; 24] = [
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0x12, 0, 0, 0, 0x34, 0, 0, 0,
        ];
        assert_eq!(o.as_bytes(), &golden);
        assert_eq!(HwcTxOob::decode(&golden).unwrap(), o);
        o.dw4.set_dest_pf(true);
        assert_eq!(o.as_bytes()[19], 0x04);
        let mut b = golden;
        b[23] = 1;
        assert_eq!(HwcTxOob::decode(&b).unwrap_err().field(), Some("reserved5"));
        let mut b = golden;
        b[19] = 0x08;
        assert_eq!(HwcTxOob::decode(&b).unwrap_err().field(), Some("reserved4"));
    }

    #[test]
    fn golden_rx_oob() {
        let mut o = HwcRxOob::new_zeroed();
        o.wqe_offset = U32::new(0x40);
        o.tx_oob_data_size = U32::new(296);
        #[rustfmt::skip]
        let golden: [u8; 32] = [
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0, 0x28, 1, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(o.as_bytes(), &golden);
        let mut b = golden;
        b[31] = 0x80;
        assert_eq!(HwcRxOob::decode(&b).unwrap_err().field(), Some("reserved4"));
    }
}
