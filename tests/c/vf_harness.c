/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Uses a net_mana port the way DPDK's netvsc PMD uses its VF, or the way a
 * careless application does, while the software MANA device resets under
 * it. Built and run by tests/vf_harness.rs.
 *
 *   vf_harness <mode> <resets> <EAL args...>
 *
 * modes:
 *   netvsc            owner set, intr_conf.rmv, direct burst calls through
 *                     rte_eth_devices[], synthetic path on ERR_RECOVERING,
 *                     back on RECOVERY_SUCCESS (from an EAL alarm), removal
 *                     on RECOVERY_FAILED / INTR_RMV through a deferred alarm
 *   close-recovering  rte_eth_dev_close() inside the ERR_RECOVERING callback
 *   stop-success      rte_eth_dev_stop() inside the RECOVERY_SUCCESS callback
 *   close-success     rte_eth_dev_close() inside the RECOVERY_SUCCESS callback
 *   remove-failed     rte_dev_remove() inside the RECOVERY_FAILED callback
 *   close-rmv         rte_eth_dev_close() inside the INTR_RMV callback
 *   mp-primary        configures and starts the port, then resets the
 *                     device <resets> times while a secondary sends
 *   mp-secondary      (--proc-type=secondary) sends and receives through
 *                     the primary's port until the primary says stop
 *
 * Faults are requested from the emulator inside this process over its
 * control socket (in MANA_EMU_RUN_DIR): "reset" (or "hot_remove" with
 * VF_FAULT=hot_remove). Output lines the test reads:
 *   EVENT <name> <intr|ctrl|other>   an ethdev event and its thread
 *   TRAFFIC <n>                       packets sent through the VF so far
 *   IN_USE <n>                        mbufs still out of the pool at exit
 *   DONE
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_alarm.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

/* The struct rte_eth_dev fields netvsc calls directly are in the driver
 * SDK's ethdev_driver.h; this harness is built with it. */
#include <ethdev_driver.h>

#include "emu_fault.h"

enum vf_state { VF_ACTIVE, VF_SYNTHETIC, VF_REMOVED };

static const char *mode;
static uint16_t port;
static struct rte_mempool *pool;
static _Atomic int state = VF_ACTIVE;
static _Atomic int recovered, failed, removed_events, closed;
/* mp-primary: a secondary owns the queues; the primary never bursts. */
static int primary_quiet;
static uint64_t owner_id;
/* Held by the data path around VF bursts, taken for writing to close the
 * port (netvsc's vf_lock). */
static pthread_rwlock_t vf_lock = PTHREAD_RWLOCK_INITIALIZER;

static const char *thread_kind(void)
{
	if (rte_thread_is_intr())
		return "intr";
	char name[32] = "";
	pthread_getname_np(pthread_self(), name, sizeof(name));
	return strncmp(name, "mana-reset", 10) == 0 ? "ctrl" : "other";
}

static void close_port(void)
{
	pthread_rwlock_wrlock(&vf_lock);
	if (!atomic_exchange(&closed, 1)) {
		rte_eth_dev_stop(port);
		rte_eth_dev_owner_unset(port, owner_id);
		rte_eth_dev_close(port);
	}
	pthread_rwlock_unlock(&vf_lock);
}

/* netvsc: deferred work on the EAL alarm thread (the interrupt thread). */
static void switch_to_vf(void *arg)
{
	(void)arg;
	int expected = VF_SYNTHETIC;
	atomic_compare_exchange_strong(&state, &expected, VF_ACTIVE);
}

static void remove_vf(void *arg)
{
	struct rte_device *dev = arg;

	atomic_store(&state, VF_REMOVED);
	close_port();
	if (dev != NULL && rte_dev_remove(dev) != 0)
		printf("rte_dev_remove failed\n");
}

static int on_event(uint16_t port_id, enum rte_eth_event_type type, void *arg, void *ret)
{
	(void)arg;
	(void)ret;
	struct rte_device *dev = rte_eth_devices[port_id].device;
	const char *name = type == RTE_ETH_EVENT_ERR_RECOVERING ? "ERR_RECOVERING" :
			   type == RTE_ETH_EVENT_RECOVERY_SUCCESS ? "RECOVERY_SUCCESS" :
			   type == RTE_ETH_EVENT_RECOVERY_FAILED ? "RECOVERY_FAILED" :
			   type == RTE_ETH_EVENT_INTR_RMV ? "INTR_RMV" : "OTHER";

	printf("EVENT %s %s\n", name, thread_kind());
	fflush(stdout);
	switch (type) {
	case RTE_ETH_EVENT_ERR_RECOVERING:
		atomic_store(&state, VF_SYNTHETIC);
		if (strcmp(mode, "close-recovering") == 0)
			close_port();
		break;
	case RTE_ETH_EVENT_RECOVERY_SUCCESS:
		atomic_fetch_add(&recovered, 1);
		if (strcmp(mode, "netvsc") == 0)
			rte_eal_alarm_set(1, switch_to_vf, NULL);
		else if (strcmp(mode, "stop-success") == 0)
			rte_eth_dev_stop(port);
		else if (strcmp(mode, "close-success") == 0)
			close_port();
		break;
	case RTE_ETH_EVENT_RECOVERY_FAILED:
		atomic_fetch_add(&failed, 1);
		if (strcmp(mode, "netvsc") == 0)
			rte_eal_alarm_set(1, remove_vf, dev);
		else if (strcmp(mode, "remove-failed") == 0)
			remove_vf(dev);
		break;
	case RTE_ETH_EVENT_INTR_RMV:
		atomic_fetch_add(&removed_events, 1);
		if (strcmp(mode, "netvsc") == 0)
			rte_eal_alarm_set(1, remove_vf, dev);
		else if (strcmp(mode, "close-rmv") == 0)
			close_port();
		break;
	default:
		break;
	}
	return 0;
}

/* One round of traffic through the VF, calling the burst functions of
 * struct rte_eth_dev directly, as netvsc does. */
static uint64_t vf_burst(void);

static uint64_t traffic(void)
{
	uint64_t n = 0;

	pthread_rwlock_rdlock(&vf_lock);
	if (!primary_quiet && atomic_load(&state) == VF_ACTIVE && !atomic_load(&closed) &&
	    rte_eth_devices[port].data->dev_started)
		n = vf_burst();
	pthread_rwlock_unlock(&vf_lock);
	return n;
}

static uint64_t vf_burst(void)
{
	struct rte_eth_dev *dev = &rte_eth_devices[port];
	struct rte_mbuf *pkts[32];
	uint16_t i, n = 0, sent;

	if (rte_pktmbuf_alloc_bulk(pool, pkts, 32) == 0) {
		for (i = 0; i < 32; i++) {
			char *p = rte_pktmbuf_append(pkts[i], 60);
			memset(p, 0, 60);
			memcpy(p, "\xff\xff\xff\xff\xff\xff", 6);
			memcpy(p + 6, dev->data->mac_addrs[0].addr_bytes, 6);
			p[12] = 0x88;
			p[13] = 0xb5;
		}
		sent = dev->tx_pkt_burst(dev->data->tx_queues[0], pkts, 32);
		if (sent < 32)
			rte_pktmbuf_free_bulk(pkts + sent, 32 - sent);
		n = sent;
	}
	sent = dev->rx_pkt_burst(dev->data->rx_queues[0], pkts, 32);
	rte_pktmbuf_free_bulk(pkts, sent);
	return n;
}

static void wait_until(_Atomic int *counter, int value, double seconds)
{
	uint64_t end = rte_get_timer_cycles() + (uint64_t)(seconds * rte_get_timer_hz());

	/* A port the application closed gets no more events. */
	while (atomic_load(counter) < value && !atomic_load(&closed) &&
	       rte_get_timer_cycles() < end) {
		traffic();
		rte_delay_us_sleep(100);
	}
}

static int file_exists(const char *env)
{
	const char *p = getenv(env);

	return p != NULL && access(p, F_OK) == 0;
}

static void touch(const char *env)
{
	const char *p = getenv(env);
	FILE *f = p ? fopen(p, "w") : NULL;

	if (f)
		fclose(f);
}

/* Waits for the other process's file (an event, not a span of time); the
 * deadline only catches a hang. 0 once it exists. */
static int wait_file(const char *env, double seconds)
{
	uint64_t end = rte_get_timer_cycles() + (uint64_t)(seconds * rte_get_timer_hz());

	while (!file_exists(env)) {
		if (rte_get_timer_cycles() >= end) {
			fprintf(stderr, "no %s after %.0f s\n", env, seconds);
			return -1;
		}
		rte_delay_us_sleep(10000);
	}
	return 0;
}

/* How long a wait for an event may take before it is a hang. */
#define HANG_S 120.0

/* The secondary: bursts through the primary's queues until VF_STOP exists;
 * counts what it receives after VF_MARK appears (the last reset is over). */
static int run_secondary(void)
{
	struct rte_mbuf *pkts[32];
	uint64_t rx = 0, rx_after = 0, tx = 0;
	int marked = 0;
	uint16_t i, n;

	pool = rte_mempool_lookup("vf_pool");
	/* The primary owns the port, so it is valid but not "available". */
	if (pool == NULL || !rte_eth_dev_is_valid_port(port)) {
		fprintf(stderr, "secondary: no pool or port\n");
		return 1;
	}
	while (!file_exists("VF_STOP")) {
		if (!marked && file_exists("VF_MARK"))
			marked = 1;
		/* Tell the primary what it waits for: traffic before its resets,
		 * traffic again after the last one. */
		if (rx > 1000)
			touch("VF_ATTACHED");
		if (rx_after > 100)
			touch("VF_SEEN");
		if (rte_pktmbuf_alloc_bulk(pool, pkts, 32) == 0) {
			for (i = 0; i < 32; i++) {
				char *p = rte_pktmbuf_append(pkts[i], 60);
				memset(p, 0, 60);
				p[12] = 0x88;
				p[13] = 0xb5;
			}
			n = rte_eth_tx_burst(port, 0, pkts, 32);
			tx += n;
			if (n < 32)
				rte_pktmbuf_free_bulk(pkts + n, 32 - n);
		}
		n = rte_eth_rx_burst(port, 0, pkts, 32);
		rx += n;
		if (marked)
			rx_after += n;
		rte_pktmbuf_free_bulk(pkts, n);
		rte_delay_us_sleep(50);
	}
	printf("SEC_TX %" PRIu64 "\nSEC_RX %" PRIu64 "\nSEC_RX_AFTER %" PRIu64 "\n", tx, rx, rx_after);
	fflush(stdout);
	touch("VF_EXITED");
	rte_eal_cleanup();
	return 0;
}

int main(int argc, char **argv)
{
	struct rte_eth_conf conf = { .intr_conf = { .rmv = 1 } };
	struct rte_eth_dev_owner owner = { .name = "vf_harness" };
	uint64_t sent = 0;
	int resets, r, i;
	const char *fault = getenv("VF_FAULT") ? getenv("VF_FAULT") : "reset";

	if (argc < 3) {
		fprintf(stderr, "usage: vf_harness <mode> <resets> <EAL args...>\n");
		return 2;
	}
	mode = argv[1];
	resets = atoi(argv[2]);
	argv[2] = argv[0];
	r = rte_eal_init(argc - 2, argv + 2);
	if (r < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	if (strcmp(mode, "mp-secondary") == 0)
		return run_secondary();
	if (rte_eth_dev_count_avail() < 1) {
		fprintf(stderr, "no port\n");
		return 1;
	}
	port = 0;
	pool = rte_pktmbuf_pool_create("vf_pool", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
				       rte_socket_id());
	if (pool == NULL)
		return 1;
	if (rte_eth_dev_owner_new(&owner.id) != 0 || rte_eth_dev_owner_set(port, &owner) != 0)
		return 1;
	owner_id = owner.id;
	rte_eth_dev_callback_register(port, RTE_ETH_EVENT_INTR_RMV, on_event, NULL);
	for (i = RTE_ETH_EVENT_ERR_RECOVERING; i <= RTE_ETH_EVENT_RECOVERY_FAILED; i++)
		rte_eth_dev_callback_register(port, i, on_event, NULL);
	if (rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
	    rte_eth_rx_queue_setup(port, 0, 256, rte_socket_id(), NULL, pool) != 0 ||
	    rte_eth_tx_queue_setup(port, 0, 256, rte_socket_id(), NULL) != 0 ||
	    rte_eth_dev_start(port) != 0) {
		fprintf(stderr, "port setup failed\n");
		return 1;
	}
	if (strcmp(mode, "mp-primary") == 0) {
		int t;

		primary_quiet = 1;
		printf("READY\n");
		fflush(stdout);
		touch("VF_READY");
		if (wait_file("VF_ATTACHED", HANG_S) != 0)
			return 1;
		for (r = 1; r <= resets; r++) {
			if (emu_fault("reset") != 0)
				return 1;
			wait_until(&recovered, r, HANG_S);
		}
		touch("VF_MARK");
		if (wait_file("VF_SEEN", HANG_S) != 0)
			return 1;
		touch("VF_STOP");
		for (t = 0; t < 2400 && !file_exists("VF_EXITED"); t++)
			rte_delay_us_sleep(50000);
		resets = 0;
	}
	for (r = 1; r <= resets && !atomic_load(&closed); r++) {
		uint64_t before = sent;

		for (i = 0; i < 200; i++)
			sent += traffic();
		if (sent == before && atomic_load(&state) == VF_ACTIVE)
			printf("NO_TRAFFIC round %d\n", r);
		if (emu_fault(fault) != 0) {
			fprintf(stderr, "cannot inject %s\n", fault);
			return 1;
		}
		if (strcmp(fault, "reset") == 0 && strcmp(mode, "remove-failed") != 0) {
			wait_until(&recovered, r, HANG_S);
			/* netvsc: the alarm switches back to the VF (no other
			 * mode switches back). */
			for (i = 0; strcmp(mode, "netvsc") == 0 && i < 120000 &&
				    atomic_load(&state) != VF_ACTIVE && !atomic_load(&closed);
			     i++)
				rte_delay_us_sleep(1000);
		} else {
			wait_until(&failed, 1, HANG_S);
			wait_until(&removed_events, strcmp(fault, "hot_remove") == 0 ? 1 : 0, HANG_S);
			rte_delay_us_sleep(200000);
			break;
		}
		printf("TRAFFIC %" PRIu64 "\n", sent);
		fflush(stdout);
	}
	for (i = 0; i < 200; i++)
		sent += traffic();
	printf("TRAFFIC %" PRIu64 "\n", sent);
	/* Let deferred alarms run before tearing down. */
	rte_delay_us_sleep(100000);
	close_port();
	printf("IN_USE %u\n", rte_mempool_in_use_count(pool));
	printf("DONE\n");
	fflush(stdout);
	rte_mempool_free(pool);
	rte_eal_cleanup();
	return 0;
}
