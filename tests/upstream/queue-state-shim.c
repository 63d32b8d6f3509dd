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
 * DPDK 22.11.11's drivers/net/netvsc has the same gap (netvsc sets its
 * queue states from 26.07 on, in hn_dev_start); the netvsc tests name it in
 * QSTATE_SHIM_DRIVERS.
 *
 * QSTATE_SHIM_DRIVERS: the comma-separated driver names whose queues are
 * reported started (default "net_mana"). Used by the upstream C driver tests
 * and the netvsc tests; the Rust PMD must set the queue states itself.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include <rte_ethdev.h>
#include <ethdev_driver.h>

typedef int (*qinfo_fn)(uint16_t, uint16_t, void *);

#include <stdlib.h>

/* The driver's name from the port's device, not from rte_eth_dev_info_get():
 * netvsc answers that with an RNDIS query, which cannot complete when the
 * caller is netvsc itself handling a VF association inside its receive
 * path (hn_vf_add -> hn_setup_vf_queues -> rte_eth_tx_queue_info_get). */
static int is_mana(uint16_t port)
{
	const struct rte_device *dev;
	const struct rte_driver *drv;
	const char *names = getenv("QSTATE_SHIM_DRIVERS");
	const char *name;
	size_t len;

	if (port >= RTE_MAX_ETHPORTS)
		return 0;
	dev = rte_eth_devices[port].device;
	drv = dev != NULL ? rte_dev_driver(dev) : NULL;
	name = drv != NULL ? rte_driver_name(drv) : NULL;
	if (name == NULL)
		return 0;
	if (names == NULL)
		names = "net_mana";
	len = strlen(name);
	while (*names) {
		if (strncmp(names, name, len) == 0 &&
		    (names[len] == ',' || names[len] == '\0'))
			return 1;
		names = strchr(names, ',');
		if (names == NULL)
			break;
		names++;
	}
	return 0;
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
