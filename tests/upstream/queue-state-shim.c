/* SPDX-License-Identifier: BSD-3-Clause
 *
 * testpmd compatibility shim for the upstream DPDK 22.11.x net/mana driver.
 *
 * DPDK 22.11.11's drivers/net/mana never sets dev->data->{rx,tx}_queue_state
 * (upstream added that in 23.11, commit 319855c93e "net/mana: set queue
 * state"). testpmd 22.11.11 reads the state through
 * rte_eth_{rx,tx}_queue_info_get() after dev_start and disables every
 * forwarding stream whose queue reports RTE_ETH_QUEUE_STATE_STOPPED, so the
 * unmodified 22.11.11 C driver forwards nothing under testpmd - on real
 * hardware as much as on the emulator. This LD_PRELOAD shim (ours, not
 * driver code) reports "started" for queues of net_mana ports, which is what
 * the driver means: it has no per-queue start/stop.
 *
 * It is only used by the upstream C driver tests; the Rust PMD must set the
 * queue states itself.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include <rte_ethdev.h>

typedef int (*qinfo_fn)(uint16_t, uint16_t, void *);

static int is_mana(uint16_t port)
{
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(port, &info) != 0 || info.driver_name == NULL)
		return 0;
	return strcmp(info.driver_name, "net_mana") == 0;
}

int rte_eth_rx_queue_info_get(uint16_t port_id, uint16_t queue_id,
			      struct rte_eth_rxq_info *qinfo)
{
	static qinfo_fn real;
	int ret;

	if (!real)
		real = (qinfo_fn)dlsym(RTLD_NEXT, "rte_eth_rx_queue_info_get");
	ret = real(port_id, queue_id, qinfo);
	if (ret == 0 && qinfo->queue_state == RTE_ETH_QUEUE_STATE_STOPPED &&
	    is_mana(port_id))
		qinfo->queue_state = RTE_ETH_QUEUE_STATE_STARTED;
	return ret;
}

int rte_eth_tx_queue_info_get(uint16_t port_id, uint16_t queue_id,
			      struct rte_eth_txq_info *qinfo)
{
	static qinfo_fn real;
	int ret;

	if (!real)
		real = (qinfo_fn)dlsym(RTLD_NEXT, "rte_eth_tx_queue_info_get");
	ret = real(port_id, queue_id, qinfo);
	if (ret == 0 && qinfo->queue_state == RTE_ETH_QUEUE_STATE_STOPPED &&
	    is_mana(port_id))
		qinfo->queue_state = RTE_ETH_QUEUE_STATE_STARTED;
	return ret;
}
