//! File-descriptor edges of the device model: the eventfd that wakes the
//! device thread, the pipes behind async-event and completion-channel fds,
//! the memfd doorbell page, and the few syscalls made on them. The device
//! model itself (`crate::device`) is safe Rust and calls only these.

use crate::doorbell::PAGE;
use crate::mem::Region;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A non-blocking, close-on-exec eventfd with a zero count.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd(2) takes no pointers; it returns a new fd or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by eventfd(2): open, and owned by no
    // one else, so the OwnedFd is its only owner.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A non-blocking, close-on-exec pipe: (read end, write end).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2(2) writes two ints into `fds`, a live 2-int array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created by pipe2(2) and are owned by no
    // one else; each goes into exactly one OwnedFd.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Writes all of `data` to `fd` in one write(2); false if it wrote less
/// (a full non-blocking pipe, a closed fd).
pub(crate) fn write_fd(fd: RawFd, data: &[u8]) -> bool {
    // SAFETY: write(2) reads `data.len()` bytes from `data`, a live slice;
    // a bad fd only makes it fail with EBADF.
    unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) == data.len() as isize }
}

/// A memfd-backed doorbell page, mapped shared for the device side.
pub(crate) fn memfd_page() -> io::Result<(OwnedFd, Region)> {
    // SAFETY: memfd_create(2) reads the name, a NUL-terminated C string
    // literal; it returns a new fd or -1.
    let fd = unsafe { libc::memfd_create(c"mana-db".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by memfd_create(2) and is owned by no
    // one else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate(2) on the memfd we own; no pointers involved.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), PAGE as libc::off_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new shared mapping chosen by the kernel (null hint), so it
    // replaces no existing mapping; the memfd is PAGE bytes long.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `p` is a readable and writable mapping of PAGE bytes that is
    // never unmapped (contexts keep it for the process lifetime: a
    // secondary may still hold the fd), so it outlives every Region use.
    Ok((fd, unsafe { Region::new(p as usize, PAGE) }))
}

/// Waits up to `timeout_ms` (0: just looks) for `fd` to become readable;
/// returns poll(2)'s `revents` (0 on timeout or error).
/// Unmaps a context's doorbell page (what [`memfd_page`] returned), once
/// the device forgets the context: a driver storing to it that late has a
/// bug worth a fault.
pub(crate) fn release_page(page: Region) {
    // SAFETY: the page memfd_page mapped for a context (PAGE bytes at its
    // address); the device's last copy of its address was the forgotten
    // context's record, which the caller has just dropped, so nothing in
    // the device reads it any more.
    unsafe { libc::munmap(page.addr() as *mut libc::c_void, PAGE) };
}

pub(crate) fn poll_in(fd: RawFd, timeout_ms: i32) -> i16 {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) reads and writes exactly one pollfd, `pfd`, which
    // lives on this stack frame for the call.
    unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    pfd.revents
}

/// poll(2) over several fds (each entry's `revents` filled in); waits
/// without end with `timeout_ms` -1. Returns poll's result.
pub(crate) fn poll_many(fds: &mut [libc::pollfd], timeout_ms: i32) -> i32 {
    // SAFETY: poll(2) reads and writes exactly `fds.len()` pollfds, the
    // entries of a live mutable slice, for the duration of the call.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) }
}

/// Reads (and so resets) an eventfd's counter; nothing if it is zero.
pub(crate) fn drain_eventfd(fd: RawFd) {
    let mut b = [0u8; 8];
    // SAFETY: read(2) writes at most 8 bytes into `b`, an 8-byte buffer on
    // this stack frame.
    unsafe { libc::read(fd, b.as_mut_ptr().cast(), 8) };
}

/// Reads what is available from `fd` into `buf`; read(2)'s result (bytes
/// read, 0 at end of file, -1 with errno set, e.g. EAGAIN).
pub(crate) fn read_fd(fd: RawFd, buf: &mut [u8]) -> isize {
    // SAFETY: read(2) writes at most `buf.len()` bytes into `buf`, a live
    // mutable slice; a bad fd only makes it fail with EBADF.
    unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) }
}

/// A non-blocking, close-on-exec inotify instance; `None` if the kernel
/// refuses one (e.g. the per-user instance limit).
pub(crate) fn inotify() -> Option<OwnedFd> {
    // SAFETY: inotify_init1(2) takes no pointers; it returns a new fd or -1.
    let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    // SAFETY: a non-negative `fd` was just returned by inotify_init1(2) and
    // is owned by no one else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds an inotify watch for `path`; the watch descriptor, or -1 (errno
/// set, or the path holds a NUL byte).
pub(crate) fn inotify_add_watch(fd: RawFd, path: &std::path::Path, mask: u32) -> i32 {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return -1;
    };
    // SAFETY: inotify_add_watch(2) reads the path, a NUL-terminated string
    // that `c` keeps alive for the call.
    unsafe { libc::inotify_add_watch(fd, c.as_ptr(), mask) }
}

/// Removes watch `wd` from inotify instance `fd`.
pub(crate) fn inotify_rm_watch(fd: RawFd, wd: i32) {
    // SAFETY: inotify_rm_watch(2) takes no pointers; a stale `wd` only makes
    // it fail with EINVAL.
    unsafe { libc::inotify_rm_watch(fd, wd) };
}
