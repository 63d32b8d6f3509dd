//! Memory the host shares with the guest: a memfd the host maps once and
//! the guest maps through `/dev/uioN` or a sub-channel's `ring` file (the
//! memory `uio_hv_generic` allocates and exposes in the kernel).

use crate::mem::Region;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

pub struct SharedMem {
    fd: OwnedFd,
    region: Region,
}

impl SharedMem {
    /// A zeroed memfd of `len` bytes (a multiple of the page size), mapped
    /// read-write for the host.
    pub fn new(name: &std::ffi::CStr, len: usize) -> io::Result<SharedMem> {
        assert!(len > 0 && len.is_multiple_of(4096));
        // SAFETY: memfd_create with a NUL-terminated name.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sizing our own memfd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a shared mapping of the whole memfd; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the mapping lives until `drop` unmaps it, after every user
        // of the region (owned by this value) is gone.
        let region = unsafe { Region::new(p as usize, len) };
        Ok(SharedMem { fd, region })
    }

    pub fn region(&self) -> Region {
        self.region
    }

    pub fn len(&self) -> usize {
        self.region.len()
    }

    pub fn is_empty(&self) -> bool {
        self.region.is_empty()
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A 32-bit word at `off` (4-byte aligned) shared with the guest.
    pub fn word(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len());
        // SAFETY: in bounds and aligned (the mapping is page aligned);
        // AtomicU32 has u32's layout and the memory lives as long as `self`.
        // The guest accesses these words with atomics or plain aligned
        // 32-bit loads and stores, which do not tear on x86-64.
        unsafe { &*((self.region.addr() + off) as *const AtomicU32) }
    }

    /// Atomically clears and returns the bits of `mask` set in the word at
    /// `off` (how the host consumes monitor and interrupt-page bits).
    pub fn take_bits(&self, off: usize, mask: u32) -> u32 {
        let w = self.word(off);
        if w.load(Ordering::Relaxed) & mask == 0 {
            return 0;
        }
        w.fetch_and(!mask, Ordering::AcqRel) & mask
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        // SAFETY: unmapping the host's own mapping made in `new`; the guest's
        // mappings of the memfd are separate and stay valid.
        unsafe { libc::munmap(self.region.addr() as *mut libc::c_void, self.region.len()) };
    }
}
