/* SPDX-License-Identifier: BSD-3-Clause
 *
 * An l3fwd-power style receive loop on a net_mana port with
 * intr_conf.rxq: the lcore sleeps in rte_epoll_wait() on the queue's
 * interrupt until a packet arrives, then polls. The port's backend is a
 * loopback, so what the program sends comes back to it. Built and run by
 * tests/rx_intr.rs.
 *
 *   rx_intr <rounds> <reset_after_round> <EAL args...>
 *
 * Each round: arm the queue, check that an idle queue does not wake the
 * sleeper (100 ms), send a burst, sleep until woken (at most 5 s), disarm,
 * receive the burst. After round <reset_after_round> (0: never) the
 * device is reset and the loop waits for RECOVERY_SUCCESS: the epoll
 * registration made once at start must keep working. Output lines:
 *   ROUND <r> IDLE_WAKEUPS <n> WAKEUPS <n> SENT <n> GOT <n>
 *   RECOVERED
 *   IN_USE <n>
 *   DONE
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_mbuf.h>

#include "emu_fault.h"

#define BURST 32

static _Atomic int recovered;
/* What the queue-status calls said inside the ERR_RECOVERING callback, when
 * the queues are closed but not yet torn down. */
static _Atomic int count_recovering = -1, rx_desc_recovering = -1, tx_desc_recovering = -1;

static int on_event(uint16_t port_id, enum rte_eth_event_type type, void *arg, void *ret)
{
	(void)arg, (void)ret;
	if (type == RTE_ETH_EVENT_ERR_RECOVERING) {
		atomic_store(&count_recovering, rte_eth_rx_queue_count(port_id, 0));
		atomic_store(&rx_desc_recovering, rte_eth_rx_descriptor_status(port_id, 0, 0));
		atomic_store(&tx_desc_recovering, rte_eth_tx_descriptor_status(port_id, 0, 0));
	}
	if (type == RTE_ETH_EVENT_RECOVERY_SUCCESS)
		atomic_fetch_add(&recovered, 1);
	return 0;
}

static uint16_t send_burst(uint16_t port, struct rte_mempool *pool, uint8_t round)
{
	struct rte_mbuf *pkts[BURST];
	struct rte_ether_addr me;
	uint16_t i, sent;

	rte_eth_macaddr_get(port, &me);
	if (rte_pktmbuf_alloc_bulk(pool, pkts, BURST) != 0)
		return 0;
	for (i = 0; i < BURST; i++) {
		uint8_t *f = (uint8_t *)rte_pktmbuf_append(pkts[i], 64);

		memset(f, 0, 64);
		memcpy(f, me.addr_bytes, 6);            /* to ourselves */
		memcpy(f + 6, me.addr_bytes, 6);
		f[12] = 0x88, f[13] = 0xb5;             /* local experimental */
		f[14] = round, f[15] = (uint8_t)i;
	}
	sent = rte_eth_tx_burst(port, 0, pkts, BURST);
	if (sent < BURST)
		rte_pktmbuf_free_bulk(pkts + sent, BURST - sent);
	return sent;
}

static int sleep_for_rx(int timeout_ms)
{
	struct rte_epoll_event ev[1];
	int n = rte_epoll_wait(RTE_EPOLL_PER_THREAD, ev, 1, timeout_ms);

	return n < 0 ? 0 : n;
}

int main(int argc, char **argv)
{
	struct rte_eth_conf conf = { .intr_conf = { .rxq = 1 } };
	struct rte_mbuf *pkts[BURST];
	struct rte_mempool *pool;
	unsigned int free_at_start;
	uint16_t port = 0;
	int rounds, reset_after, r, ret;

	if (argc < 3) {
		fprintf(stderr, "usage: rx_intr <rounds> <reset_after_round> <EAL args...>\n");
		return 2;
	}
	rounds = atoi(argv[1]);
	reset_after = atoi(argv[2]);
	argv[2] = argv[0];
	if (rte_eal_init(argc - 2, argv + 2) < 0 || rte_eth_dev_count_avail() < 1) {
		fprintf(stderr, "EAL init failed or no port\n");
		return 1;
	}
	pool = rte_pktmbuf_pool_create("rx_intr_pool", 2047, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
				       rte_socket_id());
	if (pool == NULL)
		return 1;
	free_at_start = rte_mempool_avail_count(pool);
	rte_eth_dev_callback_register(port, RTE_ETH_EVENT_RECOVERY_SUCCESS, on_event, NULL);
	rte_eth_dev_callback_register(port, RTE_ETH_EVENT_ERR_RECOVERING, on_event, NULL);
	if (rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
	    rte_eth_rx_queue_setup(port, 0, 256, rte_socket_id(), NULL, pool) != 0 ||
	    rte_eth_tx_queue_setup(port, 0, 256, rte_socket_id(), NULL) != 0 ||
	    rte_eth_dev_start(port) != 0) {
		fprintf(stderr, "port setup failed\n");
		return 1;
	}
	ret = rte_eth_dev_rx_intr_ctl_q(port, 0, RTE_EPOLL_PER_THREAD, RTE_INTR_EVENT_ADD, NULL);
	if (ret != 0) {
		fprintf(stderr, "rte_eth_dev_rx_intr_ctl_q: %d\n", ret);
		return 1;
	}
	for (r = 1; r <= rounds; r++) {
		int idle, woken, got = 0;
		uint16_t sent;
		uint64_t deadline;

		ret = rte_eth_dev_rx_intr_enable(port, 0);
		if (ret != 0) {
			fprintf(stderr, "rte_eth_dev_rx_intr_enable: %d\n", ret);
			return 1;
		}
		idle = sleep_for_rx(100);
		sent = send_burst(port, pool, (uint8_t)r);
		woken = sleep_for_rx(5000);
		rte_eth_dev_rx_intr_disable(port, 0);
		deadline = rte_get_timer_cycles() + 2 * rte_get_timer_hz();
		while (got < sent && rte_get_timer_cycles() < deadline) {
			uint16_t n = rte_eth_rx_burst(port, 0, pkts, BURST);

			got += n;
			rte_pktmbuf_free_bulk(pkts, n);
			/* Reap the sent mbufs too. */
			rte_eth_tx_burst(port, 0, NULL, 0);
		}
		printf("ROUND %d IDLE_WAKEUPS %d WAKEUPS %d SENT %u GOT %d\n", r, idle, woken,
		       sent, got);
		fflush(stdout);
		if (r == reset_after) {
			int before = atomic_load(&recovered), queued = 0;

			/* A burst left unpolled in the RX ring when the reset hits. */
			sent = send_burst(port, pool, 0);
			deadline = rte_get_timer_cycles() + 2 * rte_get_timer_hz();
			while (queued < sent && rte_get_timer_cycles() < deadline)
				queued = rte_eth_rx_queue_count(port, 0);
			printf("QUEUED %d OF %u RXDESC0 %d\n", queued, sent,
			       rte_eth_rx_descriptor_status(port, 0, 0));
			if (emu_fault("reset") != 0) {
				fprintf(stderr, "cannot inject a reset\n");
				return 1;
			}
			deadline = rte_get_timer_cycles() + 30 * rte_get_timer_hz();
			while (atomic_load(&recovered) == before && rte_get_timer_cycles() < deadline)
				rte_delay_us_sleep(10000);
			if (atomic_load(&recovered) == before) {
				fprintf(stderr, "no RECOVERY_SUCCESS\n");
				return 1;
			}
			printf("RECOVERED\n");
			printf("RECOVERING COUNT %d RXDESC0 %d TXDESC0 %d AFTER COUNT %d\n",
			       atomic_load(&count_recovering), atomic_load(&rx_desc_recovering),
			       atomic_load(&tx_desc_recovering), rte_eth_rx_queue_count(port, 0));
		}
	}
	rte_eth_dev_stop(port);
	rte_eth_dev_close(port);
	printf("IN_USE %u\n", free_at_start - rte_mempool_avail_count(pool));
	printf("DONE\n");
	fflush(stdout);
	rte_eal_cleanup();
	return 0;
}
