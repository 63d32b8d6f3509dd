/* SPDX-License-Identifier: BSD-3-Clause
 *
 * A DPDK application with net_mana linked in statically (no -d): it finds
 * the MANA port, sends frames addressed to itself and counts what comes
 * back. On the emulated adapter with a loopback port, every frame sent is
 * received. Prints "app: driver <name>" and "app: sent <n> received <m>".
 */
#include <stdio.h>
#include <string.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_cycles.h>
#include <rte_pmd_mana.h>

#define FRAMES 32

static int run(void)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info info;
	struct rte_ether_addr mac;
	struct rte_mempool *pool;
	struct rte_mbuf *pkts[FRAMES];
	unsigned int sent = 0, received = 0;
	uint16_t port = 0;
	int i, ret;

	if (rte_eth_dev_count_avail() != 1) {
		printf("app: %u ports, expected 1\n", rte_eth_dev_count_avail());
		return 1;
	}
	RTE_ETH_FOREACH_DEV(port)
		break;
	ret = rte_eth_dev_info_get(port, &info);
	if (ret != 0)
		return 1;
	printf("app: driver %s\n", info.driver_name);
	if (strcmp(info.driver_name, RTE_PMD_MANA_DRIVER_NAME) != 0)
		return 1;

	pool = rte_pktmbuf_pool_create("app_pool", 2047, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
				       rte_socket_id());
	memset(&conf, 0, sizeof(conf));
	if (pool == NULL || rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
	    rte_eth_rx_queue_setup(port, 0, 256, rte_socket_id(), NULL, pool) != 0 ||
	    rte_eth_tx_queue_setup(port, 0, 256, rte_socket_id(), NULL) != 0 ||
	    rte_eth_dev_start(port) != 0 || rte_eth_macaddr_get(port, &mac) != 0) {
		printf("app: port setup failed\n");
		return 1;
	}

	/* IPv4/UDP frames to our own MAC, 60 bytes. */
	for (i = 0; i < FRAMES; i++) {
		uint8_t *p;

		pkts[i] = rte_pktmbuf_alloc(pool);
		if (pkts[i] == NULL)
			return 1;
		p = (uint8_t *)rte_pktmbuf_append(pkts[i], 60);
		memset(p, 0, 60);
		memcpy(p, mac.addr_bytes, 6);
		memcpy(p + 6, mac.addr_bytes, 6);
		p[12] = 0x08;
		p[14] = 0x45;
		p[17] = 46; /* total length */
		p[22] = 64; /* TTL */
		p[23] = 17; /* UDP */
		p[26] = 10; p[29] = (uint8_t)i;
		p[30] = 10; p[33] = 1;
		p[35] = 9; p[37] = 9; p[39] = 26;
	}
	while (sent < FRAMES)
		sent += rte_eth_tx_burst(port, 0, pkts + sent, FRAMES - sent);

	for (i = 0; i < 2000 && received < FRAMES; i++) {
		struct rte_mbuf *rx[FRAMES];
		uint16_t n = rte_eth_rx_burst(port, 0, rx, FRAMES);

		received += n;
		rte_pktmbuf_free_bulk(rx, n);
		if (n == 0)
			rte_delay_ms(1);
		/* Completions of what was sent are reaped by later bursts. */
		rte_eth_tx_burst(port, 0, NULL, 0);
	}
	printf("app: sent %u received %u\n", sent, received);
	rte_eth_dev_stop(port);
	rte_eth_dev_close(port);
	return received == FRAMES ? 0 : 1;
}

int main(int argc, char **argv)
{
	int ret;

	if (rte_eal_init(argc, argv) < 0) {
		printf("app: EAL init failed\n");
		return 1;
	}
	ret = run();
	rte_eal_cleanup();
	return ret;
}
