//! This process's fast-path table (`rte_eth_fp_ops`), which
//! `rte_eth_rx_burst`/`rte_eth_tx_burst` read instead of the port's data.

use super::sys as ffi;

/// Points this process's fast-path entry of `port_id` at the port's
/// current queue arrays (its shared ethdev data), as ethdev does when a
/// secondary attaches a port: ethdev 22.11 never does it again, so a
/// secondary that attached a port before the primary configured it would
/// burst on no queues. False for a port id out of range; a port not
/// attached here is left alone.
///
/// # Safety
/// The port's queue arrays do not change meanwhile: the primary is inside
/// `dev_start` for this port, waiting for the caller's answer.
pub unsafe fn point_at_queues(port_id: u16) -> bool {
    let i = usize::from(port_id);
    if i >= ffi::RTE_MAX_ETHPORTS as usize {
        return false;
    }
    // SAFETY: `i` is within both per-process arrays (RTE_MAX_ETHPORTS
    // entries). An attached port's `data` is its shared ethdev data, whose
    // queue arrays the primary's configure allocated and which stay put
    // (caller); the table entry is this process's own, and its burst
    // functions are already set.
    unsafe {
        let dev = (&raw mut ffi::rte_eth_devices as *mut ffi::rte_eth_dev).add(i);
        if (*dev).state != ffi::RTE_ETH_DEV_ATTACHED || (*dev).data.is_null() {
            return true;
        }
        let data = (*dev).data;
        let fp = (&raw mut ffi::rte_eth_fp_ops as *mut ffi::rte_eth_fp_ops).add(i);
        (*fp).rxq.data = (*data).rx_queues;
        (*fp).txq.data = (*data).tx_queues;
    }
    true
}
