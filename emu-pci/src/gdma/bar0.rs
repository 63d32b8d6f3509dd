//! BAR0: the VF register block at 0, the SMC window, and the doorbell pages
//! (page `k` at `DB_BASE + k * DB_PAGE_SIZE`). Reads of the doorbell pages
//! return zero; other unbacked reads return all ones, as a bus would.

use super::DB_PAGES;
use crate::device::Device;
use gdma::regs::VfRegs;
use gdma::Doorbell;
use zerocopy::IntoBytes;

pub const SMC_OFFSET: usize = 0x100;
pub const DB_BASE: usize = 0x1_0000;
pub const DB_PAGE_SIZE: usize = 0x1000;

fn regs() -> VfRegs {
    use gdma::le::{U16, U32, U64};
    VfRegs {
        micro_version: U16::new(1),
        minor_version: U16::new(0),
        major_version: U16::new(1),
        db_page_offset: U64::new(DB_BASE as u64),
        db_page_size: U32::new(DB_PAGE_SIZE as u32),
        shm_offset: U64::new(SMC_OFFSET as u64),
        shm_size: U32::new(gdma::SMC_APERTURE_SIZE as u32),
        ..Default::default()
    }
}

impl Device {
    pub fn bar0_read(&mut self, off: usize, out: &mut [u8]) {
        let regs = regs();
        let rb = regs.as_bytes();
        let smc = SMC_OFFSET..SMC_OFFSET + gdma::SMC_APERTURE_SIZE;
        let dbs = DB_BASE..DB_BASE + DB_PAGES as usize * DB_PAGE_SIZE;
        let end = off + out.len();
        if end <= rb.len() {
            out.copy_from_slice(&rb[off..end]);
        } else if smc.contains(&off) && end <= smc.end {
            out.copy_from_slice(&self.smc[off - SMC_OFFSET..end - SMC_OFFSET]);
        } else if dbs.contains(&off) && end <= dbs.end {
            out.fill(0);
        } else {
            out.fill(0xff);
        }
    }

    pub fn bar0_write(&mut self, off: usize, data: &[u8]) {
        let smc = SMC_OFFSET..SMC_OFFSET + gdma::SMC_APERTURE_SIZE;
        let dbs = DB_BASE..DB_BASE + DB_PAGES as usize * DB_PAGE_SIZE;
        if smc.contains(&off) && off + data.len() <= smc.end {
            self.smc_write(off - SMC_OFFSET, data);
        } else if dbs.contains(&off) && off + data.len() <= dbs.end {
            let page = ((off - DB_BASE) / DB_PAGE_SIZE) as u32;
            let reg = (off - DB_BASE) % DB_PAGE_SIZE;
            match data.len() {
                8 => {
                    let v = u64::from_le_bytes(data.try_into().unwrap());
                    self.doorbell(page, reg, v);
                }
                4 if reg.is_multiple_of(8) => {
                    let v = u32::from_le_bytes(data.try_into().unwrap());
                    self.split_db.insert(off, v);
                }
                4 if reg % 8 == 4 => {
                    let hi = u32::from_le_bytes(data.try_into().unwrap());
                    match self.split_db.remove(&(off - 4)) {
                        Some(lo) => {
                            self.doorbell(page, reg - 4, u64::from(hi) << 32 | u64::from(lo))
                        }
                        None => self.error(
                            "doorbell",
                            format_args!("page {page} +{reg:#x}: high half without the low half"),
                        ),
                    }
                }
                n => self.error(
                    "doorbell",
                    format_args!("page {page} +{reg:#x}: {n}-byte write ignored"),
                ),
            }
        } else {
            self.error(
                "bar0",
                format_args!(
                    "{}-byte write at {off:#x} outside the registers ignored",
                    data.len()
                ),
            );
        }
    }

    /// A 64-bit doorbell store on page `page` at register offset `reg`.
    fn doorbell(&mut self, page: u32, reg: usize, v: u64) {
        let db = match Doorbell::decode(reg, v) {
            Ok(db) => db,
            Err(e) => {
                self.error(
                    "doorbell",
                    format_args!("page {page} +{reg:#x} value {v:#x}: {e}"),
                );
                return;
            }
        };
        match db {
            Doorbell::Eq(d) => self.eq_doorbell(page, d.id(), d.tail_ptr(), d.arm()),
            Doorbell::Cq(d) if self.hwc_cq(page, d.id()) => {
                self.hwc_cq_doorbell(d.tail_ptr(), d.arm())
            }
            Doorbell::Sq(d) if self.hwc_sq(page, d.id()) => self.hwc_sq_doorbell(d.tail_ptr()),
            Doorbell::Rq(d) if self.hwc_rq(page, d.id()) => self.hwc_rq_doorbell(d.tail_ptr()),
            _ => self.data_doorbell(page, reg, v, &db),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceConfig;

    #[test]
    fn registers_read_as_the_kernel_expects() {
        let mut d = Device::new(DeviceConfig::default()).unwrap();
        let mut b = [0u8; 8];
        d.bar0_read(gdma::regs::GDMA_REG_DB_PAGE_OFFSET, &mut b);
        assert_eq!(u64::from_le_bytes(b), DB_BASE as u64);
        let mut b4 = [0u8; 4];
        d.bar0_read(gdma::regs::GDMA_REG_DB_PAGE_SIZE, &mut b4);
        assert_eq!(u32::from_le_bytes(b4) & 0xffff, 0x1000);
        d.bar0_read(gdma::regs::GDMA_REG_SHM_OFFSET, &mut b);
        assert_eq!(u64::from_le_bytes(b), SMC_OFFSET as u64);
        // The SMC window starts owned by the driver (bit 31 clear).
        d.bar0_read(SMC_OFFSET + 28, &mut b4);
        assert_eq!(u32::from_le_bytes(b4) & 1 << 31, 0);
        d.bar0_read(0x8000, &mut b4);
        assert_eq!(b4, [0xff; 4]);
        assert!(DB_BASE + DB_PAGES as usize * DB_PAGE_SIZE <= crate::pci::BAR0_SIZE as usize);
    }
}
