//! Device error handling mode reported to applications.

use crate::ffi;

/// Until recovery from service resets lands, a fatal device event stops the
/// port's data path and is reported as a removal (`RTE_ETH_EVENT_INTR_RMV`).
pub const ERR_HANDLE_MODE: ffi::rte_eth_err_handle_mode = ffi::RTE_ETH_ERROR_HANDLE_MODE_NONE;

/// EAL interrupt thread: the device is gone (service reset or hot remove).
/// Stops the data path and tells the application the port was removed,
/// as DPDK 22.11's netvsc expects, when it asked for removal events.
pub fn on_device_fatal(port: &crate::port::Port) {
    ::log::error!(
        "{}: the device reported a fatal error (service reset or removal); the port stops",
        port.name
    );
    let d = port.data();
    crate::ethdev::close_gates(d);
    if d.dev_conf.intr_conf.rmv() != 0 {
        // SAFETY: the port's live ethdev; no driver lock is held here.
        unsafe {
            ffi::rte_eth_dev_callback_process(
                port.eth_dev,
                ffi::RTE_ETH_EVENT_INTR_RMV,
                std::ptr::null_mut(),
            )
        };
    }
}
