//! One ethdev per MANA port: creation at probe, the process-local state
//! behind `eth_dev->process_private` (control state and its lock, memory
//! registrations, interrupts, reset state), lookup by port id, and removal.

use crate::control::error::{Error, Result};
use crate::control::mp::DoorbellShare;
use crate::control::queues::QueueSet;
use crate::control::rss::Rss;
use crate::control::shared::Shared;
use crate::dataplane::queue::ControlToken;
use crate::dataplane::rxq::{self, RxQueue};
use crate::dataplane::tx_prepare;
use crate::dataplane::txq::{self, TxQueue};
use crate::ffi::{self, compat};
use crate::hw::sysfs::{PciAddr, PortNetdev};
use crate::hw::verbs::{Context, DeviceInfo, DeviceList, Pd};
use ::log::{error, info};
use parking_lot::Mutex;
use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

/// What probe found for one port.
pub struct PortSpec {
    pub name: String,
    pub pci: PciAddr,
    pub ib_index: usize,
    pub ib: DeviceInfo,
    pub ib_port: u32,
    pub netdev: PortNetdev,
    pub attr: ffi::ibv_device_attr_ex,
}

/// Device limits from `ibv_query_device_ex`, clamped to what ethdev can
/// carry. A copy sits in the shared block (`dev_private`) for every process,
/// with `max_desc` lowered to what libmana accepts.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Limits {
    pub max_queues: u16,
    pub max_desc: u16,
    pub max_send_sge: u16,
    pub max_mr_size: u64,
}

impl Limits {
    fn from_attr(attr: &ffi::ibv_device_attr_ex) -> Limits {
        let a = &attr.orig_attr;
        let clamp = |v: i32| v.clamp(0, i32::from(u16::MAX)) as u16;
        Limits {
            max_queues: clamp(a.max_qp).min(ffi::RTE_MAX_QUEUES_PER_PORT as u16),
            max_desc: clamp(a.max_qp_wr.min(a.max_cqe)),
            // The uverbs attribute is min(send, recv); MANA sends up to 30.
            max_send_sge: clamp(a.max_sge).min(gdma::MAX_TX_WQE_SGES as u16),
            max_mr_size: a.max_mr_size,
        }
    }
}

/// The verbs objects a port holds while its device is present. Field order
/// is drop order: the parent domain, then the PD, then the context.
pub struct Device {
    pub parent: Pd,
    pub pd: Pd,
    pub ctx: Context,
}

impl Device {
    pub fn open(list: &DeviceList, index: usize, ib_port: u32) -> crate::hw::verbs::Result<Device> {
        let ctx = list.open(index)?;
        let pd = Pd::alloc(&ctx)?;
        let parent = Pd::alloc_parent(&ctx, &pd, ib_port)?;
        Ok(Device { parent, pd, ctx })
    }
}

/// Control state of a port, under `Port::ctrl`. Everything control code
/// changes lives here, so holding the lock is holding the right to change.
pub struct Ctrl {
    /// The verbs device; `None` while a reset replaces it.
    pub dev: Option<Device>,
    pub rss: Rss,
    /// The application wants the port started (kept across resets).
    pub started: bool,
    pub running: Option<crate::control::queues::Running>,
    /// Bumped by every queue setup or release, so the reset path can tell
    /// whether the queues it planned for are still the same.
    pub generation: u64,
    pub rx: QueueSet<RxQueue>,
    pub tx: QueueSet<TxQueue>,
    /// Lets control code reach the burst state of a queue whose gate is
    /// closed (see `dataplane::queue`).
    pub token: ControlToken,
}

impl Ctrl {
    fn new(dev: Device) -> Ctrl {
        Ctrl {
            dev: Some(dev),
            rss: Rss::new(),
            started: false,
            running: None,
            generation: 0,
            rx: QueueSet::new(),
            tx: QueueSet::new(),
            // SAFETY: one token per port, inside its control state, which
            // only the control lock reaches.
            token: unsafe { ControlToken::new() },
        }
    }
}

/// Process-local state of a port in the primary process.
pub struct Port {
    pub eth_dev: *mut ffi::rte_eth_dev,
    pub port_id: u16,
    pub name: String,
    pub ib: DeviceInfo,
    pub ib_port: u32,
    pub netdev: PortNetdev,
    pub limits: Limits,
    pub numa: c_int,
    pub pci: PciAddr,
    /// Serialises control operations on this port.
    pub ctrl: Mutex<Ctrl>,
    /// Memory registrations, also reached from the data path on a cache miss.
    pub mr: Mutex<crate::control::mr::Registry>,
    /// The open device context, for the interrupt thread (null while none).
    /// Set only through [`Port::set_ctx`].
    pub ctx: AtomicPtr<ffi::ibv_context>,
    /// What secondaries map their doorbell page from.
    pub doorbell: DoorbellShare,
    pub intr: crate::control::intr::Intr,
    /// Per-queue epoll fds standing in for the completion channels.
    pub rx_epfds: Mutex<Vec<c_int>>,
    pub reset: crate::control::reset::Reset,
    /// Asynchronous device events of a type verbs does not define, ignored
    /// (xstat `unknown_device_events`; primary process only).
    pub unknown_events: std::sync::atomic::AtomicU64,
}

// SAFETY: the raw eth_dev pointer refers to DPDK's static device array,
// which outlives the port; everything else is owned or behind locks.
unsafe impl Send for Port {}
// SAFETY: shared access to a Port goes through its locks and atomics; the
// raw eth_dev pointer is only dereferenced for ethdev's own shared data.
unsafe impl Sync for Port {}

/// The ports this process created, by port id: how driver threads and IPC
/// handlers find a port, and tell that a port id is one of ours.
static PORTS: Mutex<Vec<Option<Arc<Port>>>> = Mutex::new(Vec::new());

impl Port {
    /// The port behind an ethdev of this driver (inside its ops).
    ///
    /// # Safety
    /// `dev` is a live ethdev whose `process_private` was set by [`create`].
    pub unsafe fn of<'a>(dev: *mut ffi::rte_eth_dev) -> &'a Port {
        // SAFETY: the caller gives us one of our live ethdevs, whose
        // process_private holds a reference to its Port until close.
        unsafe { &*((*dev).process_private as *const Port) }
    }

    /// Our port with id `port_id`, if this process created one.
    pub fn lookup(port_id: u16) -> Option<Arc<Port>> {
        PORTS.lock().get(usize::from(port_id))?.clone()
    }

    /// Publishes the port's device context (null: none). The doorbell
    /// source changes under its lock, so a secondary's request being
    /// answered finishes sending the old fd before the caller may close it.
    pub fn set_ctx(&self, ctx: *mut ffi::ibv_context) {
        self.ctx.store(ctx, Ordering::Release);
        // SAFETY: a non-null context is one the caller just opened and
        // keeps open until it calls this again with null.
        let fd = (!ctx.is_null()).then(|| unsafe { (*ctx).cmd_fd });
        self.doorbell.set(fd);
    }

    /// The port's ethdev data (shared memory, written by ethdev and us).
    pub fn data(&self) -> &ffi::rte_eth_dev_data {
        // SAFETY: `data` is set by rte_eth_dev_allocate and lives as long as
        // the port; reading it through a shared reference is what every
        // process does.
        unsafe { &*(*self.eth_dev).data }
    }

    /// The port's ethdev data for writing the few fields the driver owns
    /// (queue states, rx offloads at configure), under the control lock.
    pub fn data_ptr(&self) -> *mut ffi::rte_eth_dev_data {
        // SAFETY: reading the data pointer of our live ethdev.
        unsafe { (*self.eth_dev).data }
    }

    pub fn shared(&self) -> &Shared {
        Shared::of(self.data())
    }
}

/// Burst functions while the port is stopped.
unsafe extern "C" fn burst_stopped(_q: *mut c_void, _p: *mut *mut ffi::rte_mbuf, _n: u16) -> u16 {
    0
}

/// Points the ethdev's burst functions at the data path (`running`) or at
/// functions that return 0. netvsc and fail-safe read these fields directly.
///
/// # Safety
/// `dev` is a live ethdev of this driver.
pub unsafe fn install_bursts(dev: *mut ffi::rte_eth_dev, running: bool) {
    // SAFETY: the caller gives us a live ethdev of ours; these fields are
    // plain function pointers ethdev reads at each burst.
    unsafe {
        if running {
            (*dev).rx_pkt_burst = Some(rxq::rx_burst);
            (*dev).tx_pkt_burst = Some(txq::tx_burst);
            (*dev).tx_pkt_prepare = Some(tx_prepare::tx_prepare);
            (*dev).rx_queue_count = compat::rx_queue_count_op!(rxq::rx_queue_count);
            (*dev).rx_descriptor_status = Some(rxq::rx_descriptor_status);
            (*dev).tx_descriptor_status = Some(txq::tx_descriptor_status);
        } else {
            (*dev).rx_pkt_burst = Some(burst_stopped);
            (*dev).tx_pkt_burst = Some(burst_stopped);
            (*dev).tx_pkt_prepare = None;
        }
    }
}

/// Undoes a port creation that did not finish (drop while armed).
struct Unwind {
    eth_dev: *mut ffi::rte_eth_dev,
    armed: bool,
}

impl Drop for Unwind {
    fn drop(&mut self) {
        if self.armed {
            // SAFETY: the ethdev was allocated by `create` and never
            // published; freeing its private state (if set) and releasing
            // it (which frees mac_addrs and dev_private) leaves nothing.
            unsafe {
                free_private(self.eth_dev);
                ffi::rte_eth_dev_release_port(self.eth_dev);
            }
        }
    }
}

/// Creates the ethdev of one port with `ops`, and publishes it.
pub fn create(
    pci_dev: &mut ffi::rte_pci_device,
    list: &DeviceList,
    spec: PortSpec,
    ops: &'static ffi::eth_dev_ops,
) -> Result<()> {
    let PortSpec {
        name,
        pci,
        ib_index,
        ib,
        ib_port,
        netdev,
        attr,
    } = spec;
    let device = Device::open(list, ib_index, ib_port)?;
    let cname = CString::new(name.clone()).map_err(|_| Error::invalid("NUL in the port name"))?;
    // SAFETY: `cname` is a valid string; returns NULL if the name is taken.
    let eth_dev = unsafe { ffi::rte_eth_dev_allocate(cname.as_ptr()) };
    if eth_dev.is_null() {
        return Err(Error::new(
            libc::ENOMEM,
            "rte_eth_dev_allocate failed (name in use, or RTE_MAX_ETHPORTS reached)",
        ));
    }
    let mut unwind = Unwind {
        eth_dev,
        armed: true,
    };
    // SAFETY: a freshly allocated ethdev and the probing PCI device.
    let numa = unsafe {
        ffi::mana_shim_copy_pci_info(eth_dev, pci_dev);
        (*eth_dev).device = &mut pci_dev.device;
        (*(*eth_dev).data).numa_node
    };
    // SAFETY: ethdev frees mac_addrs with rte_free at release.
    let mac = unsafe { ffi::rte_zmalloc(c"mana_mac".as_ptr(), 6, 0) } as *mut ffi::rte_ether_addr;
    if mac.is_null() {
        return Err(Error::new(
            libc::ENOMEM,
            "out of memory for the MAC address",
        ));
    }
    // SAFETY: `mac` points to 6 zeroed bytes; `data` is the port's data.
    let port_id = unsafe {
        (*mac).addr_bytes = netdev.mac.0;
        (*(*eth_dev).data).mac_addrs = mac;
        (*(*eth_dev).data).port_id
    };
    let ctx = device.ctx.as_ptr();
    let intr = crate::control::intr::Intr::new()
        .map_err(|e| Error::new(-e, "cannot allocate an interrupt handle"))?;
    let port = Arc::new(Port {
        eth_dev,
        port_id,
        name,
        ib,
        ib_port,
        netdev,
        limits: Limits::from_attr(&attr),
        numa,
        pci,
        ctrl: Mutex::new(Ctrl::new(device)),
        mr: Mutex::new(crate::control::mr::Registry::new()),
        ctx: AtomicPtr::new(std::ptr::null_mut()),
        doorbell: DoorbellShare::new(),
        intr,
        rx_epfds: Mutex::new(Vec::new()),
        reset: crate::control::reset::Reset::new(),
        unknown_events: std::sync::atomic::AtomicU64::new(0),
    });
    port.set_ctx(ctx);
    // SAFETY: the ethdev is ours until probing_finish publishes it.
    unsafe {
        (*eth_dev).process_private = Arc::into_raw(port.clone()) as *mut c_void;
        (*eth_dev).dev_ops = ops;
        (*eth_dev).intr_handle = port.intr.handle();
        install_bursts(eth_dev, false);
    }
    crate::control::intr::install(&port)
        .map_err(|e| Error::new(-e, "cannot install the device event handler"))?;
    let mut limits = port.limits;
    if let Some(dev) = port.ctrl.lock().dev.as_ref() {
        limits.max_desc = crate::control::queues::probe_max_desc(&port, dev);
    }
    // SAFETY: ethdev frees dev_private with rte_free at release.
    let shared = unsafe {
        ffi::rte_zmalloc_socket(
            c"mana_port".as_ptr(),
            std::mem::size_of::<Shared>(),
            64,
            numa,
        )
    } as *mut Shared;
    if shared.is_null() {
        return Err(Error::new(
            libc::ENOMEM,
            "out of memory for the shared port data",
        ));
    }
    Shared::init(shared, limits);
    // SAFETY: initialised just above; the port is not published yet.
    unsafe { (*(*eth_dev).data).dev_private = shared as *mut c_void };
    port.shared().set_fw_version(&fw_version(&attr));
    port.shared().set_rss(&port.ctrl.lock().rss);
    crate::control::mp::init_primary();
    crate::dataplane::mr_cache::set_register_hook(crate::control::mr::register_memory);
    crate::control::reset::watch_removal(&port);
    register(&port);
    unwind.armed = false;
    // SAFETY: publishes the port to applications.
    unsafe { ffi::rte_eth_dev_probing_finish(eth_dev) };
    let p = &port;
    info!(
        "{}: port {} is {} ({}, IB {} port {}), socket {}",
        p.name, p.port_id, p.netdev.mac, p.netdev.ifname, p.ib.name, p.ib_port, p.numa
    );
    Ok(())
}

fn register(port: &Arc<Port>) {
    let mut ports = PORTS.lock();
    let i = usize::from(port.port_id);
    if ports.len() <= i {
        ports.resize(i + 1, None);
    }
    ports[i] = Some(port.clone());
}

/// Drops the process-local state of a port: the event handler first (it
/// holds its own reference), then the registry's and the ethdev's.
///
/// # Safety
/// `eth_dev` was created by [`create`]; ethdev releases it afterwards.
pub unsafe fn free_private(eth_dev: *mut ffi::rte_eth_dev) {
    // SAFETY: the caller gives us an ethdev `create` made: its
    // process_private is null or an Arc<Port> we leaked into it.
    unsafe {
        let port = (*eth_dev).process_private as *const Port;
        if port.is_null() {
            return;
        }
        let p = &*port;
        crate::control::reset::unwatch_removal(p);
        crate::control::intr::uninstall(p, true);
        crate::control::intr::close_rx_fds(p);
        p.set_ctx(std::ptr::null_mut());
        if let Some(slot) = PORTS.lock().get_mut(usize::from(p.port_id)) {
            if slot.as_ref().is_some_and(|q| std::ptr::eq(&**q, p)) {
                *slot = None;
            }
        }
        (*eth_dev).process_private = std::ptr::null_mut();
        drop(Arc::from_raw(port));
    }
}

/// Stops and closes every port of a PCI device that the application has not
/// closed (hot unplug, or EAL cleanup at exit with ports still started), so
/// queues and the device context are released by the driver, not left to
/// the process exit. A secondary process only detaches: the ports, started
/// or not, are the primary's (a stop from here was refused with -ENOTSUP
/// and logged as a failure at every secondary's exit).
pub fn remove_all(pci_dev: &mut ffi::rte_pci_device) -> c_int {
    let parent = &pci_dev.device as *const ffi::rte_device;
    let primary = crate::control::mp::is_primary();
    loop {
        // SAFETY: looks up ports by their parent device.
        let id = unsafe { ffi::rte_eth_find_next_of(0, parent) };
        if u32::from(id) >= ffi::RTE_MAX_ETHPORTS {
            return 0;
        }
        // SAFETY: `id` is a valid port (find_next_of returned it); its data
        // is ethdev's shared port data.
        let started = unsafe {
            let dev = (&raw mut ffi::rte_eth_devices as *mut ffi::rte_eth_dev).add(usize::from(id));
            (*(*dev).data).dev_started() != 0
        };
        if started && primary {
            // SAFETY: stopping a valid port of ours.
            let ret = unsafe { ffi::rte_eth_dev_stop(id) };
            if ret != 0 {
                error!("port {id}: stop on PCI remove failed: {ret}");
            }
        }
        // SAFETY: closing a port of ours; release follows inside.
        let ret = unsafe { ffi::rte_eth_dev_close(id) };
        if ret != 0 {
            error!("port {id}: close on PCI remove failed: {ret}");
            return ret;
        }
    }
}

/// What `fw_version_get` reports: the device's firmware and this driver.
pub fn fw_version(attr: &ffi::ibv_device_attr_ex) -> String {
    // SAFETY: fw_ver is a NUL-terminated array filled by the device query.
    let fw = unsafe { std::ffi::CStr::from_ptr(attr.orig_attr.fw_ver.as_ptr()) };
    let ours = concat!("net_mana-rs ", env!("CARGO_PKG_VERSION"));
    // mana_ib reports no firmware version (an empty string).
    match fw.to_string_lossy().trim() {
        "" => ours.to_string(),
        fw => format!("{fw} {ours}"),
    }
}
