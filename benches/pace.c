/* SPDX-License-Identifier: BSD-3-Clause
 *
 * LD_PRELOAD helper of benches/perf.py (see doc/performance.md): makes the
 * instruction counts of a PMD's rx/tx burst functions under callgrind
 * deterministic on the emulated MANA device. Driver-neutral: it is loaded
 * the same way for the Rust and the upstream C driver and never looks
 * inside either.
 *
 * After testpmd starts a port, the shim replaces the port's rx/tx burst
 * pointers in rte_eth_fp_ops with wrappers that call the driver's function
 * through one of these non-inlined trampolines:
 *
 *   bench_rx_busy  RX queue holds packets the device delivered and the
 *                  application has not received yet (per-queue device
 *                  counters say so before the call);
 *   bench_rx_idle  RX queue empty: a pure polling call;
 *   bench_tx_prep  tx_pkt_prepare calls (testpmd's csum engine makes one
 *                  before each TX burst) while the TX budget is not
 *                  reached, for drivers that have one: part of the cost
 *                  of sending with offloads;
 *   bench_tx_busy  every TX burst with packets, paced: after it the shim
 *                  waits until the device has transmitted everything the
 *                  port posted, so the next burst reaps exactly the
 *                  previous burst's completions and never meets a full
 *                  ring (a NIC that keeps up). When the budget is reached,
 *                  one empty burst per queue reaps the last completions;
 *   (plain call)   bursts with packets once `BENCH_BUDGET` packets per
 *                  port and direction have been counted, and every call on
 *                  the main lcore.
 *
 * perf.py runs callgrind with --collect-atstart=no and --toggle-collect on
 * the three bench_* trampolines and reads the cost of their call arcs into
 * the driver's burst functions. After each busy RX burst the shim also
 * waits until the device has seen that queue's RQ doorbell: in the
 * emulator's poll doorbell mode the queues of one context share one
 * register, so two queues ringing back to back could hide a doorbell.
 *
 * The device's state is read over the emulator's control socket
 * (<BENCH_RUN_DIR>/mana-emu-<pid>.sock, JSON lines). Nothing here runs
 * inside the measured functions. At exit, the shim writes its own counters
 * (packets, calls, mispredictions, timeouts) to BENCH_STATS as JSON.
 *
 * With BENCH_TX_VLAN=<tci>, every packet sent through a port that can
 * insert VLAN tags (RTE_ETH_TX_OFFLOAD_VLAN_INSERT in its capabilities) is
 * marked for insertion (RTE_MBUF_F_TX_VLAN, vlan_tci) before the driver
 * sees it, outside the measured calls: testpmd's csum engine does not ask
 * for insertion itself.
 *
 * With BENCH_CYCLES=<limit> (and no pacing), the shim instead times every
 * rx/tx burst call of the forwarding lcores with the TSC (perf.py's native
 * runs against the saturating device): per port, the cycles, calls and
 * packets of full bursts (as many packets as asked for), of partial ones
 * and of empty RX polls. A call that took more than <limit> cycles was
 * interrupted (the thread preempted on a shared machine) and is counted
 * apart, not in the cycles: TSC cycles keep running while a thread waits
 * for a CPU, and one 3 ms time slice is worth ten thousand bursts.
 *
 * Environment: BENCH_RUN_DIR (required to pace), BENCH_BUDGET, BENCH_STATS,
 * BENCH_TX_VLAN, BENCH_CYCLES.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <rte_ethdev.h>
#include <rte_lcore.h>

#define MAXP 4
#define MAXQ 16

typedef uint16_t (*burst_fn)(void *, struct rte_mbuf **, uint16_t);
typedef uint16_t (*prep_fn)(void *, struct rte_mbuf **, uint16_t);

struct port {
	int live;
	char mac[18];
	burst_fn rx, tx;
	prep_fn prep;
	int tag; /* mark sent packets for VLAN insertion */
	int nrxq, ntxq;
	void *rxq[MAXQ], *txq[MAXQ];
	/* device view (control socket) */
	uint64_t dev_tx;
	uint64_t rq_pkts[MAXQ], rq_db[MAXQ];
	int rq_known;
	/* application view (what the bursts returned) */
	uint64_t rx_got[MAXQ];
	uint64_t tx_posted;
	int tx_base_set;
	uint64_t tx_base;
	/* accounting */
	uint64_t rx_busy_calls, rx_busy_pkts, rx_busy_empty;
	uint64_t rx_idle_calls, rx_idle_pkts;
	uint64_t rx_over_calls, rx_over_pkts;
	uint64_t tx_busy_calls, tx_busy_pkts, tx_over_calls, tx_over_pkts;
	uint64_t tx_prep_calls, tx_prep_pkts;
	uint64_t tx_partial, tx_drain_calls;
	uint64_t tx_timeouts, db_timeouts, rq_unmapped;
	/* BENCH_CYCLES: [0] RX, [1] TX */
	struct timing {
		uint64_t full_calls, full_pkts, full_cyc;
		uint64_t part_calls, part_pkts, part_cyc;
		uint64_t empty_calls, empty_cyc;
		uint64_t preempted;
	} tm[2];
};

static struct port P[MAXP];
static uint64_t budget = UINT64_MAX;
static int tx_vlan = -1; /* BENCH_TX_VLAN, or -1 */
static int pace;
static uint64_t cycles_limit; /* BENCH_CYCLES, or 0 */
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int sock_fd = -1;
static char *reply;
static size_t reply_cap;
static uint64_t queries, query_errors;

/* ---- trampolines (the only collected code: --toggle-collect=bench_*) ---- */

__attribute__((noinline, used)) uint16_t
bench_rx_busy(burst_fn f, void *q, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t r = f(q, pkts, n);

	__asm__ volatile("" ::: "memory");
	return r;
}

__attribute__((noinline, used)) uint16_t
bench_rx_idle(burst_fn f, void *q, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t r = f(q, pkts, n);

	__asm__ volatile("" ::: "memory");
	return r;
}

__attribute__((noinline, used)) uint16_t
bench_tx_busy(burst_fn f, void *q, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t r = f(q, pkts, n);

	__asm__ volatile("" ::: "memory");
	return r;
}

__attribute__((noinline, used)) uint16_t
bench_tx_prep(prep_fn f, void *q, struct rte_mbuf **pkts, uint16_t n)
{
	uint16_t r = f(q, pkts, n);

	__asm__ volatile("" ::: "memory");
	return r;
}

/* ---- the emulator's control socket ---- */

static int ctl_connect(void)
{
	struct sockaddr_un a;

	if (sock_fd >= 0)
		return 0;
	sock_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock_fd < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
	if (connect(sock_fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(sock_fd);
		sock_fd = -1;
		return -1;
	}
	return 0;
}

/* One {"cmd":"counters"} round trip; the reply line is left in `reply`. */
static int ctl_counters(void)
{
	static const char req[] = "{\"cmd\":\"counters\"}\n";
	size_t len = 0;

	queries++;
	if (ctl_connect() != 0)
		goto fail;
	if (write(sock_fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		goto fail;
	for (;;) {
		ssize_t n;

		if (reply_cap - len < 65536) {
			reply_cap = reply_cap ? reply_cap * 2 : 1 << 20;
			reply = realloc(reply, reply_cap);
			if (reply == NULL)
				abort();
		}
		n = read(sock_fd, reply + len, reply_cap - len - 1);
		if (n <= 0)
			goto fail;
		len += (size_t)n;
		if (reply[len - 1] == '\n')
			break;
	}
	reply[len] = '\0';
	return 0;
fail:
	query_errors++;
	if (sock_fd >= 0)
		close(sock_fd);
	sock_fd = -1;
	return -1;
}

static uint64_t num_after(const char *s, const char *end, const char *key)
{
	const char *k = strstr(s, key);

	if (k == NULL || (end != NULL && k >= end))
		return UINT64_MAX;
	return strtoull(k + strlen(key), NULL, 10);
}

struct rq {
	uint64_t id, pkts, db;
};

static int rq_cmp(const void *a, const void *b)
{
	const struct rq *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Refreshes every live port's device view from one counters reply.
 * Reply layout (serde): {"ok":true,"counters":{"device":{..},"ports":[{"mac":
 * "..","pci":..,"counters":{"tx_packets":N,..}},..],"queues":[{"kind":"rq",
 * "id":N,"port":"<mac>","live":true,"counters":{"packets":N,..,"doorbells":N}}
 * ,..]}}. RQs of a port are matched to queue indexes in id order (both
 * drivers create them in queue order). */
static int refresh(void)
{
	if (ctl_counters() != 0)
		return -1;
	for (int p = 0; p < MAXP; p++) {
		struct port *pp = &P[p];
		char key[64];
		const char *s, *q;
		struct rq rqs[64];
		int n = 0;

		if (!pp->live)
			continue;
		snprintf(key, sizeof(key), "\"mac\":\"%s\"", pp->mac);
		s = strstr(reply, key);
		if (s != NULL) {
			uint64_t v = num_after(s, NULL, "\"tx_packets\":");

			if (v != UINT64_MAX)
				pp->dev_tx = v;
		}
		snprintf(key, sizeof(key), "\"port\":\"%s\",\"live\":true", pp->mac);
		for (q = strstr(reply, "{\"kind\":\"rq\""); q != NULL && n < 64;
		     q = strstr(q + 1, "{\"kind\":\"rq\"")) {
			const char *next = strstr(q + 1, "{\"kind\":");
			const char *m = strstr(q, key);

			if (m == NULL || (next != NULL && m >= next))
				continue;
			rqs[n].id = num_after(q, next, "\"id\":");
			rqs[n].pkts = num_after(m, next, "\"packets\":");
			rqs[n].db = num_after(m, next, "\"doorbells\":");
			n++;
		}
		if (n == pp->nrxq) {
			qsort(rqs, (size_t)n, sizeof(rqs[0]), rq_cmp);
			for (int i = 0; i < n; i++) {
				pp->rq_pkts[i] = rqs[i].pkts;
				pp->rq_db[i] = rqs[i].db;
			}
			pp->rq_known = 1;
		} else {
			pp->rq_known = 0;
		}
	}
	return 0;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void nap(void)
{
	struct timespec t = { 0, 20000 };

	nanosleep(&t, NULL);
}

/* ---- the wrappers ---- */

static int lookup(void *q, int rx, int *qi)
{
	for (int p = 0; p < MAXP; p++) {
		struct port *pp = &P[p];
		int n = rx ? pp->nrxq : pp->ntxq;

		if (!pp->live)
			continue;
		for (int i = 0; i < n; i++)
			if ((rx ? pp->rxq[i] : pp->txq[i]) == q) {
				*qi = i;
				return p;
			}
	}
	return -1;
}

/* Marks packets for VLAN insertion (BENCH_TX_VLAN); idempotent, so the
 * prepare and burst wrappers may both call it. */
static void tag(struct port *pp, struct rte_mbuf **pkts, uint16_t n)
{
	if (!pp->tag)
		return;
	for (uint16_t i = 0; i < n; i++) {
		pkts[i]->ol_flags |= RTE_MBUF_F_TX_VLAN;
		pkts[i]->vlan_tci = (uint16_t)tx_vlan;
	}
}

static burst_fn first_rx, first_tx;
static prep_fn first_prep;

/* One timed burst call (BENCH_CYCLES): `want` asked for, `got` moved. */
static uint16_t timed(struct timing *t, burst_fn f, void *q, struct rte_mbuf **pkts,
		      uint16_t want)
{
	uint64_t t0 = rte_rdtsc_precise(), dt;
	uint16_t got = f(q, pkts, want);

	dt = rte_rdtsc_precise() - t0;
	if (dt > cycles_limit) {
		t->preempted++;
	} else if (got == 0) {
		t->empty_calls++;
		t->empty_cyc += dt;
	} else if (got == want) {
		t->full_calls++;
		t->full_pkts += got;
		t->full_cyc += dt;
	} else {
		t->part_calls++;
		t->part_pkts += got;
		t->part_cyc += dt;
	}
	return got;
}

static uint16_t rx_wrap(void *q, struct rte_mbuf **pkts, uint16_t n)
{
	int qi = 0, p = lookup(q, 1, &qi);
	struct port *pp;
	uint16_t r;

	if (p < 0)
		return first_rx(q, pkts, n); /* not reached: every port is installed */
	pp = &P[p];
	if (!pace && cycles_limit && rte_lcore_id() != rte_get_main_lcore()) {
		r = timed(&pp->tm[0], pp->rx, q, pkts, n);
		pp->rx_over_calls++;
		pp->rx_over_pkts += r;
		pp->rx_got[qi] += r;
		return r;
	}
	if (!pace || rte_lcore_id() == rte_get_main_lcore()) {
		r = pp->rx(q, pkts, n);
		pp->rx_over_calls++;
		pp->rx_over_pkts += r;
		pp->rx_got[qi] += r;
		return r;
	}
	refresh();
	if (!pp->rq_known) {
		pp->rq_unmapped++;
		r = pp->rx(q, pkts, n);
		pp->rx_over_calls++;
		pp->rx_over_pkts += r;
		pp->rx_got[qi] += r;
		return r;
	}
	if (pp->rq_pkts[qi] > pp->rx_got[qi]) {
		uint64_t db0 = pp->rq_db[qi];

		if (pp->rx_busy_pkts >= budget) {
			r = pp->rx(q, pkts, n);
			pp->rx_over_calls++;
			pp->rx_over_pkts += r;
		} else {
			r = bench_rx_busy(pp->rx, q, pkts, n);
			pp->rx_busy_calls++;
			pp->rx_busy_pkts += r;
		}
		pp->rx_got[qi] += r;
		if (r == 0) {
			pp->rx_busy_empty++;
			return 0;
		}
		/* Let the device see this queue's refill doorbell before any
		 * other queue of the context rings (poll doorbell mode). */
		for (double t0 = now_s(); now_s() - t0 < 2.0; nap())
			if (refresh() == 0 && pp->rq_known && pp->rq_db[qi] > db0)
				return r;
		pp->db_timeouts++;
		return r;
	}
	r = bench_rx_idle(pp->rx, q, pkts, n);
	pp->rx_idle_calls++;
	pp->rx_idle_pkts += r;
	pp->rx_got[qi] += r;
	return r;
}

static uint16_t tx_wrap(void *q, struct rte_mbuf **pkts, uint16_t n)
{
	int qi = 0, p = lookup(q, 0, &qi);
	struct port *pp;
	uint16_t r;

	if (p < 0)
		return first_tx(q, pkts, n);
	pp = &P[p];
	tag(pp, pkts, n);
	if (!pace && cycles_limit && n > 0 && rte_lcore_id() != rte_get_main_lcore()) {
		r = timed(&pp->tm[1], pp->tx, q, pkts, n);
		pp->tx_over_calls++;
		pp->tx_over_pkts += r;
		pp->tx_posted += r;
		return r;
	}
	if (!pace || n == 0 || rte_lcore_id() == rte_get_main_lcore() ||
	    pp->tx_busy_pkts >= budget) {
		r = pp->tx(q, pkts, n);
		pp->tx_over_calls++;
		pp->tx_over_pkts += r;
		pp->tx_posted += r;
		return r;
	}
	if (!pp->tx_base_set) {
		/* Whatever the device sent before the first paced burst. */
		if (refresh() == 0) {
			pp->tx_base = pp->dev_tx - pp->tx_posted;
			pp->tx_base_set = 1;
		}
	}
	r = bench_tx_busy(pp->tx, q, pkts, n);
	pp->tx_busy_calls++;
	pp->tx_busy_pkts += r;
	pp->tx_posted += r;
	if (r < n)
		pp->tx_partial++;
	if (r == 0)
		return 0;
	/* Pace: wait until the device has sent everything posted. */
	for (double t0 = now_s(); ; nap()) {
		if (refresh() == 0 && pp->dev_tx >= pp->tx_base + pp->tx_posted)
			break;
		if (now_s() - t0 > 5.0) {
			pp->tx_timeouts++;
			break;
		}
	}
	if (pp->tx_busy_pkts >= budget) {
		/* Budget reached: one empty burst per queue reaps the last
		 * completions, so the counted bursts free every packet they
		 * posted (an empty burst is a valid call: it only reaps). */
		struct rte_mbuf *none[1];

		for (int i = 0; i < pp->ntxq; i++) {
			bench_tx_busy(pp->tx, pp->txq[i], none, 0);
			pp->tx_busy_calls++;
			pp->tx_drain_calls++;
		}
	}
	return r;
}

static uint16_t prep_wrap(void *q, struct rte_mbuf **pkts, uint16_t n)
{
	int qi = 0, p = lookup(q, 0, &qi);
	struct port *pp;
	uint16_t r;

	if (p < 0)
		return first_prep(q, pkts, n);
	pp = &P[p];
	tag(pp, pkts, n);
	if (!pace || n == 0 || rte_lcore_id() == rte_get_main_lcore() ||
	    pp->tx_busy_pkts >= budget)
		return pp->prep(q, pkts, n);
	r = bench_tx_prep(pp->prep, q, pkts, n);
	pp->tx_prep_calls++;
	pp->tx_prep_pkts += n;
	return r;
}

static void install(uint16_t port)
{
	struct rte_eth_dev_info info;
	struct rte_ether_addr a;
	struct rte_eth_fp_ops *fo = &rte_eth_fp_ops[port];
	struct port *pp;

	if (port >= MAXP || rte_eth_dev_info_get(port, &info) != 0)
		return;
	pp = &P[port];
	if (fo->rx_pkt_burst != rx_wrap) {
		pp->rx = fo->rx_pkt_burst;
		if (first_rx == NULL)
			first_rx = pp->rx;
		fo->rx_pkt_burst = rx_wrap;
	}
	if (fo->tx_pkt_prepare != NULL && fo->tx_pkt_prepare != prep_wrap) {
		pp->prep = fo->tx_pkt_prepare;
		if (first_prep == NULL)
			first_prep = pp->prep;
		fo->tx_pkt_prepare = prep_wrap;
	}
	if (fo->tx_pkt_burst != tx_wrap) {
		pp->tx = fo->tx_pkt_burst;
		if (first_tx == NULL)
			first_tx = pp->tx;
		fo->tx_pkt_burst = tx_wrap;
	}
	pp->tag = tx_vlan >= 0 && (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_VLAN_INSERT);
	pp->nrxq = info.nb_rx_queues < MAXQ ? info.nb_rx_queues : MAXQ;
	pp->ntxq = info.nb_tx_queues < MAXQ ? info.nb_tx_queues : MAXQ;
	for (int i = 0; i < pp->nrxq; i++)
		pp->rxq[i] = fo->rxq.data[i];
	for (int i = 0; i < pp->ntxq; i++)
		pp->txq[i] = fo->txq.data[i];
	rte_eth_macaddr_get(port, &a);
	snprintf(pp->mac, sizeof(pp->mac), "%02x:%02x:%02x:%02x:%02x:%02x",
		 a.addr_bytes[0], a.addr_bytes[1], a.addr_bytes[2],
		 a.addr_bytes[3], a.addr_bytes[4], a.addr_bytes[5]);
	pp->live = 1;
}

int rte_eth_dev_start(uint16_t port_id)
{
	static int (*real)(uint16_t);
	int ret;

	if (real == NULL)
		real = (int (*)(uint16_t))dlsym(RTLD_NEXT, "rte_eth_dev_start");
	ret = real(port_id);
	if (ret == 0)
		install(port_id);
	return ret;
}

__attribute__((constructor)) static void init(void)
{
	const char *d = getenv("BENCH_RUN_DIR"), *b = getenv("BENCH_BUDGET");
	const char *v = getenv("BENCH_TX_VLAN"), *c = getenv("BENCH_CYCLES");

	if (d != NULL && *d != '\0') {
		snprintf(sock_path, sizeof(sock_path), "%s/mana-emu-%d.sock", d, (int)getpid());
		pace = 1;
	}
	if (b != NULL && *b != '\0')
		budget = strtoull(b, NULL, 10);
	if (v != NULL && *v != '\0')
		tx_vlan = atoi(v) & 0xffff;
	if (c != NULL && *c != '\0')
		cycles_limit = strtoull(c, NULL, 10);
}

__attribute__((destructor)) static void fini(void)
{
	const char *path = getenv("BENCH_STATS");
	FILE *f;

	if (path == NULL || (f = fopen(path, "w")) == NULL)
		return;
	fprintf(f, "{\"queries\":%lu,\"query_errors\":%lu,\"ports\":[",
		(unsigned long)queries, (unsigned long)query_errors);
	for (int p = 0, first = 1; p < MAXP; p++) {
		struct port *pp = &P[p];

		if (!pp->live)
			continue;
		fprintf(f, "%s{\"port\":%d,\"mac\":\"%s\",\"nrxq\":%d,\"ntxq\":%d,"
			"\"rx_busy_calls\":%lu,\"rx_busy_pkts\":%lu,\"rx_busy_empty\":%lu,"
			"\"rx_idle_calls\":%lu,\"rx_idle_pkts\":%lu,"
			"\"rx_over_calls\":%lu,\"rx_over_pkts\":%lu,"
			"\"tx_busy_calls\":%lu,\"tx_busy_pkts\":%lu,\"tx_partial\":%lu,"
			"\"tx_drain_calls\":%lu,\"tx_prep_calls\":%lu,\"tx_prep_pkts\":%lu,"
			"\"tx_over_calls\":%lu,\"tx_over_pkts\":%lu,"
			"\"tx_timeouts\":%lu,\"db_timeouts\":%lu,\"rq_unmapped\":%lu,"
			"\"tx_vlan_tagged\":%d,\"timing\":[",
			first ? "" : ",", p, pp->mac, pp->nrxq, pp->ntxq,
			(unsigned long)pp->rx_busy_calls, (unsigned long)pp->rx_busy_pkts,
			(unsigned long)pp->rx_busy_empty, (unsigned long)pp->rx_idle_calls,
			(unsigned long)pp->rx_idle_pkts, (unsigned long)pp->rx_over_calls,
			(unsigned long)pp->rx_over_pkts, (unsigned long)pp->tx_busy_calls,
			(unsigned long)pp->tx_busy_pkts, (unsigned long)pp->tx_partial,
			(unsigned long)pp->tx_drain_calls, (unsigned long)pp->tx_prep_calls,
			(unsigned long)pp->tx_prep_pkts,
			(unsigned long)pp->tx_over_calls, (unsigned long)pp->tx_over_pkts,
			(unsigned long)pp->tx_timeouts, (unsigned long)pp->db_timeouts,
			(unsigned long)pp->rq_unmapped, pp->tag);
		for (int k = 0; k < 2; k++) {
			struct timing *t = &pp->tm[k];

			fprintf(f, "%s{\"full_calls\":%lu,\"full_pkts\":%lu,\"full_cycles\":%lu,"
				"\"part_calls\":%lu,\"part_pkts\":%lu,\"part_cycles\":%lu,"
				"\"empty_calls\":%lu,\"empty_cycles\":%lu,\"preempted\":%lu}",
				k ? "," : "", (unsigned long)t->full_calls,
				(unsigned long)t->full_pkts, (unsigned long)t->full_cyc,
				(unsigned long)t->part_calls, (unsigned long)t->part_pkts,
				(unsigned long)t->part_cyc, (unsigned long)t->empty_calls,
				(unsigned long)t->empty_cyc, (unsigned long)t->preempted);
		}
		fprintf(f, "]}");
		first = 0;
	}
	fprintf(f, "]}\n");
	fclose(f);
}
