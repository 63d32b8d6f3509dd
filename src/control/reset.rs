//! Recovery from hardware service resets, and hot remove.
//!
//! Azure services MANA by tearing the RDMA device down: user space reads
//! `IBV_EVENT_DEVICE_FATAL` on the async fd, doorbells go nowhere, and some
//! seconds later the device comes back for the same PCI function (possibly
//! under a new name). The flow:
//!
//! 1. EAL interrupt thread ([`on_device_fatal`]): mark the port recovering,
//!    close every queue's burst gate (waiting out bursts in flight), defer
//!    the removal of its own event handler, emit `ERR_RECOVERING` with no
//!    lock held, then start the recovery thread. Nothing there calls verbs.
//! 2. Recovery thread ([`recover`]): take the queues' verbs objects and the
//!    device out of the control state (lock held only for the moves), destroy
//!    them without a lock, free every mbuf, watch for the device to return
//!    (bounded, cancellable), reopen it for the same PCI address and MAC,
//!    rebuild the queues from the configuration ethdev promises to keep,
//!    reopen the gates, and emit `RECOVERY_SUCCESS` — or `RECOVERY_FAILED`
//!    (`INTR_RMV` instead when the function was removed and the application
//!    asked for removal events) — after every lock is dropped. The port
//!    keeps its port id throughout.
//!
//! Every lock is taken and released in one function; events are emitted only
//! with no driver lock held, so callbacks may stop, close or remove the port
//! from any thread, including this one.

use crate::control::device::close_device;
use crate::control::lifecycle::publish_link;
use crate::control::port::{Device, Port};
use crate::control::queues::{self, Plan};
use crate::ffi;
use crate::hw::sysfs;
use crate::hw::verbs::DeviceList;
use ::log::{error, info, warn};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const ERR_HANDLE_MODE: ffi::rte_eth_err_handle_mode = ffi::RTE_ETH_ERROR_HANDLE_MODE_PROACTIVE;

/// How often the recovery thread looks for the device.
const POLL: Duration = Duration::from_millis(50);
/// Rebuilds tried per reset before giving up.
const REBUILD_ATTEMPTS: u32 = 3;

use crate::control::handoff::{Begin, Phase, Start};

fn emit(port: &Port, event: ffi::rte_eth_event_type) {
    // SAFETY: the port's ethdev is live (the port is not closed: callers
    // check the phase); no driver lock is held, as callbacks may re-enter.
    unsafe { ffi::rte_eth_dev_callback_process(port.eth_dev, event, std::ptr::null_mut()) };
}

/// EAL interrupt thread: the device reported a fatal error.
pub fn on_device_fatal(port: Arc<Port>) {
    let begin = {
        // Under the control lock, so no control op that saw the port active
        // reopens a gate (or frees a queue) after this closes them.
        let ctrl = port.ctrl.lock();
        let begin = port.reset.handoff.begin();
        if begin != Begin::Ignore {
            queues::close_gates(&ctrl);
        }
        begin
    };
    if begin == Begin::Ignore {
        return;
    }
    warn!(
        "{}: device reset (IBV_EVENT_DEVICE_FATAL): stopping traffic and recovering",
        port.name
    );
    // This handler's fd dies with the old context; it cannot unregister
    // itself synchronously from inside its own callback.
    crate::control::intr::uninstall(&port, false);
    publish_link(&port);
    if begin == Begin::Deferred {
        // The recovery thread is emitting the last recovery's SUCCESS; it
        // emits ERR_RECOVERING for this reset after that and recovers.
        return;
    }
    emit(&port, ffi::RTE_ETH_EVENT_ERR_RECOVERING);
    let p = port.clone();
    let started = port.reset.handoff.start(|| {
        crate::control::handoff::ThreadBuilder::new()
            .name(format!("mana-reset-{}", port.port_id))
            .spawn(move || recover(p))
    });
    if let Start::Failed(e) = started {
        error!("{}: cannot start the recovery thread: {e}", port.name);
        emit(&port, ffi::RTE_ETH_EVENT_RECOVERY_FAILED);
    }
}

/// How a recovery ended.
enum Outcome {
    Recovered,
    Failed(String),
    Removed,
    Cancelled,
}

/// The recovery thread: recovers, and recovers again from a reset that
/// arrived while it announced the last success.
fn recover(port: Arc<Port>) {
    while recover_once(&port) {
        warn!(
            "{}: the device reset again as the recovery completed; recovering again",
            port.name
        );
        publish_link(&port);
        emit(&port, ffi::RTE_ETH_EVENT_ERR_RECOVERING);
        // A callback may have closed the port (on this thread).
        if port.reset.handoff.cancelled() {
            info!("{}: recovery cancelled by close", port.name);
            return;
        }
    }
}

/// One recovery, its events emitted; true if a reset arrived while its
/// RECOVERY_SUCCESS was being emitted.
fn recover_once(port: &Arc<Port>) -> bool {
    let t0 = Instant::now();
    let outcome = loop {
        match run(port) {
            Outcome::Recovered if !port.reset.handoff.activate() => warn!(
                "{}: the device reset again as it came back; recovering again",
                port.name
            ),
            o => break o,
        }
    };
    // Every lock is dropped here; the events may re-enter the driver.
    if !matches!(outcome, Outcome::Cancelled) {
        if !matches!(outcome, Outcome::Recovered) {
            port.reset.handoff.set_phase(Phase::Failed);
        }
        publish_link(port);
    }
    match outcome {
        Outcome::Recovered => {
            info!(
                "{}: recovered from the device reset in {:?}",
                port.name,
                t0.elapsed()
            );
            emit(port, ffi::RTE_ETH_EVENT_RECOVERY_SUCCESS);
            return port.reset.handoff.announced();
        }
        Outcome::Failed(why) => {
            error!("{}: recovery failed: {why}; close the port", port.name);
            emit(port, ffi::RTE_ETH_EVENT_RECOVERY_FAILED);
        }
        Outcome::Removed => {
            error!(
                "{}: the PCI function was removed; close the port",
                port.name
            );
            // One terminal event, as DPDK's own MANA driver sends: INTR_RMV
            // to an application that asked for removal events, else
            // RECOVERY_FAILED. netvsc 26.07 removes its VF on either; given
            // both it schedules the removal twice, and the second one works
            // on the released port and crashes the process.
            let rmv = port.data().dev_conf.intr_conf.rmv() != 0;
            emit(
                port,
                if rmv {
                    ffi::RTE_ETH_EVENT_INTR_RMV
                } else {
                    ffi::RTE_ETH_EVENT_RECOVERY_FAILED
                },
            );
        }
        Outcome::Cancelled => info!("{}: recovery cancelled by close", port.name),
    }
    false
}

fn run(port: &Arc<Port>) -> Outcome {
    let mut attempt = 1;
    loop {
        teardown(port);
        port.reset.handoff.forget_again();
        if port.reset.handoff.cancelled() {
            return Outcome::Cancelled;
        }
        let dev = match wait_for_device(port) {
            Ok(d) => d,
            Err(o) => return o,
        };
        match rebuild(port, dev) {
            // The device may have died again under the rebuild.
            Outcome::Failed(why) if attempt < REBUILD_ATTEMPTS => warn!(
                "{}: rebuilding after the reset failed ({why}); starting over (attempt {} of {REBUILD_ATTEMPTS})",
                port.name,
                attempt + 1
            ),
            o => return o,
        }
        attempt += 1;
    }
}

/// Takes the dead device and its queues out of the control state and
/// destroys them; frees every mbuf the queues held.
fn teardown(port: &Port) {
    let (running, dev) = {
        let mut ctrl = port.ctrl.lock();
        // Closed already, unless a rebuild opened them before the device
        // reset again.
        queues::close_gates(&ctrl);
        // What the device completed before it died, taken in before the
        // rings go.
        let unpolled = queues::settle_before_teardown(&mut ctrl);
        if unpolled > 0 {
            warn!(
                "{}: {unpolled} received packets not yet polled were lost to the reset",
                port.name
            );
        }
        (ctrl.running.take(), ctrl.dev.take())
    };
    crate::control::intr::disable_rx_vectors(port);
    // Verbs destroys without a lock: the objects are ours alone now.
    drop(running);
    {
        let lost = queues::detach_all(&mut port.ctrl.lock());
        if lost > 0 {
            warn!(
                "{}: {lost} packets in flight were lost to the reset",
                port.name
            );
        }
    }
    close_device(port, dev);
}

/// Polls for the RDMA device of the same PCI function with a port of the
/// same MAC, and opens it. A PCI function that vanished may come back
/// within the removal grace (a reconfiguration rescans it).
fn wait_for_device(port: &Port) -> Result<Device, Outcome> {
    let deadline = Instant::now() + port.reset.timeout;
    let pci_dir = sysfs::pci_dir(&port.pci);
    let mut gone_since: Option<Instant> = None;
    loop {
        if port.reset.handoff.cancelled() {
            return Err(Outcome::Cancelled);
        }
        if port.reset.removed.load(Ordering::Acquire) {
            return Err(Outcome::Removed);
        }
        if !pci_dir.exists() {
            let since = *gone_since.get_or_insert_with(|| {
                warn!(
                    "{}: PCI function {} is gone; waiting {:?} for a rescan to bring it back",
                    port.name, port.pci, port.reset.removal_grace
                );
                Instant::now()
            });
            if since.elapsed() >= port.reset.removal_grace {
                return Err(Outcome::Removed);
            }
        } else if let Some(since) = gone_since.take() {
            info!(
                "{}: PCI function {} is back after {:?}",
                port.name,
                port.pci,
                since.elapsed()
            );
        } else if let Some(dev) = find_device(port) {
            return Ok(dev);
        }
        if Instant::now() > deadline {
            return Err(Outcome::Failed(format!(
                "the device did not come back within {:?}",
                port.reset.timeout
            )));
        }
        std::thread::sleep(POLL);
    }
}

fn find_device(port: &Port) -> Option<Device> {
    let list = DeviceList::get().ok()?;
    let infos = list.infos();
    // Under 7.x the function has a second RDMA device, the RNIC, in either
    // order: the Ethernet one is the one to reopen.
    let index = infos.iter().enumerate().position(|(i, d)| {
        sysfs::ib_device_pci_addr(&d.ibdev_path) == Some(port.pci)
            && list
                .open(i)
                .and_then(|ctx| ctx.query_device_ex())
                .is_ok_and(|a| crate::hw::verbs::is_ethernet_function(a.orig_attr.vendor_part_id))
    })?;
    let netdev = sysfs::port_netdev(&infos[index].ibdev_path, port.ib_port)?;
    if netdev.mac != port.netdev.mac {
        warn!(
            "{}: IB port {} came back with MAC {}, not {}; waiting",
            port.name, port.ib_port, netdev.mac, port.netdev.mac
        );
        return None;
    }
    match Device::open(&list, index, port.ib_port) {
        Ok(d) => {
            info!("{}: device is back as {}", port.name, infos[index].name);
            Some(d)
        }
        Err(e) => {
            warn!(
                "{}: reopening {}: {e}; retrying",
                port.name, infos[index].name
            );
            None
        }
    }
}

/// Installs the new device and, if the application had the port started,
/// rebuilds the queues and reopens the gates. A device not installed in the
/// end is closed again, leaving nothing that points at it.
fn rebuild(port: &Arc<Port>, dev: Device) -> Outcome {
    let mut dev = Some(dev);
    let outcome = install(port, &mut dev);
    if dev.is_some() {
        close_device(port, dev);
    }
    outcome
}

/// [`rebuild`]'s work; takes `dev` into the control state on success.
fn install(port: &Arc<Port>, dev: &mut Option<Device>) -> Outcome {
    let d = dev.as_ref().expect("a device to install");
    port.set_ctx(d.ctx.as_ptr());
    if let Ok(attr) = d.ctx.query_device_ex() {
        port.shared()
            .set_fw_version(&crate::control::port::fw_version(&attr));
    }
    if let Err(e) = crate::control::intr::install(port) {
        return Outcome::Failed(format!("device event handler: {e}"));
    }
    crate::control::mr::register_all_pools(port, d);
    // Secondaries map the new page while every gate is still closed.
    if let Err(e) = crate::control::mp::remap_secondaries(port) {
        return Outcome::Failed(e);
    }
    // The queue configuration may change under us (an application ignoring
    // ERR_RECOVERING); retry on a stale plan, a few times.
    for _ in 0..4 {
        if port.reset.handoff.cancelled() {
            return Outcome::Cancelled;
        }
        let plan = {
            let mut ctrl = port.ctrl.lock();
            if !ctrl.started {
                ctrl.dev = dev.take();
                return Outcome::Recovered;
            }
            match Plan::new(port, &ctrl) {
                Ok(p) => p,
                Err(e) => return Outcome::Failed(e.to_string()),
            }
        };
        // A netdev the kernel re-created (unbind/bind, remove/rescan) has
        // its default MTU again. Traffic within it still flows, so a
        // refusal is said, not made fatal.
        if let Err(e) = crate::control::mtu::apply(port) {
            warn!(
                "{}: {e}; frames beyond the netdev's MTU are dropped until the port is restarted",
                port.name
            );
        }
        let d = dev.as_ref().expect("device kept until installed");
        let built = match queues::build(port, d, &plan) {
            Ok(b) => b,
            Err(e) => return Outcome::Failed(e.to_string()),
        };
        let mut ctrl = port.ctrl.lock();
        if ctrl.generation != plan.generation || !ctrl.started {
            drop(ctrl);
            drop(built);
            continue;
        }
        if let Err(e) = queues::attach(port, &mut ctrl, built) {
            return Outcome::Failed(e.to_string());
        }
        ctrl.dev = dev.take();
        // SAFETY: the port's data, under the control lock.
        queues::open_gates(&ctrl, unsafe { &mut *port.data_ptr() });
        return Outcome::Recovered;
    }
    Outcome::Failed(String::from(
        "the queue configuration kept changing during recovery",
    ))
}

/// EAL device-event callback: the PCI function is gone for good.
pub fn on_device_removed(port: &Port) {
    port.reset.mark_removed();
    let failed = {
        // As in on_device_fatal: no control op reopens what this closes.
        let ctrl = port.ctrl.lock();
        let active = port.reset.phase() == Phase::Active;
        if active {
            port.reset.handoff.set_phase(Phase::Failed);
            queues::close_gates(&ctrl);
        }
        active
    };
    if failed {
        publish_link(port);
        error!(
            "{}: the PCI function was removed; close the port",
            port.name
        );
        if port.data().dev_conf.intr_conf.rmv() != 0 {
            emit(port, ffi::RTE_ETH_EVENT_INTR_RMV);
        }
    }
    // A recovery in progress sees `removed` and ends with RECOVERY_FAILED.
}

/// Subscribes to EAL's device events for the port's PCI function, so a hot
/// remove is told apart from a service reset (the application must have
/// called `rte_dev_event_monitor_start()`). The argument is the port id:
/// the callback finds the port, if it still exists, through its ethdev.
pub fn watch_removal(port: &Port) {
    let name = std::ffi::CString::new(port.pci.to_string()).expect("no NUL in a PCI address");
    // SAFETY: registers a plain function with a copied name.
    let ret = unsafe {
        ffi::rte_dev_event_callback_register(
            name.as_ptr(),
            Some(on_dev_event),
            usize::from(port.port_id) as *mut std::ffi::c_void,
        )
    };
    if ret < 0 && ret != -libc::EEXIST {
        warn!(
            "{}: no device-event callback ({ret}); hot remove is detected from sysfs only",
            port.name
        );
    }
}

/// Removes the registration made by `watch_removal`. While the callback
/// runs on another thread this waits, as the port is freed next; on the
/// interrupt thread the running callback is the caller's own.
pub fn unwatch_removal(port: &Port) {
    let name = std::ffi::CString::new(port.pci.to_string()).expect("no NUL in a PCI address");
    loop {
        // SAFETY: unregistering our own callback; FFI query.
        let (ret, on_intr) = unsafe {
            (
                ffi::rte_dev_event_callback_unregister(
                    name.as_ptr(),
                    Some(on_dev_event),
                    usize::from(port.port_id) as *mut std::ffi::c_void,
                ),
                ffi::rte_thread_is_intr() != 0,
            )
        };
        if ret != -libc::EAGAIN || on_intr {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

unsafe extern "C" fn on_dev_event(
    _name: *const std::ffi::c_char,
    event: ffi::rte_dev_event_type,
    arg: *mut std::ffi::c_void,
) {
    if event != ffi::RTE_DEV_EVENT_REMOVE {
        return;
    }
    let Ok(port_id) = u16::try_from(arg as usize) else {
        return;
    };
    // Closing the port waits for this callback (`unwatch_removal`) unless
    // the close runs inside it; the lookup keeps the port alive meanwhile.
    if let Some(p) = Port::lookup(port_id) {
        on_device_removed(&p);
    }
}
