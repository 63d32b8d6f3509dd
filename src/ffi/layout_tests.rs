//! Checks that bindgen's (clang's) view of the structs the driver relies on
//! agrees with the C compiler that builds DPDK applications (`layout.c`).

use super::mbuf;
use super::sys::*;
use core::mem::{offset_of, size_of, MaybeUninit};
use std::ffi::CStr;

/// The offset of the field an `mbuf::*_ptr` accessor points to.
fn mbuf_offset<T>(field: unsafe fn(*mut rte_mbuf) -> *mut T) -> usize {
    let mut m = MaybeUninit::<rte_mbuf>::uninit();
    let base = m.as_mut_ptr();
    // SAFETY: `base` spans a whole rte_mbuf; the accessor only computes an
    // address inside it.
    let f = unsafe { field(base) };
    f as usize - base as usize
}

fn rust_layout(name: &str) -> Option<usize> {
    macro_rules! table {
        ($($key:literal => $val:expr,)*) => {
            match name { $($key => Some($val),)* _ => None }
        };
    }
    table! {
        "sizeof(struct eth_dev_ops)" => size_of::<eth_dev_ops>(),
        "struct eth_dev_ops.dev_configure" => offset_of!(eth_dev_ops, dev_configure),
        "struct eth_dev_ops.dev_infos_get" => offset_of!(eth_dev_ops, dev_infos_get),
        "struct eth_dev_ops.rx_queue_setup" => offset_of!(eth_dev_ops, rx_queue_setup),
        "struct eth_dev_ops.rss_hash_update" => offset_of!(eth_dev_ops, rss_hash_update),
        "struct eth_dev_ops.reta_update" => offset_of!(eth_dev_ops, reta_update),
        "struct eth_dev_ops.cman_config_get" => offset_of!(eth_dev_ops, cman_config_get),
        "sizeof(struct rte_eth_dev)" => size_of::<rte_eth_dev>(),
        "struct rte_eth_dev.rx_pkt_burst" => offset_of!(rte_eth_dev, rx_pkt_burst),
        "struct rte_eth_dev.tx_pkt_prepare" => offset_of!(rte_eth_dev, tx_pkt_prepare),
        "struct rte_eth_dev.data" => offset_of!(rte_eth_dev, data),
        "struct rte_eth_dev.process_private" => offset_of!(rte_eth_dev, process_private),
        "struct rte_eth_dev.dev_ops" => offset_of!(rte_eth_dev, dev_ops),
        "struct rte_eth_dev.device" => offset_of!(rte_eth_dev, device),
        "struct rte_eth_dev.intr_handle" => offset_of!(rte_eth_dev, intr_handle),
        "struct rte_eth_dev.state" => offset_of!(rte_eth_dev, state),
        "sizeof(struct rte_eth_dev_data)" => size_of::<rte_eth_dev_data>(),
        "struct rte_eth_dev_data.rx_queues" => offset_of!(rte_eth_dev_data, rx_queues),
        "struct rte_eth_dev_data.tx_queues" => offset_of!(rte_eth_dev_data, tx_queues),
        "struct rte_eth_dev_data.nb_rx_queues" => offset_of!(rte_eth_dev_data, nb_rx_queues),
        "struct rte_eth_dev_data.dev_private" => offset_of!(rte_eth_dev_data, dev_private),
        "struct rte_eth_dev_data.dev_link" => offset_of!(rte_eth_dev_data, dev_link),
        "struct rte_eth_dev_data.dev_conf" => offset_of!(rte_eth_dev_data, dev_conf),
        "struct rte_eth_dev_data.mtu" => offset_of!(rte_eth_dev_data, mtu),
        "struct rte_eth_dev_data.mac_addrs" => offset_of!(rte_eth_dev_data, mac_addrs),
        "struct rte_eth_dev_data.port_id" => offset_of!(rte_eth_dev_data, port_id),
        "struct rte_eth_dev_data.dev_flags" => offset_of!(rte_eth_dev_data, dev_flags),
        "struct rte_eth_dev_data.rx_queue_state" => offset_of!(rte_eth_dev_data, rx_queue_state),
        "struct rte_eth_dev_data.owner" => offset_of!(rte_eth_dev_data, owner),
        "sizeof(struct rte_mbuf)" => size_of::<rte_mbuf>(),
        "struct rte_mbuf.buf_addr" => offset_of!(rte_mbuf, buf_addr),
        // The fields whose bindgen path differs between releases: through
        // the accessor module, so its paths are what is checked.
        "struct rte_mbuf.data_off" => mbuf_offset(mbuf::data_off_ptr),
        "struct rte_mbuf.refcnt" => mbuf_offset(mbuf::refcnt_ptr),
        "struct rte_mbuf.nb_segs" => mbuf_offset(mbuf::nb_segs_ptr),
        "struct rte_mbuf.port" => mbuf_offset(mbuf::port_ptr),
        "struct rte_mbuf.ol_flags" => offset_of!(rte_mbuf, ol_flags),
        "struct rte_mbuf.packet_type" => mbuf_offset(mbuf::packet_type_ptr),
        "struct rte_mbuf.pkt_len" => mbuf_offset(mbuf::pkt_len_ptr),
        "struct rte_mbuf.buf_len" => mbuf_offset(mbuf::buf_len_ptr),
        "struct rte_mbuf.data_len" => mbuf_offset(mbuf::data_len_ptr),
        "struct rte_mbuf.vlan_tci" => mbuf_offset(mbuf::vlan_tci_ptr),
        "struct rte_mbuf.hash.rss" => mbuf_offset(mbuf::rss_hash_ptr),
        "struct rte_mbuf.pool" => offset_of!(rte_mbuf, pool),
        "struct rte_mbuf.next" => offset_of!(rte_mbuf, next),
        "struct rte_mbuf.tx_offload" => mbuf_offset(mbuf::tx_offload_ptr),
        "sizeof(struct rte_eth_link)" => size_of::<rte_eth_link>(),
        "sizeof(struct rte_eth_stats)" => size_of::<rte_eth_stats>(),
        "sizeof(struct rte_mempool)" => size_of::<rte_mempool>(),
        "struct rte_mempool.cache_size" => offset_of!(rte_mempool, cache_size),
        "struct rte_mempool.local_cache" => offset_of!(rte_mempool, local_cache),
        "sizeof(struct rte_pci_driver)" => size_of::<rte_pci_driver>(),
        "struct rte_pci_driver.driver" => offset_of!(rte_pci_driver, driver),
        "struct rte_pci_driver.probe" => offset_of!(rte_pci_driver, probe),
        "struct rte_pci_driver.id_table" => offset_of!(rte_pci_driver, id_table),
        "struct rte_pci_driver.drv_flags" => offset_of!(rte_pci_driver, drv_flags),
        "sizeof(struct rte_pci_device)" => size_of::<rte_pci_device>(),
        "struct rte_pci_device.addr" => offset_of!(rte_pci_device, addr),
        "struct rte_pci_device.id" => offset_of!(rte_pci_device, id),
        "sizeof(struct rte_eth_dev_info)" => size_of::<rte_eth_dev_info>(),
        "struct rte_eth_dev_info.err_handle_mode" => offset_of!(rte_eth_dev_info, err_handle_mode),
        "sizeof(struct ibv_context)" => size_of::<ibv_context>(),
        "struct ibv_context.async_fd" => offset_of!(ibv_context, async_fd),
        "sizeof(struct ibv_device_attr_ex)" => size_of::<ibv_device_attr_ex>(),
        "struct ibv_device_attr_ex.raw_packet_caps" => offset_of!(ibv_device_attr_ex, raw_packet_caps),
        "sizeof(struct ibv_qp_init_attr_ex)" => size_of::<ibv_qp_init_attr_ex>(),
        "sizeof(struct manadv_obj)" => size_of::<manadv_obj>(),
        "sizeof(struct manadv_qp)" => size_of::<manadv_qp>(),
        "sizeof(struct manadv_rwq)" => size_of::<manadv_rwq>(),
    }
}

#[test]
fn bindgen_layouts_match_the_c_compiler() {
    // SAFETY: layout.c defines a static array of `mana_c_layout_len` rows.
    let rows = unsafe { std::slice::from_raw_parts(mana_c_layout.as_ptr(), mana_c_layout_len) };
    assert!(rows.len() > 60, "layout table unexpectedly short");
    let mut mismatches = Vec::new();
    for row in rows {
        // SAFETY: every name is a string literal in layout.c.
        let name = unsafe { CStr::from_ptr(row.name) }.to_str().unwrap();
        let rust = rust_layout(name).unwrap_or_else(|| panic!("no Rust check for {name}"));
        if rust != row.value {
            mismatches.push(format!("{name}: C {} vs Rust {rust}", row.value));
        }
    }
    assert!(mismatches.is_empty(), "layout mismatches: {mismatches:#?}");
}

/// Function pointers in `struct eth_dev_ops`, per DPDK release series:
/// members are only ever added (none removed), some in the middle, and the
/// driver fills the table by name. A release not listed here must be added
/// after checking what its new members are.
const ETH_DEV_OPS_MEMBERS: &[(&str, usize)] = &[
    ("22.11", 113), // dpdk-mana-pmd.md, Appendix A
    ("23.11", 116), // + recycle_rxq_info_get, ...
    ("24.11", 121), // + speed_lanes_*, get_restore_flags, ...
    ("25.11", 124), // + xstats_enable, ...
    ("26.07", 125),
];

#[test]
fn eth_dev_ops_has_the_member_count_of_this_release() {
    let version = env!("NET_MANA_DPDK_VERSION");
    let series: String = version.split('.').take(2).collect::<Vec<_>>().join(".");
    let Some(&(_, members)) = ETH_DEV_OPS_MEMBERS.iter().find(|(s, _)| *s == series) else {
        panic!(
            "DPDK {version} is not in ETH_DEV_OPS_MEMBERS (tested: {:?}); check its eth_dev_ops \
             for members the driver should fill, then add it",
            ETH_DEV_OPS_MEMBERS.iter().map(|e| e.0).collect::<Vec<_>>()
        );
    };
    assert_eq!(size_of::<eth_dev_ops>(), members * size_of::<usize>());
}
