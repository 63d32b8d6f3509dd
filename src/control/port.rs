//! One ethdev per MANA port: creation at probe, the process-local control
//! state behind `eth_dev->process_private`, and removal.

use crate::control::shared::Shared;
use crate::ethdev;
use crate::ffi;
use crate::hw::sysfs::PortNetdev;
use crate::hw::verbs::{Context, DeviceInfo, DeviceList, Pd};
use ::log::{error, info};
use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};

/// What probe found for one port.
pub struct PortSpec {
    pub name: String,
    pub pci: crate::hw::sysfs::PciAddr,
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
    /// Serialises control operations on this port.
    pub ctrl: Mutex<ethdev::Ctrl>,
    /// Memory registrations, also reached from the data path on a cache miss.
    pub mr: Mutex<crate::control::mr::Registry>,
    /// The open device context, for the interrupt thread (null while none).
    /// Set only through [`Port::set_ctx`].
    pub ctx: AtomicPtr<ffi::ibv_context>,
    /// What secondaries map their doorbell page from (see `mp`).
    pub doorbell: Mutex<DoorbellSource>,
    pub intr: crate::control::intr::Intr,
    /// Per-queue epoll fds standing in for the completion channels.
    pub rx_epfds: Mutex<Vec<c_int>>,
    pub pci: crate::hw::sysfs::PciAddr,
    pub reset: crate::control::reset::Reset,
}

/// The uverbs fd whose first page is the current context's doorbell page,
/// and how many contexts the port has had: a secondary keeps the mapping of
/// the highest generation it was given, whichever message arrives last.
#[derive(Clone, Copy, Debug)]
pub struct DoorbellSource {
    /// `cmd_fd` of the open context, or -1 while there is none.
    pub fd: c_int,
    pub generation: u64,
}

// SAFETY: the raw eth_dev pointer refers to DPDK's static device array.
unsafe impl Send for Port {}
unsafe impl Sync for Port {}

impl Port {
    /// The port behind an ethdev created by this driver.
    ///
    /// # Safety
    /// `dev` must be a live ethdev whose `process_private` was set by [`create`].
    pub unsafe fn of<'a>(dev: *mut ffi::rte_eth_dev) -> &'a Port {
        // SAFETY: per the contract above (an `Arc<Port>` leaked into the ethdev).
        unsafe { &*((*dev).process_private as *const Port) }
    }

    /// Publishes the port's device context (null: none). The doorbell
    /// source changes under its lock, so a secondary's request being
    /// answered finishes sending the old fd before the caller may close it.
    pub fn set_ctx(&self, ctx: *mut ffi::ibv_context) {
        let mut src = self.doorbell.lock().unwrap_or_else(|e| e.into_inner());
        self.ctx.store(ctx, Ordering::Release);
        if ctx.is_null() {
            src.fd = -1;
        } else {
            // SAFETY: a context the caller just opened and keeps open until
            // it calls this again with null.
            src.fd = unsafe { (*ctx).cmd_fd };
            src.generation += 1;
        }
    }

    pub fn data(&self) -> &ffi::rte_eth_dev_data {
        // SAFETY: `data` is set by rte_eth_dev_allocate and lives as long as the port.
        unsafe { &*(*self.eth_dev).data }
    }
}

pub(crate) fn create(
    pci_dev: &mut ffi::rte_pci_device,
    list: &DeviceList,
    spec: PortSpec,
) -> Result<(), c_int> {
    let PortSpec {
        name,
        pci,
        ib_index,
        ib,
        ib_port,
        netdev,
        attr,
    } = spec;
    let device = Device::open(list, ib_index, ib_port).map_err(|e| {
        error!("{name}: {e}");
        e.neg()
    })?;
    let cname = CString::new(name.clone()).map_err(|_| -libc::EINVAL)?;
    // SAFETY: `cname` is a valid string; returns NULL if the name is taken.
    let eth_dev = unsafe { ffi::rte_eth_dev_allocate(cname.as_ptr()) };
    if eth_dev.is_null() {
        error!("{name}: rte_eth_dev_allocate failed (name in use, or RTE_MAX_ETHPORTS reached)");
        return Err(-libc::ENOMEM);
    }
    // SAFETY: a freshly allocated ethdev and the probing PCI device.
    let numa = unsafe {
        ffi::mana_shim_copy_pci_info(eth_dev, pci_dev);
        (*eth_dev).device = &mut pci_dev.device;
        (*(*eth_dev).data).numa_node
    };
    // SAFETY: ethdev frees mac_addrs with rte_free at release.
    let mac = unsafe { ffi::rte_zmalloc(c"mana_mac".as_ptr(), 6, 0) } as *mut ffi::rte_ether_addr;
    if mac.is_null() {
        // SAFETY: releasing the port we just allocated.
        unsafe { ffi::rte_eth_dev_release_port(eth_dev) };
        return Err(-libc::ENOMEM);
    }
    // SAFETY: `mac` points to 6 zeroed bytes; `data` is the port's data.
    let port_id = unsafe {
        (*mac).addr_bytes = netdev.mac.0;
        (*(*eth_dev).data).mac_addrs = mac;
        (*(*eth_dev).data).port_id
    };
    let ctx = device.ctx.as_ptr();
    let intr = match crate::control::intr::Intr::new() {
        Ok(i) => i,
        Err(e) => {
            error!("{name}: cannot allocate an interrupt handle");
            // SAFETY: releasing the port allocated above (frees mac_addrs).
            unsafe { ffi::rte_eth_dev_release_port(eth_dev) };
            return Err(e);
        }
    };
    let port = Arc::new(Port {
        eth_dev,
        port_id,
        name: name.clone(),
        ib,
        ib_port,
        netdev,
        limits: Limits::from_attr(&attr),
        numa,
        ctrl: Mutex::new(ethdev::Ctrl::new(device)),
        mr: Mutex::new(crate::control::mr::Registry::new()),
        ctx: AtomicPtr::new(std::ptr::null_mut()),
        doorbell: Mutex::new(DoorbellSource {
            fd: -1,
            generation: 0,
        }),
        intr,
        rx_epfds: Mutex::new(Vec::new()),
        pci,
        reset: crate::control::reset::Reset::new(),
    });
    port.set_ctx(ctx);
    // SAFETY: the ethdev is ours until probing_finish publishes it.
    unsafe {
        (*eth_dev).process_private = Arc::into_raw(port.clone()) as *mut c_void;
        (*eth_dev).dev_ops = &ethdev::OPS;
        (*eth_dev).intr_handle = port.intr.handle();
        ethdev::set_burst_stopped(eth_dev);
    }
    if let Err(e) = crate::control::intr::install(&port) {
        error!("{name}: cannot install the device event handler: {e}");
        // SAFETY: undoing the allocation above.
        unsafe {
            free_private(eth_dev);
            ffi::rte_eth_dev_release_port(eth_dev);
        }
        return Err(e);
    }
    let mut limits = port.limits;
    {
        let ctrl = port.ctrl.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(dev) = ctrl.dev.as_ref() {
            limits.max_desc = crate::control::queues::probe_max_desc(&port, dev);
        }
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
        error!("{name}: out of memory");
        // SAFETY: undoing the allocation above.
        unsafe {
            free_private(eth_dev);
            ffi::rte_eth_dev_release_port(eth_dev);
        }
        return Err(-libc::ENOMEM);
    }
    Shared::init(shared, limits);
    // SAFETY: initialised just above; the port is not published yet.
    unsafe { (*(*eth_dev).data).dev_private = shared as *mut c_void };
    let sh = Shared::of(port.data());
    sh.set_fw_version(&fw_version(&attr));
    sh.set_rss(&port.ctrl.lock().unwrap_or_else(|e| e.into_inner()).rss);
    crate::control::mp::init_primary();
    crate::control::reset::watch_removal(&port);
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
/// holds its own reference), then the ethdev's reference.
///
/// # Safety
/// `eth_dev` was created by [`create`]; ethdev releases it afterwards.
pub(crate) unsafe fn free_private(eth_dev: *mut ffi::rte_eth_dev) {
    // SAFETY: per the contract.
    unsafe {
        let port = (*eth_dev).process_private as *const Port;
        if port.is_null() {
            return;
        }
        crate::control::reset::unwatch_removal(&*port);
        crate::control::intr::uninstall(&*port, true);
        crate::control::intr::close_rx_fds(&*port);
        (*port).set_ctx(std::ptr::null_mut());
        (*eth_dev).process_private = std::ptr::null_mut();
        drop(Arc::from_raw(port));
    }
}

/// Stops and closes every port of a PCI device that the application has not
/// closed (hot unplug, or EAL cleanup at exit with ports still started), so
/// queues and the device context are released by the driver, not left to
/// the process exit.
pub(crate) fn remove_all(pci_dev: &mut ffi::rte_pci_device) -> c_int {
    let parent = &pci_dev.device as *const ffi::rte_device;
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
        if started {
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
    format!(
        "{} net_mana-rs {}",
        fw.to_string_lossy(),
        env!("CARGO_PKG_VERSION")
    )
}
