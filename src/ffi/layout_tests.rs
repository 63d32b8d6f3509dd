//! Checks that bindgen's (clang's) view of the structs the driver relies on
//! agrees with the C compiler that builds DPDK applications (`layout.c`).

use super::sys::*;
use core::mem::{offset_of, size_of};
use std::ffi::CStr;

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
        "struct rte_mbuf.data_off" => offset_of!(rte_mbuf, data_off),
        "struct rte_mbuf.refcnt" => offset_of!(rte_mbuf, refcnt),
        "struct rte_mbuf.nb_segs" => offset_of!(rte_mbuf, nb_segs),
        "struct rte_mbuf.port" => offset_of!(rte_mbuf, port),
        "struct rte_mbuf.ol_flags" => offset_of!(rte_mbuf, ol_flags),
        "struct rte_mbuf.packet_type" => offset_of!(rte_mbuf, __bindgen_anon_1),
        "struct rte_mbuf.pkt_len" => offset_of!(rte_mbuf, pkt_len),
        "struct rte_mbuf.data_len" => offset_of!(rte_mbuf, data_len),
        "struct rte_mbuf.vlan_tci" => offset_of!(rte_mbuf, vlan_tci),
        "struct rte_mbuf.hash" => offset_of!(rte_mbuf, __bindgen_anon_2),
        "struct rte_mbuf.pool" => offset_of!(rte_mbuf, pool),
        "struct rte_mbuf.next" => offset_of!(rte_mbuf, next),
        "struct rte_mbuf.tx_offload" => offset_of!(rte_mbuf, __bindgen_anon_3),
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

#[test]
fn eth_dev_ops_has_the_22_11_member_count() {
    // 113 function pointers in DPDK 22.11 (dpdk-mana-pmd.md, Appendix A).
    assert_eq!(size_of::<eth_dev_ops>(), 113 * 8);
}
