/* The C compiler's view of the layouts the driver relies on; the Rust test
 * `ffi::layout_tests` compares bindgen's structs against this table. */
#include <stddef.h>
#include <rte_config.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <ethdev_driver.h>
#include <bus_pci_driver.h>
#include <infiniband/verbs.h>
#include <infiniband/manadv.h>
#include "shim.h"

#define SZ(t) { "sizeof(" #t ")", sizeof(t) }
#define OFF(t, f) { #t "." #f, offsetof(t, f) }

const struct mana_layout_entry mana_c_layout[] = {
	SZ(struct eth_dev_ops),
	OFF(struct eth_dev_ops, dev_configure),
	OFF(struct eth_dev_ops, dev_infos_get),
	OFF(struct eth_dev_ops, rx_queue_setup),
	OFF(struct eth_dev_ops, rss_hash_update),
	OFF(struct eth_dev_ops, reta_update),
	OFF(struct eth_dev_ops, cman_config_get),
	SZ(struct rte_eth_dev),
	OFF(struct rte_eth_dev, rx_pkt_burst),
	OFF(struct rte_eth_dev, tx_pkt_prepare),
	OFF(struct rte_eth_dev, data),
	OFF(struct rte_eth_dev, process_private),
	OFF(struct rte_eth_dev, dev_ops),
	OFF(struct rte_eth_dev, device),
	OFF(struct rte_eth_dev, intr_handle),
	OFF(struct rte_eth_dev, state),
	SZ(struct rte_eth_dev_data),
	OFF(struct rte_eth_dev_data, rx_queues),
	OFF(struct rte_eth_dev_data, tx_queues),
	OFF(struct rte_eth_dev_data, nb_rx_queues),
	OFF(struct rte_eth_dev_data, dev_private),
	OFF(struct rte_eth_dev_data, dev_link),
	OFF(struct rte_eth_dev_data, dev_conf),
	OFF(struct rte_eth_dev_data, mtu),
	OFF(struct rte_eth_dev_data, mac_addrs),
	OFF(struct rte_eth_dev_data, port_id),
	OFF(struct rte_eth_dev_data, dev_flags),
	OFF(struct rte_eth_dev_data, rx_queue_state),
	OFF(struct rte_eth_dev_data, owner),
	SZ(struct rte_mbuf),
	OFF(struct rte_mbuf, buf_addr),
	OFF(struct rte_mbuf, data_off),
	OFF(struct rte_mbuf, refcnt),
	OFF(struct rte_mbuf, nb_segs),
	OFF(struct rte_mbuf, port),
	OFF(struct rte_mbuf, ol_flags),
	OFF(struct rte_mbuf, packet_type),
	OFF(struct rte_mbuf, pkt_len),
	OFF(struct rte_mbuf, buf_len),
	OFF(struct rte_mbuf, data_len),
	OFF(struct rte_mbuf, vlan_tci),
	OFF(struct rte_mbuf, hash.rss),
	OFF(struct rte_mbuf, pool),
	OFF(struct rte_mbuf, next),
	OFF(struct rte_mbuf, tx_offload),
	SZ(struct rte_eth_link),
	SZ(struct rte_eth_stats),
	SZ(struct rte_mempool),
	OFF(struct rte_mempool, cache_size),
	OFF(struct rte_mempool, local_cache),
	SZ(struct rte_pci_driver),
	OFF(struct rte_pci_driver, driver),
	OFF(struct rte_pci_driver, probe),
	OFF(struct rte_pci_driver, id_table),
	OFF(struct rte_pci_driver, drv_flags),
	SZ(struct rte_pci_device),
	OFF(struct rte_pci_device, addr),
	OFF(struct rte_pci_device, id),
	SZ(struct rte_eth_dev_info),
	OFF(struct rte_eth_dev_info, err_handle_mode),
	SZ(struct ibv_context),
	OFF(struct ibv_context, async_fd),
	SZ(struct ibv_device_attr_ex),
	OFF(struct ibv_device_attr_ex, raw_packet_caps),
	SZ(struct ibv_qp_init_attr_ex),
	SZ(struct manadv_obj),
	SZ(struct manadv_qp),
	SZ(struct manadv_rwq),
};

const size_t mana_c_layout_len = sizeof(mana_c_layout) / sizeof(mana_c_layout[0]);
