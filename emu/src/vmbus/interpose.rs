//! What the preload library's libc hooks do for the emulated VMBus device.
//!
//! DPDK hard-codes the paths of a Hyper-V guest: the vmbus bus scans
//! `/sys/bus/vmbus/devices`, maps `/dev/uioN` and sub-channel `ring` files,
//! and netvsc looks for a hot-added VF under `/sys/bus/pci/devices/<bdf>/net`
//! and asks its MAC with `SIOCGIFHWADDR`. The hooks (exported by
//! `libmana_emu.so` only, see [`crate::export_libc_hooks`]) send those to
//! the emulator:
//!
//! * `/sys/bus/vmbus/…` and `/sys/bus/pci/devices/<emulated bdf>/…` are
//!   redirected into the emulator's sysfs root (`open*`, `fopen*`,
//!   `opendir`, `access`);
//! * `/dev/uioN` opens the NIC's uio descriptor (a socket: `read` waits for
//!   interrupts, `write` sets the interrupt mask, as with `uio_hv_generic`),
//!   and `mmap` of it at offset `K * 4096` maps map `K`'s memory;
//! * a channel's `ring` file opens the channel's ring memory;
//! * `SIOCGIFHWADDR` on an emulated port's interface name answers its MAC
//!   while its netdev exists in the fake tree;
//! * kobject-uevent netlink sockets become private sockets fed by
//!   [`crate::uevent`], so the process sees the emulator's hot-plug events
//!   and not the machine's.
//!
//! Everything else goes to libc unchanged. The configuration is read once,
//! from the library's constructor ([`init`]), before any hook needs it; a
//! hook never takes a lock the emulator holds while calling libc.

use super::host::VmbusHost;
use crate::config::Config;
use std::ffi::{c_char, c_int, CStr, CString};
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// What the hooks know, fixed at load time.
pub struct Redirect {
    root: PathBuf,
    pcis: Vec<String>,
    /// (ifname, MAC, netdev directory in the fake tree).
    netdevs: Vec<(String, [u8; 6], PathBuf)>,
    uio_count: usize,
    /// (uuid, primary channel relid) of each synthetic NIC, by uio index.
    nics: Vec<(String, u32)>,
}

static REDIRECT: OnceLock<Redirect> = OnceLock::new();
static HOST: Mutex<Option<Weak<VmbusHost>>> = Mutex::new(None);

/// Called from the preload library's constructor with the configuration.
pub fn init(cfg: &Config) {
    let root = cfg.options.sysfs_root.clone();
    let mut netdevs = Vec::new();
    for a in &cfg.adapters {
        for (i, p) in a.ports.iter().enumerate() {
            let dir = crate::sysfs::netdev_dir(&root, a, i);
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            if let Ok(mac) = crate::config::parse_mac(&p.mac) {
                netdevs.push((name, mac, dir));
            }
        }
    }
    let _ = REDIRECT.set(Redirect {
        pcis: cfg.adapters.iter().map(|a| a.pci.clone()).collect(),
        netdevs,
        uio_count: cfg.netvsc.len(),
        nics: cfg
            .netvsc
            .iter()
            .map(|n| (n.uuid().to_string(), n.relid()))
            .collect(),
        root,
    });
}

pub fn active() -> bool {
    REDIRECT.get().is_some()
}

/// Registers the running host (the emulator creates it with its devices).
pub fn set_host(h: &Arc<VmbusHost>) {
    *HOST.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::downgrade(h));
}

fn host() -> Option<Arc<VmbusHost>> {
    let cur = HOST
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|w| w.upgrade());
    if cur.is_some() {
        return cur;
    }
    // The guest opened the device before any verbs call created the
    // emulator: create it now.
    crate::verbs::global()?;
    HOST.lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|w| w.upgrade())
}

/// What a path resolves to.
pub enum Target {
    /// Not ours: libc as is.
    Pass,
    /// The same request on this path.
    Path(CString),
    /// `/dev/uio<n>`.
    Uio(usize),
    /// A channel's `ring` file: (uuid, relid, the placeholder's path for
    /// calls other than `open`).
    Ring(String, u32, CString),
}

/// Resolves `path` (absolute paths only; relative ones pass).
pub fn resolve(path: &CStr) -> Target {
    let Some(r) = REDIRECT.get() else {
        return Target::Pass;
    };
    let Ok(p) = path.to_str() else {
        return Target::Pass;
    };
    if let Some(n) = p.strip_prefix("/dev/uio") {
        return match n.parse::<usize>() {
            Ok(i) if i < r.uio_count && !n.starts_with('+') => Target::Uio(i),
            _ => Target::Pass,
        };
    }
    let mapped = if let Some(rest) = p.strip_prefix("/sys/bus/vmbus") {
        if !(rest.is_empty() || rest.starts_with('/')) {
            return Target::Pass;
        }
        let mapped = format!("{}/bus/vmbus{rest}", r.root.display());
        if let Some((uuid, relid)) = ring_path(rest) {
            return match CString::new(mapped) {
                Ok(c) => Target::Ring(uuid, relid, c),
                Err(_) => Target::Pass,
            };
        }
        mapped
    } else if let Some(rest) = p.strip_prefix("/sys/bus/pci/devices/") {
        let bdf = rest.split('/').next().unwrap_or("");
        if !r.pcis.iter().any(|a| a == bdf) {
            return Target::Pass;
        }
        format!("{}/bus/pci/devices/{rest}", r.root.display())
    } else {
        return Target::Pass;
    };
    match CString::new(mapped) {
        Ok(c) => Target::Path(c),
        Err(_) => Target::Pass,
    }
}

/// `/devices/<uuid>/channels/<relid>/ring` under `/sys/bus/vmbus`.
fn ring_path(rest: &str) -> Option<(String, u32)> {
    let parts: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["devices", uuid, "channels", relid, "ring"] => {
            Some((uuid.to_string(), relid.parse().ok()?))
        }
        _ => None,
    }
}

fn set_errno(e: c_int) {
    // SAFETY: this thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// Opens `/dev/uio<n>` or a ring file of a secondary process's primary.
fn open_in_primary(r: &Redirect, pid: u32, t: &Target, cloexec: bool) -> RawFd {
    let res = match t {
        Target::Uio(n) => super::secondary::open_uio(pid, *n, cloexec),
        Target::Ring(uuid, relid, _) => match r.nics.iter().position(|(u, _)| u == uuid) {
            Some(n) => super::secondary::open_ring(pid, n, r.nics[n].1, *relid, cloexec),
            None => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
        },
        _ => Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
    };
    res.unwrap_or_else(|e| {
        set_errno(e.raw_os_error().unwrap_or(libc::ENOENT));
        -1
    })
}

/// Opens `/dev/uio<n>` or a ring file; -1 with errno on failure.
pub fn open_special(t: &Target, flags: c_int) -> RawFd {
    let cloexec = flags & libc::O_CLOEXEC != 0;
    if let Some(r) = REDIRECT.get() {
        if let Some(pid) = super::secondary::primary(&r.root) {
            return open_in_primary(r, pid, t, cloexec);
        }
    }
    let Some(h) = host() else {
        set_errno(libc::ENODEV);
        return -1;
    };
    let fd = match t {
        Target::Uio(n) => match h.uio(*n) {
            Some(nic) => nic.open_uio(cloexec).unwrap_or(-1),
            None => {
                set_errno(libc::ENOENT);
                -1
            }
        },
        Target::Ring(uuid, relid, _) => match h.by_uuid(uuid).and_then(|n| n.channel_fd(*relid)) {
            Some(mfd) => {
                let cmd = if cloexec {
                    libc::F_DUPFD_CLOEXEC
                } else {
                    libc::F_DUPFD
                };
                // SAFETY: duplicating the channel's memfd (the host keeps its own).
                unsafe { libc::fcntl(mfd, cmd, 0) }
            }
            None => {
                // The channel is not offered (yet): as if the file were missing.
                set_errno(libc::ENOENT);
                -1
            }
        },
        _ => {
            set_errno(libc::EINVAL);
            -1
        }
    };
    fd
}

/// The descriptor an `mmap` of a uio map goes to instead.
pub enum MapFd {
    /// The host's memfd (this process's host).
    Host(RawFd),
    /// The primary's memfd, opened for this mapping (a secondary process).
    Opened(std::os::fd::OwnedFd),
}

impl MapFd {
    pub fn raw(&self) -> RawFd {
        use std::os::fd::AsRawFd;
        match self {
            MapFd::Host(fd) => *fd,
            MapFd::Opened(fd) => fd.as_raw_fd(),
        }
    }
}

/// For `mmap` of a descriptor: `Some(map's memfd)` when `fd` is a
/// `/dev/uioN` descriptor and `off` names map `off / 4096`; `Some(Err)`
/// for a uio descriptor with a bad map or length; `None` otherwise.
pub fn uio_map(fd: RawFd, len: usize, off: i64) -> Option<Result<MapFd, c_int>> {
    if fd < 0 || !active() {
        return None;
    }
    let h = HOST
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|w| w.upgrade());
    let Some(h) = h else {
        if off < 0 || off % 4096 != 0 {
            return None;
        }
        let root = &REDIRECT.get()?.root;
        return match super::secondary::map(root, fd, (off / 4096) as usize)? {
            Ok((m, size)) if len <= size && len > 0 => Some(Ok(MapFd::Opened(m))),
            Ok(_) => Some(Err(libc::EINVAL)),
            Err(e) => Some(Err(e.raw_os_error().unwrap_or(libc::EINVAL))),
        };
    };
    let id = super::netvsp::file_id(fd).ok()?;
    let nic = h.uio_by_file(id)?;
    if off < 0 || off % 4096 != 0 {
        return Some(Err(libc::EINVAL));
    }
    match nic.map((off / 4096) as usize) {
        Some((mfd, size)) if len <= size && len > 0 => Some(Ok(MapFd::Host(mfd))),
        _ => Some(Err(libc::EINVAL)),
    }
}

/// `SIOCGIFHWADDR` for an emulated port's interface: fills `ifr` and
/// returns true when the name is one and its netdev exists.
///
/// # Safety
/// `ifr` must point to a `struct ifreq` (what the ioctl takes).
pub unsafe fn ifhwaddr(ifr: *mut libc::ifreq) -> bool {
    let Some(r) = REDIRECT.get() else {
        return false;
    };
    if ifr.is_null() {
        return false;
    }
    // SAFETY: the caller passes a valid ifreq (the ioctl's contract).
    let req = unsafe { &mut *ifr };
    let name_bytes: Vec<u8> = req
        .ifr_name
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    let Some((_, mac, dir)) = r
        .netdevs
        .iter()
        .find(|(n, _, _)| n.as_bytes() == name_bytes)
    else {
        return false;
    };
    if !dir.exists() {
        return false;
    }
    // SAFETY: writing the hwaddr member of the union the request names.
    unsafe {
        req.ifr_ifru.ifru_hwaddr.sa_family = libc::ARPHRD_ETHER;
        for (d, s) in req.ifr_ifru.ifru_hwaddr.sa_data.iter_mut().zip(mac.iter()) {
            *d = *s as c_char;
        }
    }
    true
}

/// Looks up libc's definition of `name` (the one after this library).
pub fn next_symbol(name: &CStr) -> usize {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) as usize }
}

/// Exports the libc hooks from the crate that expands it: only
/// `libmana_emu.so` does, so test binaries linking the rlib keep libc's
/// functions. Every hook forwards to libc unless [`resolve`] (or the uio
/// and uevent checks) says the call is the emulator's.
///
/// Every hook is called with what libc's function of the same name takes
/// (its C contract): that is the safety argument of each forwarding call
/// below, which passes the caller's arguments, or a redirected path the
/// hook owns, to libc's own definition.
#[macro_export]
macro_rules! export_libc_hooks {
    () => {
        mod libc_hooks {
            use ::std::ffi::{c_char, c_int, c_void, CStr};
            use $crate::vmbus::interpose::{self, Target};

            macro_rules! real {
                ($name:literal, $ty:ty) => {{
                    static P: ::std::sync::atomic::AtomicUsize =
                        ::std::sync::atomic::AtomicUsize::new(0);
                    let mut p = P.load(::std::sync::atomic::Ordering::Relaxed);
                    if p == 0 {
                        p = interpose::next_symbol($name);
                        assert!(p != 0, "libc has no {:?}", $name);
                        P.store(p, ::std::sync::atomic::Ordering::Relaxed);
                    }
                    // SAFETY: `p` is libc's (non-null) definition of this
                    // very symbol, whose C signature this type spells.
                    unsafe { ::std::mem::transmute::<usize, $ty>(p) }
                }};
            }

            type OpenFn = unsafe extern "C" fn(*const c_char, c_int, u32) -> c_int;
            type OpenatFn = unsafe extern "C" fn(c_int, *const c_char, c_int, u32) -> c_int;
            type FopenFn = unsafe extern "C" fn(*const c_char, *const c_char) -> *mut c_void;
            type OpendirFn = unsafe extern "C" fn(*const c_char) -> *mut c_void;
            type AccessFn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
            type MmapFn =
                unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, c_int, i64) -> *mut c_void;
            type IoctlFn = unsafe extern "C" fn(c_int, u64, *mut c_void) -> c_int;
            type SocketFn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;
            type BindFn = unsafe extern "C" fn(c_int, *const c_void, u32) -> c_int;

            /// What a path argument resolves to; `None` for a null path.
            ///
            /// # Safety
            /// `p` is null or a NUL-terminated string (libc's contract).
            unsafe fn target(p: *const c_char) -> Option<Target> {
                if p.is_null() {
                    return None;
                }
                // SAFETY: non-null and NUL-terminated, per this fn's contract.
                Some(interpose::resolve(unsafe { CStr::from_ptr(p) }))
            }

            unsafe fn do_open(real: OpenFn, p: *const c_char, flags: c_int, mode: u32) -> c_int {
                // SAFETY (this block and the calls): the caller's arguments
                // (libc's contract), or a path this hook owns.
                unsafe {
                    match target(p) {
                        Some(Target::Path(c)) => real(c.as_ptr(), flags, mode),
                        Some(t @ (Target::Uio(_) | Target::Ring(..))) => {
                            interpose::open_special(&t, flags)
                        }
                        _ => real(p, flags, mode),
                    }
                }
            }

            // Variadic in C: the mode is read only with O_CREAT/O_TMPFILE and
            // arrives in the third argument register either way (x86-64).
            #[no_mangle]
            pub unsafe extern "C" fn open(p: *const c_char, flags: c_int, mode: u32) -> c_int {
                // SAFETY: forwarding the caller's arguments (libc's contract).
                unsafe { do_open(real!(c"open", OpenFn), p, flags, mode) }
            }
            #[no_mangle]
            pub unsafe extern "C" fn open64(p: *const c_char, flags: c_int, mode: u32) -> c_int {
                // SAFETY: forwarding the caller's arguments (libc's contract).
                unsafe { do_open(real!(c"open64", OpenFn), p, flags, mode) }
            }

            unsafe fn do_openat(
                real: OpenatFn,
                d: c_int,
                p: *const c_char,
                flags: c_int,
                mode: u32,
            ) -> c_int {
                // SAFETY: the caller's arguments (libc's contract), or a path
                // this hook owns (absolute: `d` is then ignored by libc).
                unsafe {
                    match target(p) {
                        Some(Target::Path(c)) => real(d, c.as_ptr(), flags, mode),
                        Some(t @ (Target::Uio(_) | Target::Ring(..))) => {
                            interpose::open_special(&t, flags)
                        }
                        _ => real(d, p, flags, mode),
                    }
                }
            }
            #[no_mangle]
            pub unsafe extern "C" fn openat(
                d: c_int,
                p: *const c_char,
                flags: c_int,
                mode: u32,
            ) -> c_int {
                // SAFETY: forwarding the caller's arguments (libc's contract).
                unsafe { do_openat(real!(c"openat", OpenatFn), d, p, flags, mode) }
            }
            #[no_mangle]
            pub unsafe extern "C" fn openat64(
                d: c_int,
                p: *const c_char,
                flags: c_int,
                mode: u32,
            ) -> c_int {
                // SAFETY: forwarding the caller's arguments (libc's contract).
                unsafe { do_openat(real!(c"openat64", OpenatFn), d, p, flags, mode) }
            }

            unsafe fn do_fopen(real: FopenFn, p: *const c_char, m: *const c_char) -> *mut c_void {
                // SAFETY: the caller's arguments (libc's contract), or a path
                // this hook owns.
                unsafe {
                    match target(p) {
                        Some(Target::Path(c) | Target::Ring(_, _, c)) => real(c.as_ptr(), m),
                        _ => real(p, m),
                    }
                }
            }
            #[no_mangle]
            pub unsafe extern "C" fn fopen(p: *const c_char, m: *const c_char) -> *mut c_void {
                // SAFETY: forwarding the caller's arguments (libc's contract).
                unsafe { do_fopen(real!(c"fopen", FopenFn), p, m) }
            }
            #[no_mangle]
            pub unsafe extern "C" fn fopen64(p: *const c_char, m: *const c_char) -> *mut c_void {
                // SAFETY: forwarding the caller's arguments (libc's contract).
                unsafe { do_fopen(real!(c"fopen64", FopenFn), p, m) }
            }

            #[no_mangle]
            pub unsafe extern "C" fn opendir(p: *const c_char) -> *mut c_void {
                let real = real!(c"opendir", OpendirFn);
                // SAFETY: the caller's argument (libc's contract), or a path
                // this hook owns.
                unsafe {
                    match target(p) {
                        Some(Target::Path(c) | Target::Ring(_, _, c)) => real(c.as_ptr()),
                        _ => real(p),
                    }
                }
            }

            #[no_mangle]
            pub unsafe extern "C" fn access(p: *const c_char, mode: c_int) -> c_int {
                let real = real!(c"access", AccessFn);
                // SAFETY: the caller's arguments (libc's contract), or a path
                // this hook owns.
                unsafe {
                    match target(p) {
                        Some(Target::Path(c) | Target::Ring(_, _, c)) => real(c.as_ptr(), mode),
                        _ => real(p, mode),
                    }
                }
            }

            unsafe fn do_mmap(
                real: MmapFn,
                a: *mut c_void,
                len: usize,
                prot: c_int,
                fl: c_int,
                fd: c_int,
                off: i64,
            ) -> *mut c_void {
                match interpose::uio_map(fd, len, off) {
                    // SAFETY: the caller's arguments (libc's contract).
                    None => unsafe { real(a, len, prot, fl, fd, off) },
                    // SAFETY: the caller's request on the map's memfd, whose
                    // size `uio_map` checked against `len`.
                    Some(Ok(mfd)) => unsafe { real(a, len, prot, fl, mfd.raw(), 0) },
                    Some(Err(e)) => {
                        // SAFETY: this thread's errno slot.
                        unsafe { *::libc::__errno_location() = e };
                        ::libc::MAP_FAILED
                    }
                }
            }
            #[no_mangle]
            pub unsafe extern "C" fn mmap(
                a: *mut c_void,
                len: usize,
                prot: c_int,
                fl: c_int,
                fd: c_int,
                off: i64,
            ) -> *mut c_void {
                // SAFETY: forwarding the caller's arguments (libc's contract).
                unsafe { do_mmap(real!(c"mmap", MmapFn), a, len, prot, fl, fd, off) }
            }
            #[no_mangle]
            pub unsafe extern "C" fn mmap64(
                a: *mut c_void,
                len: usize,
                prot: c_int,
                fl: c_int,
                fd: c_int,
                off: i64,
            ) -> *mut c_void {
                // SAFETY: forwarding the caller's arguments (libc's contract).
                unsafe { do_mmap(real!(c"mmap64", MmapFn), a, len, prot, fl, fd, off) }
            }

            // Variadic in C: every request passes at most one argument, in
            // the third argument register (x86-64).
            #[no_mangle]
            pub unsafe extern "C" fn ioctl(fd: c_int, req: u64, arg: *mut c_void) -> c_int {
                // SAFETY: SIOCGIFHWADDR takes a struct ifreq (ioctl's contract).
                if req == ::libc::SIOCGIFHWADDR as u64 && unsafe { interpose::ifhwaddr(arg.cast()) }
                {
                    return 0;
                }
                // SAFETY: forwarding the caller's arguments (ioctl's contract).
                unsafe { real!(c"ioctl", IoctlFn)(fd, req, arg) }
            }

            #[no_mangle]
            pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, proto: c_int) -> c_int {
                if let Some(fd) = $crate::uevent::fake_socket(domain, ty, proto) {
                    return fd;
                }
                // SAFETY: forwarding the caller's arguments (plain integers).
                unsafe { real!(c"socket", SocketFn)(domain, ty, proto) }
            }

            #[no_mangle]
            pub unsafe extern "C" fn bind(fd: c_int, addr: *const c_void, len: u32) -> c_int {
                if $crate::uevent::is_fake(fd) {
                    return 0;
                }
                // SAFETY: forwarding the caller's arguments (bind's contract).
                unsafe { real!(c"bind", BindFn)(fd, addr, len) }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_paths_parse() {
        assert_eq!(
            ring_path("/devices/abc/channels/15/ring"),
            Some(("abc".into(), 15))
        );
        assert!(ring_path("/devices/abc/channels/15/monitor_id").is_none());
        assert!(ring_path("/devices/abc/channels/x/ring").is_none());
    }
}
