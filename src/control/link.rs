//! The link a port reports, and link status change events.
//!
//! Up follows the port state: started and not recovering from a reset
//! (MANA has no carrier of its own that the PMD could read). The kernel
//! netdev of the port adds what it knows: its `speed` when it reports one
//! (Linux answers -1 or EINVAL when it does not, which is what a down
//! interface gives, and MANA's is held down while DPDK uses the port), else
//! the 100 Gbit/s DPDK's C driver reports; and a `carrier` of 0 holds the
//! link down.
//!
//! With `intr_conf.lsc` the application gets `RTE_ETH_EVENT_INTR_LSC`
//! whenever the reported link changes: at start and stop, when a reset's
//! recovery begins and ends, and when the netdev's carrier or speed changes
//! (polled while the port is started). Events are raised with no driver
//! lock held, as the callback may call back into the driver: from an EAL
//! alarm on the interrupt thread, except the one of `dev_stop`, raised
//! before it returns so that none is in flight when the port is closed.

use crate::control::port::Port;
use crate::control::state::link_state::Published;
use crate::ffi::consts::SPEED_NUM_100G;
use crate::ffi::{self, compat};
use crate::hw::sysfs;
use std::ffi::c_void;
use std::sync::atomic::Ordering;

/// How often a started port's netdev is read for carrier and speed.
const POLL_US: u64 = 250_000;

/// The link of a port whose state says `up`: status and speed in Mbit/s.
pub fn current(p: &Port, up: bool) -> (bool, u32) {
    let netdev = sysfs::port_netdev_dir(&sysfs::pci_dir(&p.pci), p.ib_port)
        .map(|dir| sysfs::netdev_link(&dir))
        .unwrap_or_default();
    let up = up && netdev.carrier != Some(false);
    let speed = if up {
        netdev.speed_mbps.unwrap_or(SPEED_NUM_100G)
    } else {
        0
    };
    (up, speed)
}

fn lsc_wanted(p: &Port) -> bool {
    p.data().dev_conf.intr_conf.lsc() != 0
}

/// How the event of a change reaches the application.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tell {
    /// From an EAL alarm: the caller may hold locks the callbacks take.
    Later,
    /// Before the call returns, with no driver lock held, together with
    /// any change still waiting for its alarm.
    Now,
}

/// The port was started or stopped (`dev_start`, `dev_stop`): writes its
/// link and tells the application if it changed.
///
/// `dev_stop` tells now: an event still in flight when the application
/// closes the port could wait on a lock the closing thread holds while
/// `close` waits for the event (net_failsafe closes its sub-devices holding
/// the lock its LSC callback takes).
pub fn set_started(p: &Port, started: bool, tell: Tell) -> std::ffi::c_int {
    let (ret, now) = {
        let mut last = p.link.last.lock();
        last.started = started;
        last.state_up = started;
        write(p, &mut last, tell)
    };
    if now {
        raise(p);
    }
    ret
}

/// Writes the link of a started port that is `active` (not recovering
/// from a reset) as up; tells the application from an alarm.
pub fn refresh(p: &Port, active: bool) -> std::ffi::c_int {
    let mut last = p.link.last.lock();
    last.state_up = last.started && active;
    write(p, &mut last, Tell::Later).0
}

/// Writes the link into the port's shared data (full duplex, fixed) and
/// schedules or claims its event if it changed; true: raise it now.
fn write(p: &Port, last: &mut Published, tell: Tell) -> (std::ffi::c_int, bool) {
    let (up, speed) = current(p, last.state_up);
    // Full duplex, fixed (RTE_ETH_LINK_FULL_DUPLEX, RTE_ETH_LINK_FIXED).
    let link = compat::eth_link(speed, true, false, up);
    // SAFETY: our live ethdev.
    let ret = unsafe { ffi::mana_shim_linkstatus_set(p.eth_dev, &link) };
    let changed = std::mem::replace(&mut last.link, (up, speed)) != (up, speed);
    if !lsc_wanted(p) {
        return (ret, false);
    }
    match tell {
        // The alarm finds nothing pending and raises nothing.
        Tell::Now => (ret, changed | std::mem::take(&mut last.pending)),
        Tell::Later => {
            if changed && !std::mem::replace(&mut last.pending, true) {
                alarm(p, 1, on_change);
            }
            (ret, false)
        }
    }
}

/// Starts polling the netdev of a started port (with `intr_conf.lsc`).
pub fn watch(p: &Port) {
    if lsc_wanted(p) && !p.link.polling.swap(true, Ordering::AcqRel) {
        alarm(p, POLL_US, on_poll);
    }
}

/// Stops polling (the pending alarm sees this and does not re-arm).
pub fn unwatch(p: &Port) {
    p.link.polling.store(false, Ordering::Release);
}

/// Cancels this port's alarms (close): none runs after this returns,
/// unless called from one of them.
pub fn cancel(p: &Port) {
    unwatch(p);
    // An alarm not yet running raises nothing after this.
    p.link.last.lock().pending = false;
    for cb in [on_change as extern "C" fn(*mut c_void), on_poll] {
        // SAFETY: cancels our own alarms with this port's argument;
        // EAL waits for one running on another thread.
        unsafe { ffi::rte_eal_alarm_cancel(Some(cb), arg(p)) };
    }
}

fn arg(p: &Port) -> *mut c_void {
    usize::from(p.port_id) as *mut c_void
}

fn alarm(p: &Port, us: u64, cb: extern "C" fn(*mut c_void)) {
    // SAFETY: the argument is a port id, not a pointer: the callback
    // looks the port up and does nothing if it is gone.
    let ret = unsafe { ffi::rte_eal_alarm_set(us, Some(cb), arg(p)) };
    if ret != 0 {
        ::log::warn!(
            "{}: cannot schedule the link status check ({ret}); link status change events may be late or missing",
            p.name
        );
    }
}

fn port_of(arg: *mut c_void) -> Option<std::sync::Arc<Port>> {
    Port::lookup(u16::try_from(arg as usize).ok()?)
}

/// The published link changed: tell the application, unless `dev_stop`
/// or `dev_close` has since claimed the event.
extern "C" fn on_change(arg: *mut c_void) {
    if let Some(p) = port_of(arg) {
        if std::mem::take(&mut p.link.last.lock().pending) {
            raise(&p);
        }
    }
}

fn raise(p: &Port) {
    // SAFETY: the port's ethdev is live (close cancels the alarm first);
    // no driver lock is held, as the callback may re-enter.
    unsafe {
        ffi::rte_eth_dev_callback_process(
            p.eth_dev,
            ffi::RTE_ETH_EVENT_INTR_LSC,
            std::ptr::null_mut(),
        )
    };
}

/// Re-reads the netdev of a started port.
extern "C" fn on_poll(arg: *mut c_void) {
    let Some(p) = port_of(arg) else { return };
    if !p.link.polling.load(Ordering::Acquire) {
        return;
    }
    write(&p, &mut p.link.last.lock(), Tell::Later);
    alarm(&p, POLL_US, on_poll);
}
