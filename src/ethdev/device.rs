//! Device ops: configure, info, start, stop, close, link, modes, MAC, MTU,
//! firmware version, packet types.

use super::{data, port, ret};
use crate::control::lifecycle;
use crate::control::state::limits::{L2_OVERHEAD, MAX_MTU, MIN_DESC, MIN_MTU};
use crate::control::state::rss_conf::{RETA_SIZE, RSS_OFFLOADS};
use crate::control::state::shared::Shared;
use crate::dataplane::rxq;
use crate::ffi::consts::*;
use crate::ffi::{self, rte_eth_dev};
use crate::hw::mac::MacAddr;
use ::log::{error, warn};
use std::ffi::c_int;
use std::ptr;

/// RX offloads the device implements.
pub const RX_OFFLOADS: u64 =
    RX_OFFLOAD_CHECKSUM | RX_OFFLOAD_RSS_HASH | RX_OFFLOAD_VLAN_STRIP | RX_OFFLOAD_SCATTER;
/// TX offloads the device implements.
pub const TX_OFFLOADS: u64 = TX_OFFLOAD_MULTI_SEGS
    | TX_OFFLOAD_IPV4_CKSUM
    | TX_OFFLOAD_TCP_CKSUM
    | TX_OFFLOAD_UDP_CKSUM
    | TX_OFFLOAD_VLAN_INSERT
    | TX_OFFLOAD_TCP_TSO
    | TX_OFFLOAD_MBUF_FAST_FREE;

pub unsafe extern "C" fn configure(dev: *mut rte_eth_dev) -> c_int {
    ret(dev, lifecycle::configure(port(dev)))
}

pub unsafe extern "C" fn start(dev: *mut rte_eth_dev) -> c_int {
    ret(dev, lifecycle::start(port(dev)))
}

pub unsafe extern "C" fn stop(dev: *mut rte_eth_dev) -> c_int {
    lifecycle::stop(port(dev));
    0
}

pub unsafe extern "C" fn close(dev: *mut rte_eth_dev) -> c_int {
    lifecycle::close(port(dev));
    // SAFETY: our ethdev, closed; ethdev releases it after this returns.
    unsafe { crate::control::plug::free_private(dev) };
    0
}

pub unsafe extern "C" fn secondary_close(dev: *mut rte_eth_dev) -> c_int {
    crate::control::mp::detach_secondary(data(dev).port_id);
    0
}

pub unsafe extern "C" fn infos_get(
    dev: *mut rte_eth_dev,
    info: *mut ffi::rte_eth_dev_info,
) -> c_int {
    // SAFETY: ethdev passes a zeroed info struct.
    let info = unsafe { &mut *info };
    let lim = Shared::of(data(dev)).limits;
    let max_desc = lim.max_desc;
    info.min_mtu = MIN_MTU;
    info.max_mtu = MAX_MTU;
    info.min_rx_bufsize = 1024;
    info.max_rx_pktlen = u32::from(MAX_MTU) + L2_OVERHEAD;
    info.max_rx_queues = lim.max_queues.min(RETA_SIZE as u16);
    info.max_tx_queues = lim.max_queues;
    info.max_mac_addrs = 1;
    info.max_vfs = 0;
    info.rx_offload_capa = RX_OFFLOADS;
    info.tx_offload_capa = TX_OFFLOADS;
    info.reta_size = RETA_SIZE as u16;
    info.hash_key_size = 40;
    info.flow_type_rss_offloads = RSS_OFFLOADS;
    info.default_rxconf.rx_free_thresh = 32;
    info.default_rxconf.rx_drop_en = 1;
    info.default_txconf.tx_free_thresh = 32;
    info.rx_desc_lim = ffi::rte_eth_desc_lim {
        nb_max: max_desc,
        nb_min: MIN_DESC,
        nb_align: MIN_DESC,
        // A receive WQE's buffers (scattered Rx).
        nb_seg_max: crate::control::scatter::max_sges(lim.max_send_sge) as u16,
        nb_mtu_seg_max: crate::control::scatter::max_sges(lim.max_send_sge) as u16,
    };
    info.tx_desc_lim = ffi::rte_eth_desc_lim {
        nb_max: max_desc,
        nb_min: MIN_DESC,
        nb_align: MIN_DESC,
        nb_seg_max: lim.max_send_sge,
        nb_mtu_seg_max: lim.max_send_sge,
    };
    info.speed_capa = LINK_SPEED_100G;
    info.default_rxportconf.burst_size = 32;
    info.default_rxportconf.ring_size = 256.min(max_desc);
    info.default_rxportconf.nb_queues = 1;
    info.default_txportconf = info.default_rxportconf;
    info.err_handle_mode = crate::control::reset::ERR_HANDLE_MODE;
    0
}

pub unsafe extern "C" fn link_update(dev: *mut rte_eth_dev, _wait: c_int) -> c_int {
    lifecycle::publish_link(port(dev))
}

/// The primary keeps the shared link status current; a secondary reads it
/// as it is.
pub unsafe extern "C" fn secondary_link_update(_dev: *mut rte_eth_dev, _wait: c_int) -> c_int {
    0
}

pub unsafe extern "C" fn promiscuous_enable(dev: *mut rte_eth_dev) -> c_int {
    warn!(
        "{}: promiscuous mode is not available: Azure delivers only frames addressed to the port's MAC",
        port(dev).name
    );
    -libc::ENOTSUP
}

pub unsafe extern "C" fn allmulticast_enable(dev: *mut rte_eth_dev) -> c_int {
    warn!(
        "{}: all-multicast mode is not available: Azure virtual networks carry no multicast",
        port(dev).name
    );
    -libc::ENOTSUP
}

/// Disabling a mode the device never enters succeeds.
pub unsafe extern "C" fn mode_disable(_dev: *mut rte_eth_dev) -> c_int {
    0
}

/// Azure assigns each port its MAC; setting that same MAC (as bonding and
/// failsafe do) succeeds, any other is refused.
pub unsafe extern "C" fn mac_addr_set(
    dev: *mut rte_eth_dev,
    mac: *mut ffi::rte_ether_addr,
) -> c_int {
    // SAFETY: ethdev passes a valid address; mac_addrs holds the port's.
    let (want, have) = unsafe { ((*mac).addr_bytes, (*data(dev).mac_addrs).addr_bytes) };
    if want == have {
        return 0;
    }
    error!(
        "{}: cannot change the MAC to {}: Azure fixes each port's MAC ({})",
        port(dev).name,
        MacAddr(want),
        MacAddr(have)
    );
    -libc::ENOTSUP
}

pub unsafe extern "C" fn mtu_set(dev: *mut rte_eth_dev, mtu: u16) -> c_int {
    ret(dev, lifecycle::set_mtu(port(dev), mtu))
}

pub unsafe extern "C" fn fw_version_get(
    dev: *mut rte_eth_dev,
    out: *mut std::ffi::c_char,
    size: usize,
) -> c_int {
    let text = Shared::of(data(dev)).fw_version();
    let needed = text.len() + 1;
    if size < needed {
        return needed as c_int;
    }
    // SAFETY: `out` has `size >= needed` bytes.
    unsafe {
        ptr::copy_nonoverlapping(text.as_ptr(), out as *mut u8, text.len());
        *out.add(text.len()) = 0;
    }
    0
}

/// The packet types the RX path reports, without the terminator (which
/// follows them in `PTYPES`, for releases before 24.03).
pub fn supported_ptypes(_dev: *mut rte_eth_dev) -> &'static [u32] {
    let n = rxq::PTYPES
        .iter()
        .position(|&p| p == ffi::RTE_PTYPE_UNKNOWN)
        .unwrap_or(rxq::PTYPES.len());
    &rxq::PTYPES[..n]
}
