//! One ethdev per MANA port: the process-local state behind
//! `eth_dev->process_private` (control state and its lock, memory
//! registrations, interrupts, reset state) and lookup by port id. Made of
//! the types in `state`; what creates and removes a port is `plug`.

use crate::control::state::doorbell_share::DoorbellShare;
use crate::control::state::intr_handle::Intr;
use crate::control::state::limits::Limits;
use crate::control::state::link_state::LinkState;
use crate::control::state::mr_registry::Registry;
use crate::control::state::queue_sets::{QueueSet, Running};
use crate::control::state::reset_state::Reset;
use crate::control::state::rss_conf::Rss;
use crate::control::state::shared::Shared;
use crate::dataplane::queue::ControlToken;
use crate::dataplane::rxq::{self, RxPathWish, RxQueue};
use crate::dataplane::tx_prepare;
use crate::dataplane::txq::{self, TxPathWish, TxQueue};
use crate::ffi::{self, compat};
use crate::hw::sysfs::{PciAddr, PortNetdev};
use crate::hw::verbs::{Context, DeviceInfo, DeviceList, Pd};
use parking_lot::Mutex;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;

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
    pub running: Option<Running>,
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
    pub fn new(dev: Device) -> Ctrl {
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
    pub mr: Mutex<Registry>,
    /// The open device context, for the interrupt thread (null while none).
    /// Set only through [`Port::set_ctx`].
    pub ctx: AtomicPtr<ffi::ibv_context>,
    /// What secondaries map their doorbell page from.
    pub doorbell: DoorbellShare,
    pub intr: Intr,
    /// Per-queue epoll fds standing in for the completion channels.
    pub rx_epfds: Mutex<Vec<c_int>>,
    pub reset: Reset,
    /// What the interrupt thread runs on `IBV_EVENT_DEVICE_FATAL`: the
    /// recovery's entry, `reset::on_device_fatal`, given at creation
    /// (`reset` sits above `intr`, which reads the event).
    pub on_device_fatal: fn(Arc<Port>),
    /// Asynchronous device events of a type verbs does not define, ignored
    /// (xstat `unknown_device_events`; primary process only).
    pub unknown_events: std::sync::atomic::AtomicU64,
    /// The link last reported, for link status change events.
    pub link: LinkState,
    /// The receive loop and send run the device arguments ask for; else
    /// the environment's (`NET_MANA_RX_PATH`, `NET_MANA_TX_PATH`).
    pub rx_path: Option<RxPathWish>,
    pub tx_path: Option<TxPathWish>,
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
    /// `dev` is a live ethdev whose `process_private` was set by
    /// [`plug::create`](crate::control::plug::create).
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

/// Makes the port findable by its port id ([`Port::lookup`]).
pub fn register(port: &Arc<Port>) {
    let mut ports = PORTS.lock();
    let i = usize::from(port.port_id);
    if ports.len() <= i {
        ports.resize(i + 1, None);
    }
    ports[i] = Some(port.clone());
}

/// Forgets the port, if it is the one registered under its port id.
pub fn unregister(p: &Port) {
    if let Some(slot) = PORTS.lock().get_mut(usize::from(p.port_id)) {
        if slot.as_ref().is_some_and(|q| std::ptr::eq(&**q, p)) {
            *slot = None;
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
