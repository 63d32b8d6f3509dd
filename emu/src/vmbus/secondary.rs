//! A DPDK secondary process's view of the VMBus host, which lives in the
//! primary.
//!
//! With `uio_hv_generic` every process maps the same kernel memory: a
//! secondary opens `/dev/uioN` and each sub-channel's `ring` file and maps
//! them at the addresses the primary recorded. Here that memory is the
//! primary host's memfds, so a secondary opens them through the primary's
//! `/proc/<pid>/fd` (the host names each memfd `netvsc<N>-<what>`), and
//! leaves the sysfs tree, whose sub-channels the primary's host offered, as
//! it is. The host announces itself in `bus/vmbus/.mana-emu-host` (its
//! pid) under the sysfs root; DPDK reads only `devices/` there.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

fn owner_file(root: &Path) -> PathBuf {
    root.join("bus/vmbus/.mana-emu-host")
}

/// Records this process as the host of the tree under `root`.
pub fn announce(root: &Path) -> io::Result<()> {
    fs::write(owner_file(root), format!("{}\n", std::process::id()))
}

/// The pid of the live process, other than this one, whose host serves the
/// tree under `root`: this process is then a secondary of it.
pub fn primary(root: &Path) -> Option<u32> {
    let pid: u32 = fs::read_to_string(owner_file(root))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    (pid != std::process::id() && Path::new(&format!("/proc/{pid}/fd")).exists()).then_some(pid)
}

/// The primary's memfd named `name`, opened read-write.
fn open_memfd(pid: u32, name: &str, cloexec: bool) -> io::Result<OwnedFd> {
    let want = format!("/memfd:{name} (deleted)");
    let dir = format!("/proc/{pid}/fd");
    for e in fs::read_dir(&dir)?.flatten() {
        if fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == want.as_str()) {
            // (std opens with O_CLOEXEC.)
            let f = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(e.path())?;
            let fd = OwnedFd::from(f);
            if !cloexec {
                // SAFETY: clearing FD_CLOEXEC on our own descriptor.
                unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, 0) };
            }
            return Ok(fd);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("the primary (pid {pid}) has no memory {name:?}"),
    ))
}

/// `/dev/uioN` descriptors handed out in this process: (file identity, N).
static UIO_FILES: Mutex<Vec<((u64, u64), usize)>> = Mutex::new(Vec::new());

/// Opens `/dev/uio<n>` of the primary's host: a descriptor whose `mmap`
/// at `K * 4096` maps the host's map K ([`map`]).
pub fn open_uio(pid: u32, n: usize, cloexec: bool) -> io::Result<RawFd> {
    // Any of the NIC's memfds serves as the descriptor's identity.
    let fd = open_memfd(pid, &format!("netvsc{n}-int"), cloexec)?;
    let id = super::netvsp::file_id(fd.as_raw_fd())?;
    let mut files = UIO_FILES.lock().unwrap_or_else(|e| e.into_inner());
    files.retain(|(i, _)| *i != id);
    files.push((id, n));
    Ok(fd.into_raw_fd())
}

/// The memfd name of uio map `k` of NIC `n` (see `Nic::map`).
fn map_name(n: usize, k: usize) -> Option<String> {
    let what = ["ring0", "int", "monitor", "recv", "send"].get(k)?;
    Some(format!("netvsc{n}-{what}"))
}

/// For `mmap(fd, offset K * 4096)` in a secondary of the host serving the
/// tree under `root`: the primary's map K and its size, when `fd` is a
/// `/dev/uioN` descriptor this process opened.
pub fn map(root: &Path, fd: RawFd, k: usize) -> Option<io::Result<(OwnedFd, usize)>> {
    let id = super::netvsp::file_id(fd).ok()?;
    let n = UIO_FILES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(i, _)| *i == id)?
        .1;
    let Some(pid) = primary(root) else {
        return Some(Err(io::Error::from_raw_os_error(libc::ENODEV)));
    };
    Some((|| {
        let name = map_name(n, k).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        let m = open_memfd(pid, &name, true)?;
        let size = fs::File::from(m.try_clone()?).metadata()?.len() as usize;
        Ok((m, size))
    })())
}

/// Opens the ring memory of channel `relid` of NIC `n` (primary channel
/// `primary_relid`; sub-channel `i` has `primary_relid + i`).
pub fn open_ring(
    pid: u32,
    n: usize,
    primary_relid: u32,
    relid: u32,
    cloexec: bool,
) -> io::Result<RawFd> {
    let index = relid
        .checked_sub(primary_relid)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))?;
    Ok(open_memfd(pid, &format!("netvsc{n}-ring{index}"), cloexec)?.into_raw_fd())
}
