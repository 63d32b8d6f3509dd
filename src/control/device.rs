//! Letting go of a port's device context, as `dev_close` and a reset's
//! recovery both do: in an order that keeps the interrupt thread off a
//! context being closed.

use crate::control::port::{Device, Port};
use crate::ffi;

/// Lets go of the port's device context: deregisters the memory, stops
/// watching its async fd, then closes it. Off the interrupt thread this waits
/// until the async handler cannot be running on the context; on it, the
/// running handler is the caller's own and finds the context gone on return.
pub fn close_device(port: &Port, dev: Option<Device>) {
    port.mr.lock().detach();
    crate::control::intr::uninstall(port, false);
    // SAFETY: FFI query.
    if unsafe { ffi::rte_thread_is_intr() } == 0 {
        crate::control::intr::wait_released(port);
    }
    port.set_ctx(std::ptr::null_mut());
    drop(dev);
}
