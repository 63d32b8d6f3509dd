//! Queue ops: setup and release, start and stop, info, burst modes, rx
//! interrupts, `tx_done_cleanup`, VLAN strip.

use super::{data, port, ret};
use crate::control::state::queue_sets::EthQueues;
use crate::control::{intr, lifecycle};
use crate::dataplane::rxq::{RxPath, RxQueue};
use crate::dataplane::txq::{self, TxPath, TxQueue};
use crate::ffi::consts::RX_OFFLOAD_VLAN_STRIP;
use crate::ffi::{self, rte_eth_dev};
use std::ffi::{c_int, c_uint, c_void};

pub unsafe extern "C" fn rx_queue_setup(
    dev: *mut rte_eth_dev,
    qid: u16,
    nb_desc: u16,
    socket: c_uint,
    conf: *const ffi::rte_eth_rxconf,
    mp: *mut ffi::rte_mempool,
) -> c_int {
    // SAFETY: ethdev passes a valid conf (its default if the app gave none).
    let conf = unsafe { &*conf };
    let r = lifecycle::setup_rx(port(dev), qid, nb_desc, socket as c_int, conf, mp);
    ret(dev, r)
}

pub unsafe extern "C" fn tx_queue_setup(
    dev: *mut rte_eth_dev,
    qid: u16,
    nb_desc: u16,
    socket: c_uint,
    conf: *const ffi::rte_eth_txconf,
) -> c_int {
    // SAFETY: ethdev passes a valid conf (its default if the app gave none).
    let conf = unsafe { &*conf };
    ret(
        dev,
        lifecycle::setup_tx(port(dev), qid, nb_desc, socket as c_int, conf),
    )
}

pub unsafe extern "C" fn rx_queue_release(dev: *mut rte_eth_dev, qid: u16) {
    lifecycle::release_rx(port(dev), qid);
}

pub unsafe extern "C" fn tx_queue_release(dev: *mut rte_eth_dev, qid: u16) {
    lifecycle::release_tx(port(dev), qid);
}

pub unsafe extern "C" fn rx_queue_start(dev: *mut rte_eth_dev, qid: u16) -> c_int {
    ret(dev, lifecycle::set_rx_running(port(dev), qid, true))
}

pub unsafe extern "C" fn rx_queue_stop(dev: *mut rte_eth_dev, qid: u16) -> c_int {
    ret(dev, lifecycle::set_rx_running(port(dev), qid, false))
}

pub unsafe extern "C" fn tx_queue_start(dev: *mut rte_eth_dev, qid: u16) -> c_int {
    ret(dev, lifecycle::set_tx_running(port(dev), qid, true))
}

pub unsafe extern "C" fn tx_queue_stop(dev: *mut rte_eth_dev, qid: u16) -> c_int {
    ret(dev, lifecycle::set_tx_running(port(dev), qid, false))
}

/// The port's queues inside one of its ethdev ops.
fn queues<'d>(dev: *mut rte_eth_dev) -> EthQueues<'d> {
    // SAFETY: called from our queue ops, inside which ethdev keeps the
    // queues and their arrays.
    unsafe { EthQueues::of(data(dev)) }
}

pub unsafe extern "C" fn rxq_info_get(
    dev: *mut rte_eth_dev,
    qid: u16,
    info: *mut ffi::rte_eth_rxq_info,
) {
    let Some(q) = queues(dev).get::<RxQueue>(usize::from(qid)) else {
        return;
    };
    // SAFETY: ethdev passes a zeroed out-struct.
    let info = unsafe { &mut *info };
    info.mp = q.conf.mp;
    info.conf = q.conf.conf;
    info.conf.offloads = q.offloads();
    info.nb_desc = q.conf.nb_desc;
    info.rx_buf_size = q.conf.buf_len.min(u32::from(u16::MAX)) as u16;
    info.scattered_rx = u8::from(q.conf.scattered());
    info.queue_state = data(dev).rx_queue_state[usize::from(qid)];
}

pub unsafe extern "C" fn txq_info_get(
    dev: *mut rte_eth_dev,
    qid: u16,
    info: *mut ffi::rte_eth_txq_info,
) {
    let Some(q) = queues(dev).get::<TxQueue>(usize::from(qid)) else {
        return;
    };
    // SAFETY: ethdev passes a zeroed out-struct.
    let info = unsafe { &mut *info };
    info.conf = q.conf.conf;
    info.conf.offloads = q.conf.offloads;
    info.nb_desc = q.conf.nb_desc;
    info.queue_state = data(dev).tx_queue_state[usize::from(qid)];
}

fn write_mode(mode: *mut ffi::rte_eth_burst_mode, text: &str) -> c_int {
    // SAFETY: ethdev passes a zeroed burst-mode struct with its info buffer.
    let info = unsafe { &mut (*mode).info };
    let max = info.len() - 1;
    for (dst, b) in info.iter_mut().zip(text.bytes().take(max)) {
        *dst = b as std::ffi::c_char;
    }
    0
}

pub unsafe extern "C" fn rx_burst_mode_get(
    dev: *mut rte_eth_dev,
    qid: u16,
    mode: *mut ffi::rte_eth_burst_mode,
) -> c_int {
    let q = queues(dev).get::<RxQueue>(usize::from(qid));
    write_mode(
        mode,
        match q.map(|q| (q.conf.scattered(), q.conf.path)) {
            Some((true, _)) => "Scalar scattered, WQEs of several buffers, chained mbufs",
            Some((false, RxPath::VectorAvx2)) => {
                "Vector AVX2, four CQEs per step, scalar for the rest, bulk refill"
            }
            _ => "Scalar, single and coalesced CQEs, bulk refill",
        },
    )
}

pub unsafe extern "C" fn tx_burst_mode_get(
    dev: *mut rte_eth_dev,
    qid: u16,
    mode: *mut ffi::rte_eth_burst_mode,
) -> c_int {
    let q = queues(dev).get::<TxQueue>(usize::from(qid));
    write_mode(
        mode,
        match q.map(|q| q.conf.path) {
            Some(TxPath::VectorAvx2) => {
                "Vector AVX2, four plain packets per step, scalar for the rest, \
                 CQE suppression, one doorbell per burst"
            }
            _ => "Scalar, CQE suppression, one doorbell per burst",
        },
    )
}

pub unsafe extern "C" fn rx_queue_intr_enable(dev: *mut rte_eth_dev, qid: u16) -> c_int {
    ret(dev, intr::arm_rx(port(dev), qid))
}

pub unsafe extern "C" fn rx_queue_intr_disable(dev: *mut rte_eth_dev, qid: u16) -> c_int {
    intr::take_rx_event(port(dev), qid)
}

pub unsafe extern "C" fn tx_done_cleanup(q: *mut c_void, free_cnt: u32) -> c_int {
    // SAFETY: ethdev passes one of our tx queues.
    unsafe { txq::tx_done_cleanup(q, free_cnt) }
}

/// `vlan_offload_set`: ethdev has updated `rxmode.offloads`; VLAN strip
/// follows it on every receive queue, at once, while the port runs.
pub unsafe extern "C" fn vlan_offload_set(dev: *mut rte_eth_dev, mask: c_int) -> c_int {
    if mask as u32 & ffi::RTE_ETH_VLAN_STRIP_MASK == 0 {
        return 0;
    }
    let on = data(dev).dev_conf.rxmode.offloads & RX_OFFLOAD_VLAN_STRIP != 0;
    ret(dev, lifecycle::set_vlan_strip(port(dev), None, on))
}

/// `vlan_strip_queue_set`: VLAN strip of one receive queue.
pub unsafe extern "C" fn vlan_strip_queue_set(dev: *mut rte_eth_dev, qid: u16, on: c_int) {
    ret(
        dev,
        lifecycle::set_vlan_strip(port(dev), Some(qid), on != 0),
    );
}
