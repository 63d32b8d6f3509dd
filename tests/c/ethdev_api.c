/* SPDX-License-Identifier: BSD-3-Clause
 *
 * ethdev calls an application makes that testpmd cannot express, on a
 * net_mana port whose backend is a loopback (what it sends comes back).
 * Built and run by tests/ethdev_api.rs.
 *
 *   ethdev_api rss-groups <EAL args...>
 *     For each of DPDK's RSS group macros (RTE_ETH_RSS_IP, _TCP, _UDP, and
 *     _PROTO_MASK masked by the capabilities, as testpmd does): configure 4
 *     rx queues with that rss_hf and our own key, start, send 64 frames to
 *     ourselves over 64 flows, receive them and check each one's RSS hash
 *     (Toeplitz computed here) and queue (default table: hash % 4).
 *       RSS <group> CONFIGURE <ret> SENT <n> GOT <n> HASH_OK <n> QUEUE_OK <n>
 *
 *   ethdev_api bad-input <EAL args...>
 *     Calls that reach the driver with impossible values, each printed as
 *       BAD <what> <ret>
 *     then a configuration that works, and a round of traffic through it:
 *       WORKS SENT <n> GOT <n>
 *
 *   ethdev_api lpbk <EAL args...>
 *     Configures with lpbk_mode 1, then 0.
 *       LPBK1 <ret> LPBK0 <ret>
 *
 *   ethdev_api exit-started <EAL args...>
 *     Configures and starts the port, then calls rte_eal_cleanup() with the
 *     port still started, as an application that simply exits does.
 *       CLEANUP <ret>
 *
 *   ethdev_api lsc-stop-close <EAL args...>
 *     net_failsafe's pattern: an LSC callback that takes a recursive lock
 *     the application holds while it stops and closes the port. The EAL
 *     alarm thread is kept busy from before the stop until after the
 *     close, so an event left to an alarm is late or lost:
 *       EVENTS-AFTER-START <n>
 *       EVENTS-AFTER-STOP <n> ON-MAIN-THREAD <0|1> LINK <up|down>
 *       EVENTS-AFTER-CLOSE <n>   (once the alarm thread ran again)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include <rte_alarm.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#define NQ 4
#define FLOWS 64

static uint8_t key[40];

/* Toeplitz hash of `len` bytes, big-endian bit order, as the device does. */
static uint32_t toeplitz(const uint8_t *in, size_t len)
{
	uint32_t hash = 0;
	size_t bit;

	for (bit = 0; bit < len * 8; bit++) {
		if (in[bit / 8] & (0x80 >> (bit % 8))) {
			uint32_t w = 0;
			size_t k;

			for (k = 0; k < 32; k++) {
				size_t kb = bit + k;

				w = (w << 1) | ((key[kb / 8] >> (7 - kb % 8)) & 1);
			}
			hash ^= w;
		}
	}
	return hash;
}

enum kind { IPV6_NONE, IPV4_TCP, IPV6_UDP };

/* Builds frame `i` of `kind` to `me`; writes the hash input to `tuple`
 * (addresses, plus ports when `l4`) and returns its length. */
static size_t build(struct rte_mbuf *m, const struct rte_ether_addr *me, enum kind kind, int i,
		    int l4, uint8_t *tuple)
{
	uint8_t *f = (uint8_t *)rte_pktmbuf_append(m, 128);
	size_t t = 0;

	memset(f, 0, 128);
	memcpy(f, me->addr_bytes, 6);
	memcpy(f + 6, me->addr_bytes, 6);
	if (kind == IPV4_TCP) {
		struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(f + 14);
		uint8_t *tcp = f + 34;

		f[12] = 0x08, f[13] = 0x00;
		ip->version_ihl = 0x45;
		ip->total_length = rte_cpu_to_be_16(128 - 14);
		ip->time_to_live = 64;
		ip->next_proto_id = IPPROTO_TCP;
		ip->src_addr = rte_cpu_to_be_32(0x0a000000 | (uint32_t)(i * 7919));
		ip->dst_addr = rte_cpu_to_be_32(0x0a090909);
		ip->hdr_checksum = rte_ipv4_cksum(ip);
		tcp[0] = 0x10, tcp[1] = (uint8_t)i;     /* source port */
		tcp[2] = 0x00, tcp[3] = 80;             /* destination port */
		tcp[12] = 0x50, tcp[13] = 0x10;         /* 20-byte header, ACK */
		memcpy(tuple, &ip->src_addr, 4);
		memcpy(tuple + 4, &ip->dst_addr, 4);
		t = 8;
		if (l4) {
			memcpy(tuple + 8, tcp, 4);
			t = 12;
		}
	} else {
		uint8_t *ip = f + 14;
		uint8_t *l4h = f + 54;

		f[12] = 0x86, f[13] = 0xdd;
		ip[0] = 0x60;
		ip[4] = 0, ip[5] = 128 - 54;            /* payload length */
		ip[6] = kind == IPV6_UDP ? IPPROTO_UDP : 59; /* UDP or no next header */
		ip[7] = 64;
		ip[8] = 0xfc, ip[22] = (uint8_t)i, ip[23] = (uint8_t)(i * 31);
		ip[24] = 0xfc, ip[39] = 1;
		if (kind == IPV6_UDP) {
			l4h[0] = 0x30, l4h[1] = (uint8_t)i;
			l4h[2] = 0x12, l4h[3] = 0xb5;
			l4h[4] = 0, l4h[5] = 128 - 54;
		}
		memcpy(tuple, ip + 8, 32);
		t = 32;
		if (l4 && kind == IPV6_UDP) {
			memcpy(tuple + 32, l4h, 4);
			t = 36;
		}
	}
	return t;
}

static int setup(uint16_t port, struct rte_mempool *pool, uint64_t rss_hf, int nq)
{
	struct rte_eth_conf conf;
	int ret, q;

	memset(&conf, 0, sizeof(conf));
	conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
	conf.rx_adv_conf.rss_conf.rss_key = key;
	conf.rx_adv_conf.rss_conf.rss_key_len = sizeof(key);
	conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
	ret = rte_eth_dev_configure(port, nq, 1, &conf);
	if (ret != 0)
		return ret;
	for (q = 0; q < nq; q++) {
		ret = rte_eth_rx_queue_setup(port, q, 256, 0, NULL, pool);
		if (ret != 0)
			return ret;
	}
	ret = rte_eth_tx_queue_setup(port, 0, 256, 0, NULL);
	if (ret != 0)
		return ret;
	return rte_eth_dev_start(port);
}

static void rss_group(uint16_t port, struct rte_mempool *pool, const char *name, uint64_t rss_hf,
		      enum kind kind, int l4)
{
	struct rte_ether_addr me;
	struct rte_mbuf *pkts[FLOWS];
	uint32_t want[FLOWS];
	unsigned int sent = 0, got = 0, hash_ok = 0, queue_ok = 0;
	int ret, i, q;
	uint64_t deadline;

	ret = setup(port, pool, rss_hf, NQ);
	printf("RSS %s CONFIGURE %d", name, ret);
	if (ret != 0) {
		printf(" SENT 0 GOT 0 HASH_OK 0 QUEUE_OK 0\n");
		return;
	}
	rte_eth_macaddr_get(port, &me);
	if (rte_pktmbuf_alloc_bulk(pool, pkts, FLOWS) != 0) {
		printf(" no mbufs\n");
		exit(1);
	}
	for (i = 0; i < FLOWS; i++) {
		uint8_t tuple[40];
		size_t t = build(pkts[i], &me, kind, i, l4, tuple);

		want[i] = toeplitz(tuple, t);
	}
	while (sent < FLOWS) {
		uint16_t n = rte_eth_tx_burst(port, 0, pkts + sent, FLOWS - sent);

		sent += n;
		if (n == 0)
			break;
	}
	if (sent < FLOWS)
		rte_pktmbuf_free_bulk(pkts + sent, FLOWS - sent);
	deadline = rte_get_timer_cycles() + 5 * rte_get_timer_hz();
	while (got < sent && rte_get_timer_cycles() < deadline) {
		for (q = 0; q < NQ; q++) {
			struct rte_mbuf *rx[32];
			uint16_t n = rte_eth_rx_burst(port, q, rx, 32), k;

			for (k = 0; k < n; k++) {
				const uint8_t *f = rte_pktmbuf_mtod(rx[k], const uint8_t *);
				/* The flow index: TCP/UDP source port low byte, or the
				 * IPv6 source address's last-but-one byte. */
				int flow = kind == IPV4_TCP ? f[35] :
					   kind == IPV6_UDP ? f[55] : f[36];
				uint32_t h = rx[k]->hash.rss;

				if (flow < FLOWS && (rx[k]->ol_flags & RTE_MBUF_F_RX_RSS_HASH) &&
				    h == want[flow])
					hash_ok++;
				if (flow < FLOWS && (int)(want[flow] % NQ) == q)
					queue_ok++;
			}
			got += n;
			rte_pktmbuf_free_bulk(rx, n);
		}
	}
	printf(" SENT %u GOT %u HASH_OK %u QUEUE_OK %u\n", sent, got, hash_ok, queue_ok);
	rte_eth_dev_stop(port);
}

static int conf_rx(uint16_t port, uint16_t nrx, uint32_t mq, int lsc)
{
	struct rte_eth_conf conf;

	memset(&conf, 0, sizeof(conf));
	conf.rxmode.mq_mode = mq;
	conf.intr_conf.lsc = lsc;
	return rte_eth_dev_configure(port, nrx, 1, &conf);
}

#define BAD(what, call) printf("BAD %s %d\n", what, (int)(call))

/* Sends FLOWS frames to ourselves and receives them on 2 queues. */
static void traffic(uint16_t port, struct rte_mempool *pool)
{
	struct rte_ether_addr me;
	struct rte_mbuf *pkts[FLOWS];
	unsigned int sent = 0, got = 0;
	uint64_t deadline;
	int i, q;

	rte_eth_macaddr_get(port, &me);
	if (rte_pktmbuf_alloc_bulk(pool, pkts, FLOWS) != 0)
		exit(1);
	for (i = 0; i < FLOWS; i++) {
		uint8_t tuple[40];

		build(pkts[i], &me, IPV4_TCP, i, 1, tuple);
	}
	sent = rte_eth_tx_burst(port, 0, pkts, FLOWS);
	if (sent < FLOWS)
		rte_pktmbuf_free_bulk(pkts + sent, FLOWS - sent);
	deadline = rte_get_timer_cycles() + 5 * rte_get_timer_hz();
	while (got < sent && rte_get_timer_cycles() < deadline) {
		for (q = 0; q < 2; q++) {
			struct rte_mbuf *rx[32];
			uint16_t n = rte_eth_rx_burst(port, q, rx, 32);

			got += n;
			rte_pktmbuf_free_bulk(rx, n);
		}
	}
	printf("WORKS SENT %u GOT %u\n", sent, got);
}

static void bad_input(uint16_t port, struct rte_mempool *pool)
{
	struct rte_mempool *small;
	struct rte_eth_rss_conf rss;
	struct rte_eth_rss_reta_entry64 reta[2];
	struct rte_eth_xstat xs[1];
	struct rte_eth_xstat_name xn[1];
	struct rte_eth_dev_info info;
	struct rte_ether_addr other = { .addr_bytes = { 0x02, 0, 0, 0, 0, 0x99 } };
	uint8_t key[40] = { 0 };
	char fw[4];
	int i;

	rte_eth_dev_info_get(port, &info);
	small = rte_pktmbuf_pool_create("small", 1024, 0, 0, 1024 + RTE_PKTMBUF_HEADROOM, 0);
	/* Configuration the device cannot take. */
	BAD("configure-3-rxq", conf_rx(port, 3, RTE_ETH_MQ_RX_RSS, 0));
	BAD("configure-128-rxq", conf_rx(port, 128, RTE_ETH_MQ_RX_RSS, 0));
	BAD("configure-dcb", conf_rx(port, 2, RTE_ETH_MQ_RX_DCB, 0));
	/* Link status change events are offered (RTE_ETH_DEV_INTR_LSC). */
	BAD("configure-lsc", conf_rx(port, 2, RTE_ETH_MQ_RX_RSS, 1));
	/* A valid configuration, then bad queue setups. */
	BAD("configure-2-rxq", conf_rx(port, 2, RTE_ETH_MQ_RX_RSS, 0));
	BAD("rxq-id-out-of-range", rte_eth_rx_queue_setup(port, 5, 256, 0, NULL, pool));
	BAD("rxq-null-mempool", rte_eth_rx_queue_setup(port, 0, 256, 0, NULL, NULL));
	BAD("rxq-192-desc", rte_eth_rx_queue_setup(port, 0, 192, 0, NULL, pool));
	BAD("rxq-too-many-desc", rte_eth_rx_queue_setup(port, 0, info.rx_desc_lim.nb_max * 2, 0, NULL, pool));
	BAD("txq-192-desc", rte_eth_tx_queue_setup(port, 0, 192, 0, NULL));
	BAD("txq-id-out-of-range", rte_eth_tx_queue_setup(port, 3, 256, 0, NULL));
	BAD("start-without-queues", rte_eth_dev_start(port));
	/* MTU out of range, or beyond what the receive buffers hold. */
	BAD("mtu-67", rte_eth_dev_set_mtu(port, 67));
	BAD("mtu-9001", rte_eth_dev_set_mtu(port, 9001));
	BAD("mtu-900", rte_eth_dev_set_mtu(port, 900));
	BAD("rxq-small-mbufs", rte_eth_rx_queue_setup(port, 0, 256, 0, NULL, small));
	BAD("mtu-beyond-buffers", rte_eth_dev_set_mtu(port, 1500));
	BAD("rxq-small-mbufs-at-mtu-1500", rte_eth_rx_queue_setup(port, 1, 256, 0, NULL, small));
	BAD("mtu-1500-back", (rte_eth_rx_queue_setup(port, 0, 256, 0, NULL, pool),
			      rte_eth_dev_set_mtu(port, 1500)));
	rte_eth_tx_queue_setup(port, 0, 256, 0, NULL);
	/* RSS: key length, hash types, redirection tables. */
	memset(&rss, 0, sizeof(rss));
	rss.rss_key = key;
	rss.rss_key_len = 39;
	rss.rss_hf = RTE_ETH_RSS_IP;
	BAD("rss-key-39-bytes", rte_eth_dev_rss_hash_update(port, &rss));
	rss.rss_key_len = 40;
	rss.rss_hf = RTE_ETH_RSS_NONFRAG_IPV4_SCTP;
	BAD("rss-sctp", rte_eth_dev_rss_hash_update(port, &rss));
	memset(reta, 0, sizeof(reta));
	reta[0].mask = reta[1].mask = ~0ULL;
	BAD("reta-size-128", rte_eth_dev_rss_reta_update(port, reta, 128));
	reta[0].reta[3] = 5;
	BAD("reta-queue-5", rte_eth_dev_rss_reta_update(port, reta, 64));
	reta[0].reta[3] = 0;
	BAD("reta-not-periodic", rte_eth_dev_rss_reta_update(port, reta, 64));
	/* Buffers too small: the count needed comes back, nothing overflows. */
	BAD("xstats-1-entry", rte_eth_xstats_get(port, xs, 1) > 1);
	BAD("xstats-names-1-entry", rte_eth_xstats_get_names(port, xn, 1) > 1);
	BAD("fw-version-4-bytes", rte_eth_dev_fw_version_get(port, fw, sizeof(fw)) > 4);
	/* What Azure does not offer. */
	BAD("mac-other", rte_eth_dev_default_mac_addr_set(port, &other));
	BAD("promiscuous", rte_eth_promiscuous_enable(port));
	BAD("vlan-filter", rte_eth_dev_set_vlan_offload(port, RTE_ETH_VLAN_FILTER_OFFLOAD));
	BAD("rx-intr-without-conf", rte_eth_dev_rx_intr_enable(port, 0));
	BAD("rxq-start-out-of-range", rte_eth_dev_rx_queue_start(port, 7));
	BAD("rxq-start-port-stopped", rte_eth_dev_rx_queue_start(port, 0));
	/* After all that: a working port. */
	for (i = 0; i < 2; i++)
		rte_eth_rx_queue_setup(port, i, 256, 0, NULL, pool);
	BAD("start", rte_eth_dev_start(port));
	traffic(port, pool);
	rte_eth_dev_stop(port);
	rte_eth_dev_close(port);
}

static pthread_mutex_t app_lock;
static int lsc_events, alarm_busy, alarm_release, alarms_ran;
static int lsc_on_main, lsc_link_up = -1;
static pthread_t main_thread;

static int on_lsc(uint16_t port, enum rte_eth_event_type type, void *arg, void *out)
{
	struct rte_eth_link link;

	(void)type, (void)arg, (void)out;
	pthread_mutex_lock(&app_lock);
	memset(&link, 0, sizeof(link));
	rte_eth_link_get_nowait(port, &link);
	lsc_link_up = link.link_status;
	lsc_on_main = pthread_equal(pthread_self(), main_thread);
	__atomic_add_fetch(&lsc_events, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&app_lock);
	return 0;
}

static void hold_alarm_thread(void *arg)
{
	(void)arg;
	__atomic_store_n(&alarm_busy, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&alarm_release, __ATOMIC_SEQ_CST))
		rte_delay_us_sleep(1000);
}

static void count_alarm(void *arg)
{
	(void)arg;
	__atomic_add_fetch(&alarms_ran, 1, __ATOMIC_SEQ_CST);
}

/* Waits (60 s deadline: a hang) until *v reaches want. */
static int wait_for(const char *what, int *v, int want)
{
	int i;

	for (i = 0; i < 60000; i++) {
		if (__atomic_load_n(v, __ATOMIC_SEQ_CST) >= want)
			return 0;
		rte_delay_us_sleep(1000);
	}
	printf("DEADLINE %s: %d of %d\n", what, __atomic_load_n(v, __ATOMIC_SEQ_CST), want);
	return -1;
}

static int lsc_stop_close(uint16_t port, struct rte_mempool *pool)
{
	pthread_mutexattr_t attr;
	int ret;

	main_thread = pthread_self();
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&app_lock, &attr);
	rte_eth_dev_callback_register(port, RTE_ETH_EVENT_INTR_LSC, on_lsc, NULL);
	ret = conf_rx(port, 1, RTE_ETH_MQ_RX_NONE, 1);
	ret = ret ? ret : rte_eth_rx_queue_setup(port, 0, 256, 0, NULL, pool);
	ret = ret ? ret : rte_eth_tx_queue_setup(port, 0, 256, 0, NULL);
	ret = ret ? ret : rte_eth_dev_start(port);
	if (ret != 0 || wait_for("start event", &lsc_events, 1) != 0)
		return 1;
	printf("EVENTS-AFTER-START %d\n", __atomic_load_n(&lsc_events, __ATOMIC_SEQ_CST));
	rte_eal_alarm_set(1, hold_alarm_thread, NULL);
	if (wait_for("alarm thread held", &alarm_busy, 1) != 0)
		return 1;
	pthread_mutex_lock(&app_lock);
	rte_eth_dev_stop(port);
	printf("EVENTS-AFTER-STOP %d ON-MAIN-THREAD %d LINK %s\n",
	       __atomic_load_n(&lsc_events, __ATOMIC_SEQ_CST), lsc_on_main,
	       lsc_link_up == 1 ? "up" : lsc_link_up == 0 ? "down" : "none");
	rte_eth_dev_close(port);
	pthread_mutex_unlock(&app_lock);
	__atomic_store_n(&alarm_release, 1, __ATOMIC_SEQ_CST);
	rte_eal_alarm_set(1, count_alarm, NULL);
	if (wait_for("alarm thread free", &alarms_ran, 1) != 0)
		return 1;
	printf("EVENTS-AFTER-CLOSE %d\n", __atomic_load_n(&lsc_events, __ATOMIC_SEQ_CST));
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	struct rte_eth_dev_info info;
	struct rte_mempool *pool;
	uint16_t port = 0;
	int ret, i;

	ret = rte_eal_init(argc - 1, argv + 1);
	if (ret < 0) {
		fprintf(stderr, "EAL init failed\n");
		return 1;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	if (rte_eth_dev_count_avail() < 1) {
		fprintf(stderr, "no port\n");
		return 1;
	}
	pool = rte_pktmbuf_pool_create("api", 4096, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
	if (pool == NULL) {
		fprintf(stderr, "no mempool\n");
		return 1;
	}
	for (i = 0; i < (int)sizeof(key); i++)
		key[i] = (uint8_t)(0x6d + i * 0x5a);
	if (strcmp(mode, "rss-groups") == 0) {
		rte_eth_dev_info_get(port, &info);
		printf("CAPA %#" PRIx64 "\n", info.flow_type_rss_offloads);
		rss_group(port, pool, "ip", RTE_ETH_RSS_IP, IPV6_NONE, 0);
		rss_group(port, pool, "tcp", RTE_ETH_RSS_TCP, IPV4_TCP, 1);
		rss_group(port, pool, "udp", RTE_ETH_RSS_UDP, IPV6_UDP, 1);
		rss_group(port, pool, "proto-mask",
			  RTE_ETH_RSS_PROTO_MASK & info.flow_type_rss_offloads, IPV4_TCP, 1);
		rss_group(port, pool, "ip-tcp", RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP, IPV6_NONE, 0);
		rte_eth_dev_close(port);
	} else if (strcmp(mode, "bad-input") == 0) {
		bad_input(port, pool);
	} else if (strcmp(mode, "lpbk") == 0) {
		struct rte_eth_conf conf;

		memset(&conf, 0, sizeof(conf));
		conf.lpbk_mode = 1;
		ret = rte_eth_dev_configure(port, 1, 1, &conf);
		printf("LPBK1 %d", ret);
		conf.lpbk_mode = 0;
		printf(" LPBK0 %d\n", rte_eth_dev_configure(port, 1, 1, &conf));
	} else if (strcmp(mode, "lsc-stop-close") == 0) {
		if (lsc_stop_close(port, pool) != 0)
			return 1;
	} else if (strcmp(mode, "exit-started") == 0) {
		ret = setup(port, pool, RTE_ETH_RSS_IP, 1);
		printf("START %d\n", ret);
	} else {
		fprintf(stderr, "unknown mode '%s'\n", mode);
		return 2;
	}
	ret = rte_eal_cleanup();
	printf("CLEANUP %d\n", ret);
	return 0;
}
