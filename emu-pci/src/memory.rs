//! Guest memory as the device sees it: the guest-physical ranges QEMU
//! shares over vfio-user (`DMA_MAP` with a memfd), mapped into this process.
//!
//! This is the one module that dereferences guest memory. A [`Window`] is a
//! bounds-checked view of one guest-physical range; it holds its mapping
//! alive, so a range QEMU unmaps (`DMA_UNMAP`) while a queue still points
//! into it stays mapped until the queue lets go (a device with a stale
//! IOMMU entry, not a dangling pointer). Guest memory is shared with a
//! running guest, so every access is a raw copy, never a Rust reference.
//! The data path reaches the same memory through the device model's
//! regions ([`GuestMemory::regions`], and the [`DmaSpace`] a memory key
//! translates through).

use mana_emu::mem::{DmaSpace, Region};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

/// One `DMA_MAP`: `len` bytes of guest-physical space at `gpa`, mapped at
/// `host` in this process.
struct Mapping {
    gpa: u64,
    len: u64,
    host: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `host`/`len` are exactly what mmap returned in
        // `GuestMemory::map`, and this is the last reference to the mapping
        // (it lives in an Arc), so no Window can reach it any more.
        unsafe {
            libc::munmap(self.host as *mut libc::c_void, self.len as usize);
        }
    }
}

/// The guest-physical address space the device may reach. Clones share
/// the same maps (the device model's memory key holds one).
///
/// A range QEMU unmaps is retired, not unmapped: it stays mapped in this
/// process until the last clone is dropped, so a region the device model
/// derived from it never dangles (the model may still point into it until
/// the driver destroys the queue).
#[derive(Clone, Default)]
pub struct GuestMemory {
    maps: Arc<RwLock<Maps>>,
}

#[derive(Default)]
struct Maps {
    live: Vec<Arc<Mapping>>,
    retired: Vec<Arc<Mapping>>,
}

/// A bounds-checked view of `len` bytes of guest memory starting at a
/// guest-physical address.
#[derive(Clone)]
pub struct Window {
    host: usize,
    len: usize,
    gpa: u64,
    _map: Arc<Mapping>,
}

impl std::fmt::Debug for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Window(gpa {:#x}, {} bytes)", self.gpa, self.len)
    }
}

impl GuestMemory {
    fn maps(&self) -> std::sync::RwLockReadGuard<'_, Maps> {
        self.maps.read().unwrap_or_else(|e| e.into_inner())
    }
    fn maps_mut(&self) -> std::sync::RwLockWriteGuard<'_, Maps> {
        self.maps.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Maps `size` bytes of `fd` at file offset `offset` as guest-physical
    /// `[gpa, gpa + size)`.
    pub fn map(&self, gpa: u64, size: u64, fd: &File, offset: u64) -> io::Result<()> {
        if size == 0 || gpa.checked_add(size).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("DMA_MAP of {size:#x} bytes at {gpa:#x}"),
            ));
        }
        // SAFETY: a fresh shared mapping of a file descriptor QEMU handed
        // over; the kernel picks the address, so nothing of ours is
        // overlapped. The result is checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut m = self.maps_mut();
        m.retire(gpa, size);
        m.live.push(Arc::new(Mapping {
            gpa,
            len: size,
            host: p as usize,
        }));
        Ok(())
    }

    /// Forgets `[gpa, gpa + size)` for new accesses.
    pub fn unmap(&self, gpa: u64, size: u64) {
        self.maps_mut().retire(gpa, size);
    }

    /// Guest-physical bytes mapped.
    pub fn mapped_bytes(&self) -> u64 {
        self.maps().live.iter().map(|m| m.len).sum()
    }

    /// A window on `[gpa, gpa + len)`, if that range lies inside one mapping.
    pub fn window(&self, gpa: u64, len: usize) -> Option<Window> {
        let end = gpa.checked_add(len as u64)?;
        let maps = self.maps();
        let m = maps
            .live
            .iter()
            .find(|m| gpa >= m.gpa && end <= m.gpa + m.len)?;
        Some(Window {
            host: m.host + (gpa - m.gpa) as usize,
            len,
            gpa,
            _map: m.clone(),
        })
    }

    /// `[gpa, gpa + len)` as device-model regions, split where mappings
    /// end; `None` if any byte is not guest memory.
    pub fn regions(&self, gpa: u64, len: usize) -> Option<Vec<Region>> {
        let mut out = Vec::new();
        let (mut at, end) = (gpa, gpa.checked_add(len as u64)?);
        let maps = self.maps();
        while at < end {
            let m = maps
                .live
                .iter()
                .find(|m| at >= m.gpa && at < m.gpa + m.len)?;
            let n = (m.gpa + m.len).min(end) - at;
            // SAFETY: `[at, at + n)` lies inside mapping `m`, which is
            // never unmapped while this GuestMemory or a clone exists
            // (unmapped ranges are retired, see the type's doc). The
            // regions go to the device model of the same function, which
            // holds a clone through its memory key and is dropped before
            // the function's own GuestMemory.
            out.push(unsafe { Region::new(m.host + (at - m.gpa) as usize, n as usize) });
            at += n;
        }
        Some(out)
    }
}

impl Maps {
    fn retire(&mut self, gpa: u64, size: u64) {
        let end = gpa.saturating_add(size);
        let (gone, keep): (Vec<_>, Vec<_>) = self
            .live
            .drain(..)
            .partition(|m| m.gpa < end && gpa < m.gpa + m.len);
        self.live = keep;
        self.retired.extend(gone);
    }
}

impl DmaSpace for GuestMemory {
    fn translate(&self, addr: u64, len: usize) -> Option<Vec<Region>> {
        self.regions(addr, len)
    }
}

impl Window {
    pub fn gpa(&self) -> u64 {
        self.gpa
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The host address and length, for building a region of the device
    /// model over the same bytes while this window is kept alive.
    pub fn host_range(&self) -> (usize, usize) {
        (self.host, self.len)
    }

    fn check(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|e| e <= self.len)
    }

    /// Copies bytes out of guest memory. Panics if out of the window (a bug
    /// of the device model: callers size windows from validated requests).
    pub fn read(&self, off: usize, out: &mut [u8]) {
        assert!(self.check(off, out.len()), "guest read out of window");
        // SAFETY: `[off, off + out.len())` is inside the window (checked),
        // which lies inside a live mapping (the Arc in `_map`); `out` is
        // ours, so the ranges cannot overlap. The guest may write these
        // bytes concurrently: a byte copy sees some mix, as DMA would.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (self.host + off) as *const u8,
                out.as_mut_ptr(),
                out.len(),
            )
        }
    }

    /// Copies bytes into guest memory.
    pub fn write(&self, off: usize, data: &[u8]) {
        assert!(self.check(off, data.len()), "guest write out of window");
        // SAFETY: in the window (checked), which lies inside a live mapping
        // (the Arc in `_map`); `data` is ours, so no overlap. Concurrent
        // guest readers see a partial copy, as with DMA.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), (self.host + off) as *mut u8, data.len())
        }
    }

    pub fn read_u32(&self, off: usize) -> u32 {
        let mut b = [0u8; 4];
        self.read(off, &mut b);
        u32::from_le_bytes(b)
    }

    /// Writes an entry whose last dword carries the owner bits (a CQE or an
    /// EQE): the body first, a release fence, then the last dword in one
    /// 32-bit store, so a driver that sees the new owner bits sees the body.
    pub fn write_entry(&self, off: usize, body: &[u8], last: u32) {
        let n = body.len();
        assert!(self.check(off, n + 4) && (self.host + off + n).is_multiple_of(4));
        self.write(off, body);
        fence(Ordering::Release);
        // SAFETY: in bounds (checked) and 4-byte aligned (checked);
        // AtomicU32 has u32's layout, and an atomic store is the right way
        // to write memory another agent (the guest) reads concurrently.
        let p = unsafe { &*((self.host + off + n) as *const AtomicU32) };
        p.store(last.to_le(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn memfd(len: usize) -> File {
        // SAFETY: memfd_create with a static NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"guest".as_ptr(), 0) };
        assert!(fd >= 0);
        // SAFETY: a descriptor we just created and own.
        let mut f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.write_all(&vec![0u8; len]).unwrap();
        f
    }

    #[test]
    fn windows_translate_and_check_bounds() {
        let f = memfd(0x4000);
        let gm = GuestMemory::default();
        gm.map(0x10_0000, 0x2000, &f, 0x1000).unwrap();
        let w = gm.window(0x10_1000, 16).unwrap();
        w.write(0, b"hello");
        let mut b = [0u8; 5];
        gm.window(0x10_1000, 5).unwrap().read(0, &mut b);
        assert_eq!(&b, b"hello");
        // File offset 0x1000 + 0x1000 holds it.
        let mut all = vec![0u8; 0x4000];
        std::os::unix::fs::FileExt::read_at(&f, &mut all, 0).unwrap();
        assert_eq!(&all[0x2000..0x2005], b"hello");
        assert!(gm.window(0x10_1ff0, 0x20).is_none());
        assert!(gm.window(0x0f_ffff, 2).is_none());
        w.write_entry(4, &[1, 2, 3, 4, 5, 6, 7, 8], 0xa000_0001);
        assert_eq!(w.read_u32(12), 0xa000_0001);
        // A range across two mappings splits into two regions.
        gm.map(0x10_2000, 0x1000, &f, 0).unwrap();
        let r = gm.regions(0x10_1ff0, 0x20).unwrap();
        assert_eq!(r.iter().map(|r| r.len()).collect::<Vec<_>>(), [0x10, 0x10]);
        assert!(gm.regions(0x10_2ff0, 0x20).is_none());
    }

    #[test]
    fn unmapped_window_stays_valid() {
        let f = memfd(0x1000);
        let gm = GuestMemory::default();
        gm.map(0, 0x1000, &f, 0).unwrap();
        let w = gm.window(0x10, 4).unwrap();
        gm.unmap(0, 0x1000);
        assert!(gm.window(0x10, 4).is_none());
        assert!(gm.regions(0x10, 4).is_none());
        w.write(0, b"abcd");
        assert_eq!(w.read_u32(0), u32::from_le_bytes(*b"abcd"));
    }
}
