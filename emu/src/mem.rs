//! Access to driver memory (queue rings, packet buffers), the one place the
//! device model touches raw addresses.
//!
//! A [`Region`] is created only for memory the driver handed to the device:
//! queue buffers it allocated through the context allocator, and ranges it
//! registered with `ibv_reg_mr`. Every access is bounds-checked against the
//! region, so a bogus SGE yields an error CQE rather than a stray write.

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
