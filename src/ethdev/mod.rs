//! The `eth_dev_ops` of a MANA port: thin functions that take DPDK's
//! arguments apart, call the control layer, and turn its result into what
//! DPDK expects (the error logged once, with the port's name). Grouped:
//! the device, its queues, statistics, RSS.

mod device;
mod queues;
mod rss;
mod stats;

use crate::control::error;
use crate::control::port::Port;
use crate::ffi::{self, compat, rte_eth_dev};
use std::ffi::c_int;

/// The port's ethdev data (inside one of its ops).
fn data<'a>(dev: *mut rte_eth_dev) -> &'a ffi::rte_eth_dev_data {
    // SAFETY: ops are called with a live ethdev whose data outlives the call.
    unsafe { &*(*dev).data }
}

/// The primary's port behind an ethdev (inside one of its primary ops).
fn port<'a>(dev: *mut rte_eth_dev) -> &'a Port {
    // SAFETY: the primary ops table is installed only on ethdevs created by
    // `plug::create`, whose process_private is their Port.
    unsafe { Port::of(dev) }
}

/// `0`, or the error logged for the port and its `-errno`.
fn ret(dev: *mut rte_eth_dev, r: error::Result<()>) -> c_int {
    error::ret(&port(dev).name, r)
}

/// What a secondary process may do: the data path, and reading the port
/// (from ethdev's shared data and the port's shared block).
pub static SECONDARY_OPS: ffi::eth_dev_ops = {
    // SAFETY: every member is an Option of a function pointer; zero is None.
    let mut o: ffi::eth_dev_ops = unsafe { std::mem::zeroed() };
    o.dev_close = Some(device::secondary_close);
    o.link_update = Some(device::secondary_link_update);
    o.dev_infos_get = Some(device::infos_get);
    o.fw_version_get = Some(device::fw_version_get);
    o.dev_supported_ptypes_get = compat::ptypes_get_op!(device::supported_ptypes);
    o.stats_get = compat::stats_get_op!(stats::stats_get);
    o.stats_reset = Some(stats::stats_reset);
    o.xstats_get = Some(stats::xstats_get);
    o.xstats_get_names = Some(stats::xstats_get_names);
    o.xstats_reset = Some(stats::stats_reset);
    o.rxq_info_get = Some(queues::rxq_info_get);
    o.txq_info_get = Some(queues::txq_info_get);
    o.rx_burst_mode_get = Some(queues::rx_burst_mode_get);
    o.tx_burst_mode_get = Some(queues::tx_burst_mode_get);
    o.tx_done_cleanup = Some(queues::tx_done_cleanup);
    o.rss_hash_conf_get = Some(rss::hash_conf_get);
    o.reta_query = Some(rss::reta_query);
    o
};

/// The primary's ops.
pub static OPS: ffi::eth_dev_ops = {
    // SAFETY: every member is an Option of a function pointer; zero is None.
    let mut o: ffi::eth_dev_ops = unsafe { std::mem::zeroed() };
    o.dev_configure = Some(device::configure);
    o.dev_start = Some(device::start);
    o.dev_stop = Some(device::stop);
    o.dev_close = Some(device::close);
    o.link_update = Some(device::link_update);
    o.promiscuous_enable = Some(device::promiscuous_enable);
    o.promiscuous_disable = Some(device::mode_disable);
    o.allmulticast_enable = Some(device::allmulticast_enable);
    o.allmulticast_disable = Some(device::mode_disable);
    o.mac_addr_set = Some(device::mac_addr_set);
    o.mtu_set = Some(device::mtu_set);
    o.dev_infos_get = Some(device::infos_get);
    o.fw_version_get = Some(device::fw_version_get);
    o.dev_supported_ptypes_get = compat::ptypes_get_op!(device::supported_ptypes);
    o.stats_get = compat::stats_get_op!(stats::stats_get);
    o.stats_reset = Some(stats::stats_reset);
    o.xstats_get = Some(stats::xstats_get);
    o.xstats_get_names = Some(stats::xstats_get_names);
    o.xstats_reset = Some(stats::stats_reset);
    o.rx_queue_setup = Some(queues::rx_queue_setup);
    o.rx_queue_release = Some(queues::rx_queue_release);
    o.tx_queue_setup = Some(queues::tx_queue_setup);
    o.tx_queue_release = Some(queues::tx_queue_release);
    o.rx_queue_start = Some(queues::rx_queue_start);
    o.rx_queue_stop = Some(queues::rx_queue_stop);
    o.tx_queue_start = Some(queues::tx_queue_start);
    o.tx_queue_stop = Some(queues::tx_queue_stop);
    o.rxq_info_get = Some(queues::rxq_info_get);
    o.txq_info_get = Some(queues::txq_info_get);
    o.rx_burst_mode_get = Some(queues::rx_burst_mode_get);
    o.tx_burst_mode_get = Some(queues::tx_burst_mode_get);
    o.rx_queue_intr_enable = Some(queues::rx_queue_intr_enable);
    o.rx_queue_intr_disable = Some(queues::rx_queue_intr_disable);
    o.tx_done_cleanup = Some(queues::tx_done_cleanup);
    o.vlan_offload_set = Some(queues::vlan_offload_set);
    o.vlan_strip_queue_set = Some(queues::vlan_strip_queue_set);
    o.rss_hash_update = Some(rss::hash_update);
    o.rss_hash_conf_get = Some(rss::hash_conf_get);
    o.reta_update = Some(rss::reta_update);
    o.reta_query = Some(rss::reta_query);
    o
};
