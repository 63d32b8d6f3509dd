//! The register block at the start of a VF's BAR0 (`GDMA_REG_*` in
//! `include/net/mana/gdma.h`): where the doorbell pages and the
//! shared-memory channel (SMC) sit in the BAR. The kernel reads these three
//! registers once at probe (`mana_gd_init_vf_regs`); DPDK never does (it
//! gets its doorbell page from mana_ib).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::le::{U16, U32, U64};
use crate::{assert_size, DecodeError, WireType};

/// Offset of the 64-bit offset (within BAR0) of doorbell page 0
/// (`GDMA_REG_DB_PAGE_OFFSET`).
pub const GDMA_REG_DB_PAGE_OFFSET: usize = 0x08;
/// Offset of the 32-bit doorbell page size; the kernel keeps its low 16 bits
/// (`GDMA_REG_DB_PAGE_SIZE`).
pub const GDMA_REG_DB_PAGE_SIZE: usize = 0x10;
/// Offset of the 64-bit offset (within BAR0) of the SMC window
/// (`GDMA_REG_SHM_OFFSET`).
pub const GDMA_REG_SHM_OFFSET: usize = 0x18;

/// The VF register block as a structure (40 bytes). Bytes 0-7 hold version
/// numbers the Linux driver does not read; bytes 0x20-0x27 the size of the
/// SMC window (likewise unread).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    FromBytes,
    IntoBytes,
    Immutable,
    KnownLayout,
    Unaligned,
)]
#[repr(C)]
pub struct VfRegs {
    /// Micro version of the register layout.
    pub micro_version: U16,
    /// Minor version.
    pub minor_version: U16,
    /// Major version.
    pub major_version: U16,
    /// Must be zero.
    pub reserved: U16,
    /// BAR0 offset of doorbell page 0 (`GDMA_REG_DB_PAGE_OFFSET`).
    pub db_page_offset: U64,
    /// Doorbell page size (`GDMA_REG_DB_PAGE_SIZE`; low 16 bits used).
    pub db_page_size: U32,
    /// Must be zero.
    pub reserved2: U32,
    /// BAR0 offset of the SMC window (`GDMA_REG_SHM_OFFSET`).
    pub shm_offset: U64,
    /// Size of the SMC window.
    pub shm_size: U32,
    /// Must be zero.
    pub reserved3: U32,
}
assert_size!(VfRegs, 40);

impl WireType for VfRegs {
    const NAME: &'static str = "gdma_vf_regs";
    fn validate(&self) -> Result<(), DecodeError> {
        crate::error::mbz(Self::NAME, "reserved", self.reserved.get() as u64)?;
        crate::error::mbz(Self::NAME, "reserved2", self.reserved2.get() as u64)?;
        crate::error::mbz(Self::NAME, "reserved3", self.reserved3.get() as u64)?;
        let size = self.db_page_size.get();
        if size & 0xffff == 0 || size > 0xffff || !size.is_multiple_of(4096) {
            return Err(DecodeError::InvalidField {
                what: Self::NAME,
                field: "db_page_size",
                value: size as u64,
                expected: "a non-zero multiple of 4096 below 64 KiB",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn golden_vf_regs() {
        let r = VfRegs {
            micro_version: U16::new(1),
            minor_version: U16::new(0),
            major_version: U16::new(1),
            db_page_offset: U64::new(0x1_0000),
            db_page_size: U32::new(0x1000),
            shm_offset: U64::new(0x100),
            shm_size: U32::new(32),
            ..Default::default()
        };
        #[rustfmt::skip]
        let golden: [u8; 40] = [
            1, 0, 0, 0, 1, 0, 0, 0,
            0, 0, 1, 0, 0, 0, 0, 0,
            0, 0x10, 0, 0, 0, 0, 0, 0,
            0, 1, 0, 0, 0, 0, 0, 0,
            32, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(r.as_bytes(), &golden);
        assert_eq!(
            &golden[GDMA_REG_DB_PAGE_OFFSET..][..8],
            &0x1_0000u64.to_le_bytes()
        );
        assert_eq!(
            &golden[GDMA_REG_DB_PAGE_SIZE..][..4],
            &0x1000u32.to_le_bytes()
        );
        assert_eq!(&golden[GDMA_REG_SHM_OFFSET..][..8], &0x100u64.to_le_bytes());
        assert_eq!(VfRegs::decode(&golden).unwrap(), r);
    }

    #[test]
    fn vf_regs_fail_closed() {
        let mut b = [0u8; 40];
        b[GDMA_REG_DB_PAGE_SIZE] = 0x10; // 16 bytes
        assert_eq!(
            VfRegs::decode(&b).unwrap_err().field(),
            Some("db_page_size")
        );
        b[GDMA_REG_DB_PAGE_SIZE] = 0;
        b[GDMA_REG_DB_PAGE_SIZE + 1] = 0x10;
        b[6] = 1;
        assert_eq!(VfRegs::decode(&b).unwrap_err().field(), Some("reserved"));
    }
}
