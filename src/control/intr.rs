//! Interrupts: the device's async-event fd on the EAL interrupt thread, and
//! rx queue interrupts (CQ arming plus completion channels) for
//! `l3fwd-power`-style applications.

use crate::control::error::{self, Error};
use crate::control::port::Port;
use crate::ffi;
use ::log::{error, warn};
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn set_nonblocking(fd: c_int) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor we own; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Registers the async-event handler on `port`'s current device context.
/// The registration owns a reference to the port until it is removed.
pub fn install(port: &Arc<Port>) -> Result<(), c_int> {
    let ctx = port.ctx.load(Ordering::Acquire);
    // SAFETY: the context is live while the port holds its device.
    let fd = unsafe { (*ctx).async_fd };
    set_nonblocking(fd).map_err(|e| {
        error!("{}: async event fd: {e}", port.name);
        -(e.raw_os_error().unwrap_or(libc::EIO))
    })?;
    let h = port.intr.handle;
    let arg = Arc::into_raw(port.clone()) as *mut c_void;
    // SAFETY: our handle; the argument is a leaked Arc reclaimed when the
    // callback can no longer run.
    let ret = unsafe {
        ffi::rte_intr_fd_set(h, fd);
        ffi::rte_intr_type_set(h, ffi::RTE_INTR_HANDLE_EXT);
        ffi::rte_intr_callback_register(h, Some(on_async_event), arg)
    };
    if ret != 0 {
        // SAFETY: undo the leak above.
        unsafe { drop(Arc::from_raw(arg as *const Port)) };
        return Err(ret);
    }
    port.intr.lock().registered = true;
    Ok(())
}

/// Removes the handler. On the interrupt thread (inside an event callback)
/// the removal is deferred until the running callback returns; `closing`
/// then frees the handle as well.
pub fn uninstall(port: &Port, closing: bool) {
    let intr = &port.intr;
    let mut st = intr.lock();
    if !st.registered {
        if st.pending {
            st.free_on_release |= closing;
        } else if closing {
            // SAFETY: nothing refers to the handle any more.
            unsafe { ffi::rte_intr_instance_free(intr.handle) };
        }
        return;
    }
    st.registered = false;
    let arg = port as *const Port as *mut c_void;
    // SAFETY: FFI query.
    if unsafe { ffi::rte_thread_is_intr() } != 0 {
        st.pending = true;
        st.free_on_release = closing;
        drop(st);
        // SAFETY: `release` runs once the callback returned.
        let ret = unsafe {
            ffi::rte_intr_callback_unregister_pending(
                intr.handle,
                Some(on_async_event),
                arg,
                Some(release),
            )
        };
        if ret >= 0 {
            return;
        }
        intr.lock().pending = false;
    } else {
        drop(st);
    }
    loop {
        // SAFETY: unregistering our own callback.
        let ret =
            unsafe { ffi::rte_intr_callback_unregister(intr.handle, Some(on_async_event), arg) };
        if ret != -libc::EAGAIN {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    if closing {
        // SAFETY: the callback can no longer run.
        unsafe { ffi::rte_intr_instance_free(intr.handle) };
    }
    // SAFETY: the registration's reference, leaked by `install`.
    unsafe { drop(Arc::from_raw(arg as *const Port)) };
}

/// Deferred-removal completion, on the interrupt thread. `_eal_copy` is
/// EAL's own copy of the handle, which EAL frees itself.
unsafe extern "C" fn release(_eal_copy: *mut ffi::rte_intr_handle, arg: *mut c_void) {
    // SAFETY: `arg` is the Arc leaked by `install`, released exactly once.
    let port = unsafe { Arc::from_raw(arg as *const Port) };
    let free = {
        let mut st = port.intr.lock();
        st.pending = false;
        st.free_on_release
    };
    port.intr.released.notify_all();
    if free {
        // SAFETY: the port is closed; nothing else uses our handle.
        unsafe { ffi::rte_intr_instance_free(port.intr.handle) };
    }
}

/// Waits (bounded) until a deferred removal has run, so the old context's
/// fd is no longer watched when the context is closed.
pub fn wait_released(port: &Port) {
    let mut st = port.intr.lock();
    port.intr
        .released
        .wait_while_for(&mut st, |s| s.pending, std::time::Duration::from_secs(5));
}

/// EAL interrupt thread: drain the device's async events.
unsafe extern "C" fn on_async_event(arg: *mut c_void) {
    // SAFETY: the registration holds a reference to the port; take another
    // for the recovery thread.
    let port = unsafe {
        Arc::increment_strong_count(arg as *const Port);
        Arc::from_raw(arg as *const Port)
    };
    loop {
        let ctx = port.ctx.load(Ordering::Acquire);
        if ctx.is_null() {
            return;
        }
        let mut ev = ffi::ibv_async_event::default();
        // SAFETY: the context stays open while this handler is registered.
        if unsafe { ffi::ibv_get_async_event(ctx, &mut ev) } != 0 {
            return;
        }
        let kind = ev.event_type;
        // SAFETY: acknowledges the event just read.
        unsafe { ffi::ibv_ack_async_event(&mut ev) };
        if kind == ffi::IBV_EVENT_DEVICE_FATAL {
            (port.on_device_fatal)(port);
            return;
        }
        if kind > ffi::IBV_EVENT_WQ_FATAL {
            // Not a verbs event: a device that lies could send these by the
            // thousand, so the log says so at 1, 2, 4, 8, ... of them.
            let n = port.unknown_events.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                warn!(
                    "{}: ignoring device event of unknown type {kind} ({n} so far; xstat unknown_device_events)",
                    port.name
                );
            }
            continue;
        }
        warn!("{}: ignoring device event {kind}", port.name);
    }
}

/// Points the interrupt handle's event fds at the rx queues' completion
/// channels (`intr_conf.rxq`). Each queue's event fd is an epoll fd of the
/// driver's that watches the queue's current channel: it stays the same
/// across device resets, so an application's epoll registrations
/// (`rte_eth_dev_rx_intr_ctl_q`) survive them.
pub fn enable_rx_vectors(port: &Port, channel_fds: &[c_int]) -> Result<(), c_int> {
    let h = port.intr.handle;
    let n = channel_fds
        .len()
        .min(ffi::RTE_MAX_RXTX_INTR_VEC_ID as usize);
    let mut epfds = port.rx_epfds.lock();
    while epfds.len() < n {
        // SAFETY: creates a descriptor the port owns.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(-libc::EMFILE);
        }
        epfds.push(fd);
    }
    for (i, &ch) in channel_fds[..n].iter().enumerate() {
        set_nonblocking(ch).map_err(|e| -(e.raw_os_error().unwrap_or(libc::EIO)))?;
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: i as u64,
        };
        // SAFETY: both descriptors are open; the old channel left the set
        // when it was closed.
        if unsafe { libc::epoll_ctl(epfds[i], libc::EPOLL_CTL_ADD, ch, &mut ev) } != 0 {
            return Err(-libc::EIO);
        }
    }
    // SAFETY: configuring our own handle.
    unsafe {
        if ffi::rte_intr_vec_list_alloc(h, std::ptr::null(), n as c_int) != 0 {
            return Err(-libc::ENOMEM);
        }
        for (i, &fd) in epfds[..n].iter().enumerate() {
            ffi::rte_intr_vec_list_index_set(
                h,
                i as c_int,
                (ffi::RTE_INTR_VEC_RXTX_OFFSET as usize + i) as c_int,
            );
            ffi::rte_intr_efds_index_set(h, i as c_int, fd);
        }
        ffi::rte_intr_nb_efd_set(h, n as c_int);
        ffi::rte_intr_max_intr_set(h, n as c_int + 1);
    }
    Ok(())
}

/// Forgets the rx vectors of a stopped port (the epoll fds stay for the
/// next start; they are closed with the port).
pub fn disable_rx_vectors(port: &Port) {
    // SAFETY: resetting our own handle's vector list.
    unsafe {
        ffi::rte_intr_vec_list_free(port.intr.handle);
        ffi::rte_intr_nb_efd_set(port.intr.handle, 0);
    }
}

/// Closes the rx interrupt epoll fds (port close).
pub fn close_rx_fds(port: &Port) {
    for fd in port.rx_epfds.lock().drain(..) {
        // SAFETY: our own descriptor.
        unsafe { libc::close(fd) };
    }
}

/// `rx_queue_intr_enable`: arms the queue's CQ, so the device signals the
/// completion channel on the next completion.
pub fn arm_rx(port: &Port, qid: u16) -> error::Result<()> {
    let ctrl = port.ctrl.lock();
    if !ctrl.started || port.data().dev_conf.intr_conf.rxq() == 0 {
        return Err(Error::invalid(format!(
            "rx queue {qid}: interrupts need a started port configured with intr_conf.rxq"
        )));
    }
    if ctrl.running.is_none() {
        // Recovering: the queues have no device objects to arm.
        return Err(Error::retry_later(
            "recovering from a device reset: poll, and arm again after RTE_ETH_EVENT_RECOVERY_SUCCESS",
        ));
    }
    let q = ctrl
        .rx
        .get(usize::from(qid))
        .ok_or_else(|| Error::invalid(format!("rx queue {qid} is not set up")))?;
    if !q.arm() {
        return Err(Error::retry_later(format!(
            "rx queue {qid} is stopped, or a burst runs on it: arm it from the lcore that polls it"
        )));
    }
    Ok(())
}

/// `rx_queue_intr_disable`: consumes the queue's pending completion event;
/// `-EAGAIN` if none came.
pub fn take_rx_event(port: &Port, qid: u16) -> c_int {
    let ctrl = port.ctrl.lock();
    match ctrl
        .running
        .as_ref()
        .and_then(|r| r.rx_channel(usize::from(qid)))
    {
        Some(ch) if ch.take_event() => 0,
        Some(_) => -libc::EAGAIN,
        None => -libc::EINVAL,
    }
}
