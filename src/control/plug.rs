//! A port plugged into DPDK and out again: its ethdev created at probe,
//! with everything the port's threads need installed (the device event
//! handler, removal watch, IPC, the registration hook); its process-local
//! state freed at close; every port of a PCI function closed at remove.

use crate::control::error::{Error, Result};
use crate::control::port::{fw_version, install_bursts, Ctrl, Device, Port};
use crate::control::state::doorbell_share::DoorbellShare;
use crate::control::state::intr_handle::Intr;
use crate::control::state::limits::Limits;
use crate::control::state::mr_registry::Registry;
use crate::control::state::reset_state::Reset;
use crate::control::state::shared::Shared;
use crate::dataplane::rxq::RxPathWish;
use crate::dataplane::txq::TxPathWish;
use crate::ffi;
use crate::hw::sysfs::{PciAddr, PortNetdev};
use crate::hw::verbs::{DeviceInfo, DeviceList};
use ::log::{error, info};
use parking_lot::Mutex;
use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::AtomicPtr;
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
    /// The receive loop and send run the device arguments ask for
    /// (`rx_path=`, `tx_path=`).
    pub rx_path: Option<RxPathWish>,
    pub tx_path: Option<TxPathWish>,
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
        rx_path,
        tx_path,
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
    let intr = Intr::new().map_err(|e| Error::new(-e, "cannot allocate an interrupt handle"))?;
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
        mr: Mutex::new(Registry::new()),
        ctx: AtomicPtr::new(std::ptr::null_mut()),
        doorbell: DoorbellShare::new(),
        intr,
        rx_epfds: Mutex::new(Vec::new()),
        reset: Reset::new(),
        on_device_fatal: crate::control::reset::on_device_fatal,
        unknown_events: std::sync::atomic::AtomicU64::new(0),
        link: Default::default(),
        rx_path,
        tx_path,
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
    crate::dataplane::mr_cache::set_register_hook(crate::control::mp::register_memory);
    crate::control::reset::watch_removal(&port);
    crate::control::port::register(&port);
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
        crate::control::port::unregister(p);
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
