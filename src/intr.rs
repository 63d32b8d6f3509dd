//! Interrupts: the device's async-event fd on the EAL interrupt thread, and
//! rx queue interrupts (CQ arming plus completion channels) for
//! `l3fwd-power`-style applications.

use crate::ffi::{self, rte_eth_dev};
use crate::port::Port;
use ::log::{error, warn};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

const INSTANCE_F_SHARED: u32 = 1;

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

/// Registers the async-event handler of `port`'s current device context.
/// The registration owns a reference to the port until it is removed.
pub fn install(port: &Arc<Port>) -> Result<(), c_int> {
    let ctx = port.ctx.load(std::sync::atomic::Ordering::Acquire);
    // SAFETY: the context is live while the port holds its device.
    let fd = unsafe { (*ctx).async_fd };
    set_nonblocking(fd).map_err(|e| {
        error!("{}: async event fd: {e}", port.name);
        -(e.raw_os_error().unwrap_or(libc::EIO))
    })?;
    // SAFETY: plain allocation; checked.
    let h = unsafe { ffi::rte_intr_instance_alloc(INSTANCE_F_SHARED) };
    if h.is_null() {
        return Err(-libc::ENOMEM);
    }
    let arg = Arc::into_raw(port.clone()) as *mut c_void;
    // SAFETY: `h` is ours; the callback's argument is a leaked Arc that
    // `uninstall` reclaims once the callback can no longer run.
    let ret = unsafe {
        ffi::rte_intr_fd_set(h, fd);
        ffi::rte_intr_type_set(h, ffi::RTE_INTR_HANDLE_EXT);
        ffi::rte_intr_callback_register(h, Some(on_async_event), arg)
    };
    if ret != 0 {
        // SAFETY: undo the two steps above.
        unsafe {
            drop(Arc::from_raw(arg as *const Port));
            ffi::rte_intr_instance_free(h);
        }
        return Err(ret);
    }
    port.intr.store(h, std::sync::atomic::Ordering::Release);
    // SAFETY: the ethdev is ours; rx interrupt vectors hang off this handle.
    unsafe { (*port.eth_dev).intr_handle = h };
    Ok(())
}

/// Removes the handler. From the interrupt thread itself (an application
/// closing the port inside an event callback) the removal is deferred until
/// the running callback returns.
pub fn uninstall(port: &Port) {
    let h = port
        .intr
        .swap(std::ptr::null_mut(), std::sync::atomic::Ordering::AcqRel);
    if h.is_null() {
        return;
    }
    let arg = port as *const Port as *mut c_void;
    // SAFETY: FFI query.
    if unsafe { ffi::rte_thread_is_intr() } != 0 {
        // SAFETY: the pending removal calls `release` after the callback ends.
        let ret = unsafe {
            ffi::rte_intr_callback_unregister_pending(h, Some(on_async_event), arg, Some(release))
        };
        if ret >= 0 {
            return;
        }
    }
    loop {
        // SAFETY: unregistering our own callback.
        let ret = unsafe { ffi::rte_intr_callback_unregister(h, Some(on_async_event), arg) };
        if ret != -libc::EAGAIN {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // SAFETY: the callback can no longer run.
    unsafe { release(h, arg) };
}

unsafe extern "C" fn release(h: *mut ffi::rte_intr_handle, arg: *mut c_void) {
    // SAFETY: `arg` is the Arc leaked by `install`; `h` the handle it registered.
    unsafe {
        drop(Arc::from_raw(arg as *const Port));
        ffi::rte_intr_instance_free(h);
    }
}

/// EAL interrupt thread: drain the device's async events.
unsafe extern "C" fn on_async_event(arg: *mut c_void) {
    // SAFETY: the registration holds a reference to the port.
    let port = unsafe { &*(arg as *const Port) };
    loop {
        let ctx = port.ctx.load(std::sync::atomic::Ordering::Acquire);
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
            crate::reset::on_device_fatal(port);
            return;
        }
        warn!("{}: ignoring device event {kind}", port.name);
    }
}

/// Points the interrupt handle's event fds at the rx queues' completion
/// channels (`intr_conf.rxq`).
pub fn enable_rx_vectors(port: &Port, fds: &[c_int]) -> Result<(), c_int> {
    let h = port.intr.load(std::sync::atomic::Ordering::Acquire);
    disable_rx_vectors(port);
    let n = fds.len().min(ffi::RTE_MAX_RXTX_INTR_VEC_ID as usize);
    for &fd in &fds[..n] {
        set_nonblocking(fd).map_err(|e| -(e.raw_os_error().unwrap_or(libc::EIO)))?;
    }
    // SAFETY: configuring our own handle.
    unsafe {
        if ffi::rte_intr_vec_list_alloc(h, std::ptr::null(), n as c_int) != 0 {
            return Err(-libc::ENOMEM);
        }
        for (i, &fd) in fds[..n].iter().enumerate() {
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

pub fn disable_rx_vectors(port: &Port) {
    let h = port.intr.load(std::sync::atomic::Ordering::Acquire);
    if h.is_null() {
        return;
    }
    // SAFETY: resetting our own handle's vectors.
    unsafe {
        ffi::rte_intr_free_epoll_fd(h);
        ffi::rte_intr_vec_list_free(h);
        ffi::rte_intr_nb_efd_set(h, 0);
    }
}

/// Arms the queue's CQ: the device signals the completion channel on the
/// next completion.
pub unsafe extern "C" fn rx_queue_intr_enable(dev: *mut rte_eth_dev, qid: u16) -> c_int {
    // SAFETY: a live ethdev of ours.
    let (port, d) = unsafe { (Port::of(dev), &*(*dev).data) };
    let ctrl = port.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    if !ctrl.started || d.dev_conf.intr_conf.rxq() == 0 {
        return -libc::EINVAL;
    }
    // SAFETY: started queues exist.
    let q = unsafe { &*(*d.rx_queues.add(usize::from(qid)) as *const crate::rxq::RxQueue) };
    q.arm();
    0
}

/// Consumes the queue's pending completion event; `-EAGAIN` if none.
pub unsafe extern "C" fn rx_queue_intr_disable(dev: *mut rte_eth_dev, qid: u16) -> c_int {
    // SAFETY: a live ethdev of ours.
    let port = unsafe { Port::of(dev) };
    let ctrl = port.ctrl.lock().unwrap_or_else(|e| e.into_inner());
    match ctrl.rx_channel(usize::from(qid)) {
        Some(ch) if ch.take_event() => 0,
        Some(_) => -libc::EAGAIN,
        None => -libc::EINVAL,
    }
}
