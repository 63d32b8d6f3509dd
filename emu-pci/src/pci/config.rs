//! The function's PCI configuration space: a type-0 header with the MANA VF
//! ids (1414:00ba, class 0200), two 64-bit memory BARs (BAR0: the GDMA
//! registers, BAR2: the MSI-X table and PBA) and one capability, MSI-X.
//!
//! QEMU's vfio client keeps its own copy of the BARs and of the MSI-X
//! capability, but forwards writes here too, so the registers behave as a
//! device's do: read-only bits stay put, BARs answer sizing writes with their
//! size mask, and the command register keeps the bits a device implements.

use super::{BAR0_SIZE, BAR2_SIZE, MSIX_PBA_OFFSET, MSIX_TABLE_OFFSET, MSIX_VECTORS};

/// Size of the configuration space served (conventional PCI).
pub const CONFIG_SIZE: usize = 256;

pub const VENDOR_MICROSOFT: u16 = 0x1414;
/// The MANA virtual function (`MANA_VF_DEVICE_ID`).
pub const DEVICE_MANA_VF: u16 = 0x00ba;
/// Class 02 (network), subclass 00 (Ethernet), programming interface 00.
pub const CLASS_ETHERNET: u32 = 0x02_00_00;

const CAP_MSIX: u8 = 0x11;
/// Where the MSI-X capability sits.
pub const MSIX_CAP_OFFSET: usize = 0x40;

const CMD_MEMORY: u16 = 1 << 1;
const CMD_BUS_MASTER: u16 = 1 << 2;
const CMD_INTX_DISABLE: u16 = 1 << 10;
const STATUS_CAP_LIST: u16 = 1 << 4;

const MSIX_CTRL_ENABLE: u16 = 1 << 15;
const MSIX_CTRL_FUNCTION_MASK: u16 = 1 << 14;

/// The configuration space of one function.
pub struct ConfigSpace {
    bytes: [u8; CONFIG_SIZE],
    /// Bits a write may change, per byte.
    writable: [u8; CONFIG_SIZE],
}

impl Default for ConfigSpace {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfigSpace {
    pub fn new() -> Self {
        let mut c = ConfigSpace {
            bytes: [0; CONFIG_SIZE],
            writable: [0; CONFIG_SIZE],
        };
        c.put16(0x00, VENDOR_MICROSOFT);
        c.put16(0x02, DEVICE_MANA_VF);
        c.put16(0x06, STATUS_CAP_LIST);
        // Revision 0 in the low byte, the class code above it.
        c.put32(0x08, CLASS_ETHERNET << 8);
        c.put16(0x2c, VENDOR_MICROSOFT);
        c.put16(0x2e, DEVICE_MANA_VF);
        c.bytes[0x34] = MSIX_CAP_OFFSET as u8;
        // No INTx: interrupt pin 0. The interrupt line is scratch space.
        c.writable[0x3c] = 0xff;
        c.mark16(0x04, CMD_MEMORY | CMD_BUS_MASTER | CMD_INTX_DISABLE);
        c.bar64(0x10, BAR0_SIZE);
        c.bar64(0x18, BAR2_SIZE);

        let m = MSIX_CAP_OFFSET;
        c.bytes[m] = CAP_MSIX;
        c.bytes[m + 1] = 0; // last capability
        c.put16(m + 2, (MSIX_VECTORS - 1) as u16);
        c.mark16(m + 2, MSIX_CTRL_ENABLE | MSIX_CTRL_FUNCTION_MASK);
        // Table and PBA in BAR2 (BIR 2).
        c.put32(m + 4, MSIX_TABLE_OFFSET as u32 | 2);
        c.put32(m + 8, MSIX_PBA_OFFSET as u32 | 2);
        c
    }

    fn put16(&mut self, off: usize, v: u16) {
        self.bytes[off..off + 2].copy_from_slice(&v.to_le_bytes());
    }
    fn put32(&mut self, off: usize, v: u32) {
        self.bytes[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn mark16(&mut self, off: usize, mask: u16) {
        self.writable[off..off + 2].copy_from_slice(&mask.to_le_bytes());
    }

    /// A 64-bit memory BAR of `size` bytes (a power of two) at `off`: the
    /// type bits read back, the address bits below the size read as zero.
    fn bar64(&mut self, off: usize, size: u64) {
        assert!(size.is_power_of_two() && size >= 16);
        self.put32(off, 0b100); // memory, 64-bit, not prefetchable
        let mask = !(size - 1);
        self.writable[off..off + 8].copy_from_slice(&(mask & !0xf).to_le_bytes());
    }

    /// Reads `out.len()` bytes at `off`; bytes past the end read as 0xff.
    pub fn read(&self, off: usize, out: &mut [u8]) {
        for (i, b) in out.iter_mut().enumerate() {
            *b = self.bytes.get(off + i).copied().unwrap_or(0xff);
        }
    }

    /// Writes `data` at `off`, keeping read-only bits.
    pub fn write(&mut self, off: usize, data: &[u8]) {
        for (i, v) in data.iter().enumerate() {
            let Some(w) = self.writable.get(off + i) else {
                break;
            };
            let b = &mut self.bytes[off + i];
            *b = (*b & !w) | (v & w);
        }
    }

    fn get16(&self, off: usize) -> u16 {
        u16::from_le_bytes([self.bytes[off], self.bytes[off + 1]])
    }

    /// Bus mastering enabled: the function may read and write guest memory.
    pub fn bus_master(&self) -> bool {
        self.get16(0x04) & CMD_BUS_MASTER != 0
    }

    /// MSI-X enabled and the function not masked as a whole.
    pub fn msix_enabled(&self) -> bool {
        let ctrl = self.get16(MSIX_CAP_OFFSET + 2);
        ctrl & MSIX_CTRL_ENABLE != 0 && ctrl & MSIX_CTRL_FUNCTION_MASK == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r32(c: &ConfigSpace, off: usize) -> u32 {
        let mut b = [0u8; 4];
        c.read(off, &mut b);
        u32::from_le_bytes(b)
    }

    #[test]
    fn header_ids_and_class() {
        let c = ConfigSpace::new();
        assert_eq!(r32(&c, 0), 0x00ba_1414);
        assert_eq!(r32(&c, 8) >> 8, 0x02_00_00);
        assert_eq!(r32(&c, 0x2c), 0x00ba_1414);
        // Capability list: status bit 4 set, pointer at 0x34 to MSI-X.
        assert_eq!(r32(&c, 4) >> 16 & 0x10, 0x10);
        assert_eq!(c.bytes[0x34], 0x40);
        assert_eq!(c.bytes[0x40], 0x11);
        let ctrl = r32(&c, 0x40) >> 16;
        assert_eq!(ctrl & 0x7ff, MSIX_VECTORS as u32 - 1);
        assert_eq!(r32(&c, 0x44), MSIX_TABLE_OFFSET as u32 | 2);
        assert_eq!(r32(&c, 0x48), MSIX_PBA_OFFSET as u32 | 2);
    }

    #[test]
    fn bar_sizing() {
        let mut c = ConfigSpace::new();
        c.write(0x10, &u32::MAX.to_le_bytes());
        c.write(0x14, &u32::MAX.to_le_bytes());
        let lo = r32(&c, 0x10);
        let hi = r32(&c, 0x14);
        let mask = (u64::from(hi) << 32) | u64::from(lo & !0xf);
        assert_eq!(!mask + 1, BAR0_SIZE);
        assert_eq!(lo & 0xf, 0b100);
        c.write(0x10, &0xfe00_0000u32.to_le_bytes());
        assert_eq!(r32(&c, 0x10), 0xfe00_0004);
    }

    #[test]
    fn read_only_bits_stay() {
        let mut c = ConfigSpace::new();
        c.write(0, &[0; 4]);
        assert_eq!(r32(&c, 0), 0x00ba_1414);
        c.write(4, &0xffffu16.to_le_bytes());
        assert!(c.bus_master());
        assert_eq!(r32(&c, 4) & 0xffff, 0x0406);
        assert!(!c.msix_enabled());
        c.write(0x42, &0x8000u16.to_le_bytes());
        assert!(c.msix_enabled());
        assert_eq!(r32(&c, 0x40) >> 16 & 0x7ff, MSIX_VECTORS as u32 - 1);
    }
}
