/* SPDX-License-Identifier: BSD-3-Clause
 *
 * LD_PRELOAD shim for DPDK's symmetric_mp example over netvsc with our port
 * as its VF (tests/symmetric_mp.rs).
 *
 * symmetric_mp (examples/multi_process/symmetric_mp, unchanged up to DPDK
 * 26.07) gives up on a port whose rte_eth_promiscuous_enable() fails. Azure
 * carries no frames for other MACs, so MANA drivers (ours and DPDK's C
 * driver) refuse promiscuous mode with -ENOTSUP, and netvsc returns its VF's
 * answer: the example exits with "Error initialising ports" on Azure.
 * Microsoft's acceptance tests (microsoft/lisa, verify_dpdk_symmetric_mp)
 * therefore build symmetric_mp with that failure logged and ignored (a change
 * proposed to DPDK, dpdk patch series 36143). This shim does the same for
 * the application's own call, leaving the example's source as DPDK ships it.
 *
 * Only the outermost call is changed: netvsc enables promiscuous mode on its
 * VF with the same function, and netvsc must see the VF's real answer.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <rte_ethdev.h>

typedef int (*promisc_fn)(uint16_t);

/* Calls of rte_eth_promiscuous_enable() in progress on this thread. */
static __thread int depth;

int rte_eth_promiscuous_enable(uint16_t port_id)
{
	static promisc_fn real;
	int ret;

	if (real == NULL)
		real = (promisc_fn)dlsym(RTLD_NEXT, "rte_eth_promiscuous_enable");
	if (real == NULL)
		return -ENOSYS;
	depth++;
	ret = real(port_id);
	depth--;
	if (ret == -ENOTSUP && depth == 0) {
		fprintf(stderr,
			"promisc_shim: port %u refused promiscuous mode (-ENOTSUP); going on without it\n",
			port_id);
		return 0;
	}
	return ret;
}
