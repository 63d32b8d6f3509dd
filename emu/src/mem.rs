//! Access to driver memory (queue rings, packet buffers), the one place the
//! device model touches raw addresses.
//!
//! A [`Region`] is created only for memory the driver handed to the device:
//! queue buffers it allocated through the context allocator, and ranges it
//! registered with `ibv_reg_mr` (the LD_PRELOAD emulator, where the driver's
//! memory is this process's), or guest memory a VMM shared (the PCI model of
//! `emu-pci`). Every access is bounds-checked against the region, so a bogus
//! SGE yields an error CQE rather than a stray write.
//!
//! The device model reaches memory through two abstractions over regions:
//! a queue's [`Ring`] (one region, or the pages of a DMA region, not
//! necessarily contiguous) and a [`DmaSpace`] that turns addresses into
//! regions (the guest-physical space behind a PCI function's memory key).

use std::sync::atomic::{fence, AtomicU32, Ordering};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    addr: usize,
    len: usize,
}

impl Region {
    /// # Safety
    /// `[addr, addr + len)` must stay mapped and writable for as long as the
    /// region is used (the driver's registration / queue lifetime contract,
    /// which the device enforces by quiescing before a destroy returns).
    pub unsafe fn new(addr: usize, len: usize) -> Region {
        Region { addr, len }
    }

    pub fn addr(&self) -> usize {
        self.addr
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The part `[off, off + len)` of this region, if it lies inside.
    pub fn sub(&self, off: usize, len: usize) -> Option<Region> {
        (off.checked_add(len)? <= self.len).then_some(Region {
            addr: self.addr + off,
            len,
        })
    }

    /// Does `[addr, addr+len)` lie inside this region?
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        let a = addr as u128;
        let s = self.addr as u128;
        a >= s && a + len as u128 <= s + self.len as u128
    }

    fn check(&self, off: usize, len: usize) {
        assert!(
            off.checked_add(len).is_some_and(|e| e <= self.len),
            "region access out of bounds"
        );
    }

    /// Copies `out.len()` bytes at `off` out of the region.
    pub fn read(&self, off: usize, out: &mut [u8]) {
        self.check(off, out.len());
        // SAFETY: `[off, off + out.len())` lies inside the region (checked
        // above), and whoever created it through `Region::new` promised the
        // region stays mapped and readable while it is used; `out` is a
        // separate Rust buffer, so the ranges do not overlap. Only a buggy
        // driver writes here concurrently, and a plain byte copy is what a
        // DMA engine would do then.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (self.addr + off) as *const u8,
                out.as_mut_ptr(),
                out.len(),
            )
        }
    }

    /// Copies `data` into the region at `off`.
    pub fn write(&self, off: usize, data: &[u8]) {
        self.check(off, data.len());
        // SAFETY: `[off, off + data.len())` lies inside the region (checked
        // above), which `Region::new`'s caller promised stays mapped and
        // writable while it is used; `data` is a separate Rust buffer, so
        // the ranges do not overlap. A driver reading these bytes at the
        // same time sees a partial copy, as it would of a DMA engine's.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), (self.addr + off) as *mut u8, data.len())
        }
    }

    pub fn read_u64(&self, off: usize) -> u64 {
        let mut b = [0u8; 8];
        self.read(off, &mut b);
        u64::from_le_bytes(b)
    }

    /// Reads from a ring of this region's size starting at `off`, wrapping
    /// to offset 0 at the end (how a WQE's SGL wraps).
    pub fn read_wrapping(&self, off: usize, out: &mut [u8]) {
        let off = off % self.len;
        let first = out.len().min(self.len - off);
        self.read(off, &mut out[..first]);
        if first < out.len() {
            let rest = out.len() - first;
            self.read(0, &mut out[first..first + rest]);
        }
    }

    /// Writes a 64-byte CQE: the 60 data bytes, a release fence, then the
    /// info dword with one 32-bit store, so a poller that sees the new owner
    /// bits also sees the data.
    pub fn write_cqe(&self, off: usize, data: &[u8; 60], info: u32) {
        self.check(off, 64);
        assert!(off.is_multiple_of(4));
        self.write(off, data);
        fence(Ordering::Release);
        // SAFETY: in bounds and 4-byte aligned (CQ buffers are page aligned
        // and CQEs 64-byte slots); AtomicU32 has u32's layout.
        let info_ptr = unsafe { &*((self.addr + off + 60) as *const AtomicU32) };
        info_ptr.store(info.to_le(), Ordering::Release);
    }
}

/// Queue memory: one region (a driver's contiguous buffer) or equal pages
/// (a DMA region's page list), read and written at ring offsets. Entries
/// the device writes (64-byte CQEs) never cross a page; reads may.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ring {
    pages: Vec<Region>,
    page: usize,
}

impl Ring {
    /// A ring over one contiguous region.
    pub fn flat(r: Region) -> Ring {
        Ring {
            page: r.len(),
            pages: vec![r],
        }
    }

    /// A ring over `pages`, in order. Every page must have the same
    /// power-of-two size (at least 64 bytes).
    pub fn paged(pages: Vec<Region>) -> Option<Ring> {
        let page = pages.first()?.len();
        if !page.is_power_of_two() || page < 64 || pages.iter().any(|p| p.len() != page) {
            return None;
        }
        Some(Ring { pages, page })
    }

    /// The region of a flat ring (what the verbs layer hands to libmana).
    pub fn as_flat(&self) -> Option<Region> {
        match self.pages[..] {
            [r] => Some(r),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.pages.len() * self.page
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies `out.len()` bytes at ring offset `off` (inside the ring).
    pub fn read(&self, off: usize, out: &mut [u8]) {
        assert!(
            off.checked_add(out.len()).is_some_and(|e| e <= self.len()),
            "ring access out of bounds"
        );
        let mut done = 0;
        while done < out.len() {
            let at = off + done;
            let (p, o) = (at / self.page, at % self.page);
            let n = (self.page - o).min(out.len() - done);
            self.pages[p].read(o, &mut out[done..done + n]);
            done += n;
        }
    }

    pub fn read_u64(&self, off: usize) -> u64 {
        let mut b = [0u8; 8];
        self.read(off, &mut b);
        u64::from_le_bytes(b)
    }

    /// Reads starting at `off`, wrapping to offset 0 at the end of the ring
    /// (how a WQE's SGL wraps).
    pub fn read_wrapping(&self, off: usize, out: &mut [u8]) {
        let len = self.len();
        let off = off % len;
        let first = out.len().min(len - off);
        self.read(off, &mut out[..first]);
        if first < out.len() {
            let rest = out.len() - first;
            self.read(0, &mut out[first..first + rest]);
        }
    }

    /// Writes a 64-byte CQE at ring offset `off` (a multiple of 64), the
    /// info dword last ([`Region::write_cqe`]).
    pub fn write_cqe(&self, off: usize, data: &[u8; 60], info: u32) {
        assert!(
            off.is_multiple_of(64) && off < self.len(),
            "CQE slot out of the ring"
        );
        self.pages[off / self.page].write_cqe(off % self.page, data, info);
    }
}

/// An address space SGEs name memory in, translated page by page: the
/// guest-physical space behind a PCI function's `gpa_mkey`.
pub trait DmaSpace: Send + Sync {
    /// The regions `[addr, addr + len)` occupies, in order, or `None` if
    /// any part of it is not mapped.
    fn translate(&self, addr: u64, len: usize) -> Option<Vec<Region>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paged_ring_reads_across_pages_and_wraps() {
        let mut a = vec![0u8; 256];
        let mut b = vec![0u8; 256];
        a[250..256].copy_from_slice(b"abcdef");
        b[0..4].copy_from_slice(b"ghij");
        // SAFETY: both vectors outlive the ring and are not otherwise used
        // while it is.
        let (ra, rb) = unsafe {
            (
                Region::new(a.as_mut_ptr() as usize, 256),
                Region::new(b.as_mut_ptr() as usize, 256),
            )
        };
        // b first, then a: ring offset 256 is a[0].
        let r = Ring::paged(vec![rb, ra]).unwrap();
        assert_eq!(r.len(), 512);
        let mut out = [0u8; 10];
        r.read_wrapping(506, &mut out);
        assert_eq!(&out, b"abcdefghij");
        r.write_cqe(256 + 64, &[7u8; 60], 0x8000_0001);
        assert_eq!(a[64..124], [7u8; 60]);
        assert_eq!(
            u32::from_le_bytes(a[124..128].try_into().unwrap()),
            0x8000_0001
        );
        assert!(Ring::paged(vec![rb, ra.sub(0, 128).unwrap()]).is_none());
        assert_eq!(Ring::flat(ra).as_flat(), Some(ra));
        assert_eq!(r.as_flat(), None);
        assert_eq!(ra.sub(250, 6).unwrap().addr(), ra.addr() + 250);
        assert!(ra.sub(250, 7).is_none());
    }
}
