//! The shared-memory channel (SMC): a 32-byte window in BAR0 through which a
//! VF driver asks the device to establish or destroy the hardware channel
//! (HWC) before any queue exists (`shm_channel.c`).
//!
//! The driver writes eight dwords; the last one ([`SmcHeader`]) triggers the
//! device, which owns the window (`owner_is_pf = 1`) until it writes back a
//! response header (`direction = 1`, a status, `owner_is_pf = 0`). The
//! establish request packs the four queue addresses as page frame numbers:
//! the low 48 bits of each at bytes 0, 6, 12, 18, their high 4 bits in the
//! 16-bit word at byte 24, and the EQ's MSI-X vector at byte 26.

use bitfield_struct::bitfield;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::error::check_bits;
use crate::le::U32;
use crate::{assert_size, DecodeError, EncodeError, WireType};

/// Size of the SMC window.
pub const SMC_APERTURE_SIZE: usize = 32;
/// Byte offset of the header dword in the window.
pub const SMC_HEADER_OFFSET: usize = 28;
/// `msg_type` of an establish request.
pub const SMC_MSG_TYPE_ESTABLISH_HWC: u8 = 1;
/// `msg_type` of a destroy request.
pub const SMC_MSG_TYPE_DESTROY_HWC: u8 = 2;
/// Direction: driver to device.
pub const SMC_MSG_DIRECTION_REQUEST: bool = false;
/// Direction: device to driver.
pub const SMC_MSG_DIRECTION_RESPONSE: bool = true;
/// What the window reads as while a function-level reset is in progress.
pub const SHMEM_VF_RESET_STATE: u32 = u32::MAX;

/// The SMC protocol header (`union smc_proto_hdr`), the window's last dword.
#[bitfield(u32, repr = U32, from = U32::new, into = U32::get)]
#[derive(FromBytes, IntoBytes, Immutable, KnownLayout, Unaligned, PartialEq, Eq)]
pub struct SmcHeader {
    /// [`SMC_MSG_TYPE_ESTABLISH_HWC`] or [`SMC_MSG_TYPE_DESTROY_HWC`] (bits 0-2).
    #[bits(3)]
    pub msg_type: u8,
    /// Message version, 0 for both messages (bits 3-5).
    #[bits(3)]
    pub msg_version: u8,
    /// Must be zero (bit 6).
    #[bits(1)]
    pub reserved_1: u8,
    /// 0 request, 1 response (bit 7).
    pub direction: bool,
    /// Response status, 0 = success (bits 8-15).
    #[bits(8)]
    pub status: u8,
    /// Must be zero (bits 16-23).
    #[bits(8)]
    pub reserved_2: u8,
    /// Reset the VF before/after the operation (bit 24).
    pub reset_vf: bool,
    /// Must be zero (bits 25-30).
    #[bits(6)]
    pub reserved_3: u8,
    /// The device owns the window (bit 31).
    pub owner_is_pf: bool,
}
assert_size!(SmcHeader, 4);

impl SmcHeader {
    /// The raw dword.
    pub const fn to_raw(self) -> u32 {
        self.0.get()
    }
    /// Reinterprets a raw dword.
    pub const fn from_raw(v: u32) -> Self {
        Self(U32::new(v))
    }
    /// A request header as the driver writes it.
    pub fn request(msg_type: u8, reset_vf: bool) -> Self {
        Self::new().with_msg_type(msg_type).with_reset_vf(reset_vf)
    }
    /// The response to a request: same type and version, direction 1, the
    /// status, window handed back to the driver.
    pub fn response_to(req: Self, status: u8) -> Self {
        Self::new()
            .with_msg_type(req.msg_type())
            .with_msg_version(req.msg_version())
            .with_direction(SMC_MSG_DIRECTION_RESPONSE)
            .with_status(status)
    }
}

impl WireType for SmcHeader {
    const NAME: &'static str = "smc_proto_hdr";
    fn validate(&self) -> Result<(), DecodeError> {
        crate::error::mbz(Self::NAME, "reserved_1", self.reserved_1() as u64)?;
        crate::error::mbz(Self::NAME, "reserved_2", self.reserved_2() as u64)?;
        crate::error::mbz(Self::NAME, "reserved_3", self.reserved_3() as u64)?;
        if !matches!(
            self.msg_type(),
            SMC_MSG_TYPE_ESTABLISH_HWC | SMC_MSG_TYPE_DESTROY_HWC
        ) {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "msg_type",
                value: self.msg_type() as u64,
                expected: "1 (ESTABLISH_HWC) or 2 (DESTROY_HWC)",
            });
        }
        if self.msg_version() != 0 {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "msg_version",
                value: self.msg_version() as u64,
                expected: "0",
            });
        }
        if self.direction() != SMC_MSG_DIRECTION_REQUEST || self.owner_is_pf() {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "direction",
                value: self.direction() as u64,
                expected: "a request (direction 0, owner_is_pf 0)",
            });
        }
        Ok(())
    }
}

/// The addresses an establish request carries: the HWC's event,
/// completion, receive and send queues (each one page, page-aligned guest
/// physical addresses) and the EQ's MSI-X vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmcEstablishHwc {
    /// HWC event queue.
    pub eq_addr: u64,
    /// HWC completion queue.
    pub cq_addr: u64,
    /// HWC receive queue (responses).
    pub rq_addr: u64,
    /// HWC send queue (requests).
    pub sq_addr: u64,
    /// MSI-X vector of the event queue.
    pub eq_msix_index: u16,
    /// The header (type ESTABLISH_HWC).
    pub hdr: SmcHeader,
}

const PFN_L48: u64 = (1 << 48) - 1;

impl SmcEstablishHwc {
    /// Decodes the 32-byte window. Fails on a bad header or if the header is
    /// not an establish request.
    pub fn decode(w: &[u8; SMC_APERTURE_SIZE]) -> Result<Self, DecodeError> {
        let hdr = SmcHeader::decode(&w[SMC_HEADER_OFFSET..])?;
        if hdr.msg_type() != SMC_MSG_TYPE_ESTABLISH_HWC {
            return Err(DecodeError::InvalidField {
                what: "smc establish_hwc",
                field: "msg_type",
                value: hdr.msg_type() as u64,
                expected: "1 (ESTABLISH_HWC)",
            });
        }
        let h4 = u16::from_le_bytes([w[24], w[25]]);
        let addr = |i: usize| {
            let mut b = [0u8; 8];
            b[..6].copy_from_slice(&w[6 * i..6 * i + 6]);
            let pfn = u64::from_le_bytes(b) | (u64::from((h4 >> (4 * i)) & 0xf) << 48);
            pfn << 12
        };
        Ok(Self {
            eq_addr: addr(0),
            cq_addr: addr(1),
            rq_addr: addr(2),
            sq_addr: addr(3),
            eq_msix_index: u16::from_le_bytes([w[26], w[27]]),
            hdr,
        })
    }

    /// Encodes the window as `mana_smc_setup_hwc` does. Addresses must be
    /// page-aligned and below 2^64 (52-bit frame numbers).
    pub fn encode(&self) -> Result<[u8; SMC_APERTURE_SIZE], EncodeError> {
        let mut w = [0u8; SMC_APERTURE_SIZE];
        let mut h4 = 0u16;
        for (i, (field, a)) in [
            ("eq_addr", self.eq_addr),
            ("cq_addr", self.cq_addr),
            ("rq_addr", self.rq_addr),
            ("sq_addr", self.sq_addr),
        ]
        .into_iter()
        .enumerate()
        {
            if a % 4096 != 0 {
                return Err(EncodeError::InvalidValue {
                    what: "smc establish_hwc",
                    field,
                    value: a,
                    expected: "a page-aligned address",
                });
            }
            let pfn = check_bits("smc establish_hwc", field, a >> 12, 52)?;
            w[6 * i..6 * i + 6].copy_from_slice(&(pfn & PFN_L48).to_le_bytes()[..6]);
            h4 |= ((pfn >> 48) as u16) << (4 * i);
        }
        w[24..26].copy_from_slice(&h4.to_le_bytes());
        w[26..28].copy_from_slice(&self.eq_msix_index.to_le_bytes());
        w[28..32].copy_from_slice(&self.hdr.to_raw().to_le_bytes());
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_header() {
        let h = SmcHeader::request(SMC_MSG_TYPE_ESTABLISH_HWC, false);
        assert_eq!(h.to_raw(), 0x0000_0001);
        assert!(h.validate().is_ok());
        let d = SmcHeader::request(SMC_MSG_TYPE_DESTROY_HWC, true);
        assert_eq!(d.to_raw(), 0x0100_0002);
        let r = SmcHeader::response_to(h, 0);
        assert_eq!(r.to_raw(), 0x0000_0081);
        assert_eq!(SmcHeader::response_to(d, 3).to_raw(), 0x0000_0382);
        // A response, or the device-owned bit, is not a request.
        assert_eq!(
            SmcHeader::decode(&0x81u32.to_le_bytes())
                .unwrap_err()
                .field(),
            Some("direction")
        );
        assert_eq!(
            SmcHeader::decode(&0x8000_0001u32.to_le_bytes())
                .unwrap_err()
                .field(),
            Some("direction")
        );
        assert_eq!(
            SmcHeader::decode(&3u32.to_le_bytes()).unwrap_err().field(),
            Some("msg_type")
        );
        assert_eq!(
            SmcHeader::decode(&0x9u32.to_le_bytes())
                .unwrap_err()
                .field(),
            Some("msg_version")
        );
        assert_eq!(
            SmcHeader::decode(&0x0001_0001u32.to_le_bytes())
                .unwrap_err()
                .field(),
            Some("reserved_2")
        );
    }

    #[test]
    fn golden_establish() {
        // EQ 0x1_2345_6789_A000 (a frame above 2^48 pages' low bits), CQ
        // 0x1000, RQ 0x2000, SQ 0xF_0000_0000_3000, vector 0.
        let e = SmcEstablishHwc {
            eq_addr: 0x0001_2345_6789_a000,
            cq_addr: 0x1000,
            rq_addr: 0x2000,
            sq_addr: 0x000f_0000_0000_3000,
            eq_msix_index: 0,
            hdr: SmcHeader::request(SMC_MSG_TYPE_ESTABLISH_HWC, false),
        };
        let w = e.encode().unwrap();
        #[rustfmt::skip]
        let golden: [u8; 32] = [
            0x9a, 0x78, 0x56, 0x34, 0x12, 0x00,   // EQ pfn 0x12_3456_789a
            0x01, 0, 0, 0, 0, 0,                  // CQ pfn 1
            0x02, 0, 0, 0, 0, 0,                  // RQ pfn 2
            0x03, 0, 0, 0, 0xf0, 0x00,            // SQ pfn 0xf0_0000_0003 (low 48)
            0x00, 0x00,                           // high 4 bits: all zero
            0x00, 0x00,                           // MSI-X vector 0
            0x01, 0x00, 0x00, 0x00,               // ESTABLISH_HWC request
        ];
        assert_eq!(w, golden);
        assert_eq!(SmcEstablishHwc::decode(&w).unwrap(), e);

        // Frames at and above 2^48 use the high nibbles.
        let hi = SmcEstablishHwc {
            eq_addr: 1 << 60,
            cq_addr: 0x2 << 60,
            rq_addr: 0x3 << 60,
            sq_addr: 0xf << 60,
            eq_msix_index: 0x1234,
            ..e
        };
        let w = hi.encode().unwrap();
        assert_eq!(&w[24..28], &[0x21, 0xf3, 0x34, 0x12]);
        assert_eq!(SmcEstablishHwc::decode(&w).unwrap(), hi);
        assert!(SmcEstablishHwc {
            cq_addr: 0x1001,
            ..e
        }
        .encode()
        .is_err());

        let mut d = w;
        d[28] = 2;
        assert_eq!(
            SmcEstablishHwc::decode(&d).unwrap_err().field(),
            Some("msg_type")
        );
    }
}
