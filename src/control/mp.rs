//! Multi-process support. Queues, rings, descriptors and memory
//! registrations live in DPDK shared memory, so a secondary process can run
//! the burst functions of the primary's ports. What is per process is the
//! doorbell page: each process maps it from the primary's uverbs fd, which
//! it gets over DPDK's IPC. Memory the primary has not registered yet is
//! registered on request, by the primary.
//!
//! Starts: ethdev fills a secondary's fast-path table (`rte_eth_fp_ops`,
//! which `rte_eth_rx_burst` reads) once, when the secondary attaches the
//! port; a port the primary configures after that (netvsc's hot add: EAL
//! attaches the new VF in every secondary, netvsc configures it in the
//! primary only after) has no queue array there, so the primary's
//! `dev_start` has every secondary point the table at the port's queues.
//!
//! Resets: the burst gates live in shared memory, so a secondary stops
//! ringing doorbells when the primary closes them; after recovery the
//! primary hands every secondary the new device's fd to map before it
//! reopens the gates.

use crate::control::port::Port;
use crate::dataplane::mr_cache::Region;
use crate::ffi;
use crate::hw::doorbell;
use ::log::{error, info, warn};
use parking_lot::Mutex;
use std::ffi::{c_int, c_void, CStr};
use std::sync::Once;

const MP_NAME: &CStr = c"net_mana_mp";
const TIMEOUT_S: i64 = 5;
/// Tries to hand secondaries a new doorbell page before a recovery fails.
const REMAP_ATTEMPTS: u32 = 3;
const PAGE: usize = gdma::DOORBELL_PAGE_SIZE;

/// Request kinds.
const DOORBELL_FD: u32 = 1;
const REGISTER: u32 = 2;
const REMAP: u32 = 3;
/// Which `<device>_portN` ports the primary drives: a bitmask of N in `len`.
const PORTS: u32 = 4;
/// The primary started a port: secondaries point their fast-path table at
/// its queues.
const STARTED: u32 = 5;

/// The IPC parameter block (both directions).
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Param {
    kind: u32,
    port_id: u16,
    result: i32,
    addr: u64,
    len: u64,
    region: [u64; 2],
    lkey: u32,
    /// The doorbell source's generation, for DOORBELL_FD and REMAP.
    generation: u64,
    /// The PCI device name (NUL-terminated), for PORTS.
    device: DeviceName,
}

#[derive(Clone, Copy)]
#[repr(C)]
struct DeviceName([u8; ffi::RTE_DEV_NAME_MAX_LEN as usize]);

impl Default for DeviceName {
    fn default() -> Self {
        Self([0; ffi::RTE_DEV_NAME_MAX_LEN as usize])
    }
}

impl DeviceName {
    fn new(name: &str) -> Self {
        let mut d = Self::default();
        let n = name.len().min(d.0.len() - 1);
        d.0[..n].copy_from_slice(&name.as_bytes()[..n]);
        d
    }

    fn as_str(&self) -> &str {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(self.0.len());
        std::str::from_utf8(&self.0[..end]).unwrap_or("")
    }
}

/// The name of a device's port for its IB port `ib_port` (1-based).
pub fn port_name(device: &str, ib_port: u32) -> String {
    format!("{device}_port{ib_port}")
}

/// The port id of `name` among this process's ports.
pub fn port_by_name(name: &str) -> Option<u16> {
    let cname = std::ffi::CString::new(name).ok()?;
    let mut id = 0u16;
    // SAFETY: a NUL-terminated name and a place for the id.
    (unsafe { ffi::rte_eth_dev_get_port_by_name(cname.as_ptr(), &mut id) } == 0).then_some(id)
}

pub(crate) fn is_primary() -> bool {
    // SAFETY: FFI query.
    unsafe { ffi::rte_eal_process_type() == ffi::RTE_PROC_PRIMARY }
}

fn msg(p: &Param) -> ffi::rte_mp_msg {
    let mut m = ffi::rte_mp_msg::default();
    for (d, s) in m.name.iter_mut().zip(MP_NAME.to_bytes()) {
        *d = *s as std::ffi::c_char;
    }
    m.len_param = std::mem::size_of::<Param>() as c_int;
    // SAFETY: Param is plain data no larger than the 256-byte param area.
    unsafe {
        std::ptr::copy_nonoverlapping(
            p as *const Param as *const u8,
            m.param.as_mut_ptr(),
            std::mem::size_of::<Param>(),
        )
    };
    m
}

fn param(m: &ffi::rte_mp_msg) -> Option<Param> {
    if m.len_param as usize != std::mem::size_of::<Param>() {
        return None;
    }
    // SAFETY: the length matches; Param has no invalid bit patterns.
    Some(unsafe { std::ptr::read_unaligned(m.param.as_ptr() as *const Param) })
}

/// EAL keeps one pending request per name and refuses a second one, and
/// every request here has the same name: this process sends one at a time.
static IPC: Mutex<()> = Mutex::new(());

/// Sends a request and returns the replies; an error when it could not be
/// sent, or when a peer it was sent to did not answer in time.
fn request(req: &mut ffi::rte_mp_msg) -> Result<Vec<ffi::rte_mp_msg>, String> {
    let _one = IPC.lock();
    let mut reply = ffi::rte_mp_reply::default();
    let ts = ffi::timespec {
        tv_sec: TIMEOUT_S,
        tv_nsec: 0,
    };
    // SAFETY: valid request, reply and timeout; EAL mallocs `msgs`.
    let ret = unsafe { ffi::rte_mp_request_sync(req, &mut reply, &ts) };
    let errno = ffi::rte_errno();
    let mut out = Vec::new();
    if !reply.msgs.is_null() {
        for i in 0..reply.nb_received.max(0) as usize {
            // SAFETY: `nb_received` messages were written.
            out.push(unsafe { *reply.msgs.add(i) });
        }
        // SAFETY: allocated by EAL with malloc, ours to free.
        unsafe { libc::free(reply.msgs as *mut c_void) };
    }
    if ret != 0 {
        return Err(format!(
            "the multi-process request could not be sent (rte_errno {errno})"
        ));
    }
    if reply.nb_received < reply.nb_sent {
        return Err(format!(
            "{} of {} processes answered within {TIMEOUT_S} s",
            reply.nb_received, reply.nb_sent
        ));
    }
    Ok(out)
}

fn register_action(handler: unsafe extern "C" fn(*const ffi::rte_mp_msg, *const c_void) -> c_int) {
    // SAFETY: registers a plain function under a static name.
    let ret = unsafe { ffi::rte_mp_action_register(MP_NAME.as_ptr(), Some(handler)) };
    // EEXIST: already registered; ENOTSUP: EAL runs without multi-process.
    if ret != 0 && ffi::rte_errno() != libc::EEXIST && ffi::rte_errno() != libc::ENOTSUP {
        warn!(
            "cannot register the multi-process handler: rte_errno {}",
            ffi::rte_errno()
        );
    }
}

/// Primary: answers secondaries' requests (once per process).
pub fn init_primary() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| register_action(primary_handler));
}

unsafe extern "C" fn primary_handler(m: *const ffi::rte_mp_msg, peer: *const c_void) -> c_int {
    // SAFETY: EAL passes a valid message.
    let Some(p) = param(unsafe { &*m }) else {
        return -1;
    };
    let mut out = p;
    let port = Port::lookup(p.port_id);
    match (p.kind, port.as_deref()) {
        (PORTS, _) => {
            let device = p.device.as_str();
            out.len = (1..=crate::hw::sysfs::MAX_PORTS as u32)
                .filter(|&ib| {
                    port_by_name(&port_name(device, ib))
                        .and_then(Port::lookup)
                        .is_some()
                })
                .fold(0, |mask, ib| mask | 1 << ib);
        }
        (DOORBELL_FD, Some(port)) => {
            // The fd stays open until the reply carrying it is sent: the
            // source is held, and closing the context waits for it.
            return port.doorbell.with_current(|src| {
                out.generation = src.generation;
                if src.fd < 0 {
                    // Between contexts (a reset): the new page comes with REMAP.
                    out.result = -libc::EAGAIN;
                }
                let mut reply = msg(&out);
                if src.fd >= 0 {
                    reply.num_fds = 1;
                    reply.fds[0] = src.fd;
                }
                // SAFETY: replying to the peer EAL gave us; the fd, if any,
                // is open (its source is held).
                unsafe { ffi::rte_mp_reply(&mut reply, peer as *const std::ffi::c_char) }
            });
        }
        (REGISTER, Some(port)) => {
            let mut reg = port.mr.lock();
            match reg.register(p.addr as usize, p.len as usize) {
                Some(r) => {
                    out.region = [r.start as u64, r.end as u64];
                    out.lkey = r.lkey;
                }
                None => out.result = -libc::ENOMEM,
            }
        }
        _ => out.result = -libc::ENODEV,
    }
    let mut reply = msg(&out);
    // SAFETY: replying to the peer EAL gave us.
    unsafe { ffi::rte_mp_reply(&mut reply, peer as *const std::ffi::c_char) }
}

/// Primary, after a reset: makes every secondary map the new device's
/// doorbell page before the gates reopen. An error names what failed: a
/// secondary left on the old page would ring doorbells nobody hears.
pub fn remap_secondaries(port: &Port) -> Result<(), String> {
    let src = port.doorbell.current();
    if src.fd < 0 || !is_primary() {
        return Ok(());
    }
    let mut last = String::new();
    for attempt in 1..=REMAP_ATTEMPTS {
        let mut req = msg(&Param {
            kind: REMAP,
            port_id: port.port_id,
            generation: src.generation,
            ..Param::default()
        });
        req.num_fds = 1;
        // The recovery thread calling this keeps the context open.
        req.fds[0] = src.fd;
        last = match request(&mut req) {
            Ok(replies) => match replies.iter().filter_map(param).find(|p| p.result != 0) {
                None => return Ok(()),
                Some(p) => format!(
                    "a secondary process could not map the new doorbell page (errno {})",
                    -p.result
                ),
            },
            Err(e) => e,
        };
        warn!(
            "{}: handing secondaries the new doorbell page: {last} (attempt {attempt} of {REMAP_ATTEMPTS})",
            port.name
        );
    }
    Err(format!(
        "secondary processes were not handed the new doorbell page: {last}"
    ))
}

/// Maps a uverbs fd's doorbell page into this process.
fn map_page(fd: c_int) -> Option<*mut u8> {
    // SAFETY: maps one page of the fd; the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p as *mut u8)
}

/// The generation of the page each port's entry in the doorbell table maps, in
/// a secondary. Changes only under this lock.
static SECONDARY_GENERATIONS: Mutex<[u64; ffi::RTE_MAX_ETHPORTS as usize]> =
    Mutex::new([0; ffi::RTE_MAX_ETHPORTS as usize]);

/// Secondary: maps `fd`'s doorbell page for `port_id` unless a newer one is
/// mapped already (a REMAP and an attach's DOORBELL_FD answer may arrive in
/// either order). Bursts are gated while the primary hands out pages.
fn install_page(port_id: u16, fd: c_int, generation: u64) -> Result<(), c_int> {
    let mut gens = SECONDARY_GENERATIONS.lock();
    let i = usize::from(port_id);
    if generation < gens[i] {
        return Ok(());
    }
    let page = map_page(fd).ok_or(-libc::ENOMEM)?;
    gens[i] = generation;
    let old = doorbell::set_page(port_id, page);
    if !old.is_null() {
        // SAFETY: our previous mapping of this port's page; no burst uses it:
        // the primary hands out pages with every gate of the port closed,
        // and an attaching port has no burst yet.
        unsafe { libc::munmap(old as *mut c_void, PAGE) };
    }
    Ok(())
}

unsafe extern "C" fn secondary_handler(m: *const ffi::rte_mp_msg, peer: *const c_void) -> c_int {
    // SAFETY: EAL passes a valid message.
    let m = unsafe { &*m };
    let Some(p) = param(m) else {
        return -1;
    };
    let mut out = p;
    out.result = if p.kind == REMAP && m.num_fds == 1 {
        let r = install_page(p.port_id, m.fds[0], p.generation);
        // SAFETY: EAL passed the fd to us; a mapping keeps the page.
        unsafe { libc::close(m.fds[0]) };
        r.err().unwrap_or(0)
    } else if p.kind == STARTED {
        // SAFETY: the primary sent STARTED from inside `dev_start` and
        // waits for this answer: the port's queue arrays stay put.
        if unsafe { ffi::fast_path::point_at_queues(p.port_id) } {
            0
        } else {
            -libc::EINVAL
        }
    } else {
        -libc::EINVAL
    };
    let mut reply = msg(&out);
    // SAFETY: replying to the peer EAL gave us.
    unsafe { ffi::rte_mp_reply(&mut reply, peer as *const std::ffi::c_char) }
}

/// The data path's registration hook (see `dataplane::mr_cache`): finds or
/// creates a registration covering `[addr, addr + len)` on the port's
/// device, through the primary when this process is a secondary.
pub fn register_memory(port_id: u16, addr: usize, len: usize) -> Option<Region> {
    // SAFETY: FFI query.
    if unsafe { ffi::rte_eal_process_type() } != ffi::RTE_PROC_PRIMARY {
        return register_remote(port_id, addr, len);
    }
    Port::lookup(port_id)?.mr.lock().register(addr, len)
}

/// Primary, at the end of `dev_start` (before ethdev marks the port
/// started): has every secondary point its fast-path table at the port's
/// queue arrays. A secondary that does not answer is named in a warning;
/// the start itself stands.
pub fn announce_start(port_id: u16, port_name: &str) {
    if !is_primary() {
        return;
    }
    let mut req = msg(&Param {
        kind: STARTED,
        port_id,
        ..Param::default()
    });
    let failed = match request(&mut req) {
        Ok(replies) => replies
            .iter()
            .filter_map(param)
            .find(|p| p.result != 0)
            .map(|p| format!("a secondary process answered errno {}", -p.result)),
        Err(e) => Some(e),
    };
    if let Some(e) = failed {
        warn!(
            "{port_name}: telling secondary processes the port started: {e}; \
             a secondary that attached the port before it was configured cannot receive on it"
        );
    }
}

/// Secondary: registration of memory the primary has not seen.
fn register_remote(port_id: u16, addr: usize, len: usize) -> Option<Region> {
    let mut req = msg(&Param {
        kind: REGISTER,
        port_id,
        addr: addr as u64,
        len: len as u64,
        ..Param::default()
    });
    let replies = request(&mut req)
        .map_err(|e| warn!("port {port_id}: registering memory through the primary: {e}"))
        .ok()?;
    let p = param(replies.first()?)?;
    (p.result == 0).then_some(Region {
        start: p.region[0] as usize,
        end: p.region[1] as usize,
        lkey: p.lkey,
    })
}

/// Secondary: asks the primary for a port's doorbell page and maps it. A
/// port between two device contexts (the primary recovers from a reset) has
/// none yet; the recovery hands it over before the port's gates reopen.
fn fetch_page(port_id: u16, port_name: &str) -> Result<(), String> {
    let mut req = msg(&Param {
        kind: DOORBELL_FD,
        port_id,
        ..Param::default()
    });
    let replies = request(&mut req)?;
    let r = replies
        .first()
        .ok_or("the primary process did not answer")?;
    let p = param(r).ok_or("the primary process sent a malformed answer")?;
    if r.num_fds != 1 {
        if p.result == -libc::EAGAIN {
            info!(
                "{port_name}: the primary is recovering the port from a device reset; \
                 its bursts run once the recovery hands over the new doorbell page"
            );
            return Ok(());
        }
        return Err(format!(
            "the primary process did not provide the doorbell page (errno {})",
            -p.result
        ));
    }
    let mapped = install_page(port_id, r.fds[0], p.generation);
    // SAFETY: EAL passed the fd to us; a mapping keeps the page.
    unsafe { libc::close(r.fds[0]) };
    mapped.map_err(|e| format!("cannot map the doorbell page (errno {})", -e))
}

/// Secondary probe: attaches to every port of the device the primary
/// created, maps its doorbell page, and installs the burst functions.
pub fn attach_secondary(
    pci_dev: &mut ffi::rte_pci_device,
    name: &str,
    ops: &'static ffi::eth_dev_ops,
) -> c_int {
    static ONCE: Once = Once::new();
    crate::dataplane::mr_cache::set_register_hook(register_memory);
    // Registered before any page is asked for, so no REMAP is missed.
    ONCE.call_once(|| register_action(secondary_handler));
    // A secondary starts with no valid port, so it cannot look the
    // primary's ports up itself: ask which exist.
    let mut req = msg(&Param {
        kind: PORTS,
        device: DeviceName::new(name),
        ..Param::default()
    });
    let ports = match request(&mut req) {
        Ok(r) => r.first().and_then(param).map_or(0, |p| p.len),
        Err(e) => {
            error!("{name}: cannot ask the primary process for its ports: {e}");
            return -libc::EIO;
        }
    };
    if ports == 0 {
        error!("{name}: no port of this device exists in the primary process");
        return -libc::ENODEV;
    }
    let mut attached = 0;
    let mut failed = 0;
    for ib_port in (1..=crate::hw::sysfs::MAX_PORTS as u32).filter(|&ib| ports & 1 << ib != 0) {
        let port_name = port_name(name, ib_port);
        if port_by_name(&port_name).is_some() {
            // Probed again (the primary attached another port of the
            // function): this one is attached here already.
            attached += 1;
            continue;
        }
        let cname = std::ffi::CString::new(port_name.clone()).expect("no NUL in a device name");
        // SAFETY: the primary drives a port of this name.
        let dev = unsafe { ffi::rte_eth_dev_attach_secondary(cname.as_ptr()) };
        if dev.is_null() {
            error!("{port_name}: rte_eth_dev_attach_secondary failed");
            failed += 1;
            continue;
        }
        // SAFETY: a port attached for this process.
        let port_id = unsafe { (*(*dev).data).port_id };
        if let Err(e) = fetch_page(port_id, &port_name) {
            error!("{port_name}: {e}; the port is not attached");
            // SAFETY: releasing the port we attached.
            unsafe { ffi::rte_eth_dev_release_port(dev) };
            failed += 1;
            continue;
        }
        // SAFETY: the port is ours to set up before probing_finish.
        unsafe {
            (*dev).device = &mut pci_dev.device;
            (*dev).dev_ops = ops;
            crate::control::port::install_bursts(dev, true);
            ffi::rte_eth_dev_probing_finish(dev);
        }
        info!("{port_name}: attached in a secondary process as port {port_id}");
        attached += 1;
    }
    if attached == 0 {
        error!("{name}: none of the primary's {failed} port(s) could be attached");
        return -libc::ENODEV;
    }
    0
}

/// Secondary `dev_close`: drops this process's doorbell mapping.
pub fn detach_secondary(port_id: u16) {
    let mut gens = SECONDARY_GENERATIONS.lock();
    gens[usize::from(port_id)] = 0;
    let old = doorbell::set_page(port_id, std::ptr::null_mut());
    if !old.is_null() && !is_primary() {
        // SAFETY: our own mapping; the port is closed, so no burst uses it.
        unsafe { libc::munmap(old as *mut c_void, PAGE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_round_trip_through_an_ipc_message() {
        let p = Param {
            kind: REGISTER,
            port_id: 7,
            result: -12,
            addr: 0x1234_5000,
            len: 4096,
            region: [1, 2],
            lkey: 0xabcd,
            generation: 9,
            device: DeviceName::new("7870:00:00.0"),
        };
        let m = msg(&p);
        // SAFETY: msg() wrote a NUL-terminated name.
        assert_eq!(unsafe { CStr::from_ptr(m.name.as_ptr()) }, MP_NAME);
        let q = param(&m).unwrap();
        assert_eq!(
            (q.kind, q.port_id, q.result, q.addr, q.len, q.region, q.lkey),
            (REGISTER, 7, -12, 0x1234_5000, 4096, [1, 2], 0xabcd)
        );
        assert_eq!(q.device.as_str(), "7870:00:00.0");
        let long = "x".repeat(200);
        assert_eq!(
            DeviceName::new(&long).as_str().len(),
            DeviceName::default().0.len() - 1
        );
        let mut short = m;
        short.len_param = 8;
        assert!(param(&short).is_none());
    }
}
