/*
 * The guest tier's verbs check (scenario rdma-mr): through the real
 * libibverbs and libmana (rdma-core 44) and the kernel's mana_ib, opens the
 * first RDMA device, allocates a PD and registers a buffer filled with a
 * known pattern as a memory region, prints what the device must hold, and
 * keeps it all until the host has checked it (the file named by argv[1]
 * appears), then tears it down.
 *
 * Output lines: "mr lkey=0x... addr=0x... len=N seed=N", then "done".
 * Built by scripts/guest-setup.sh against the host's (bookworm) libibverbs.
 */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define LEN 200000 /* above malloc's mmap threshold: page + 16 bytes */

static void fail(const char *what)
{
	perror(what);
	exit(1);
}

int main(int argc, char **argv)
{
	const char *done = argc > 1 ? argv[1] : "/tmp/mr-done";
	unsigned seed = (unsigned)getpid();
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (!list || n < 1)
		fail("ibv_get_device_list");
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx)
		fail("ibv_open_device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		fail("ibv_alloc_pd");
	uint8_t *buf = malloc(LEN);
	if (!buf)
		fail("malloc");
	for (size_t i = 0; i < LEN; i++)
		buf[i] = (uint8_t)(i * 131 + seed);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		fail("ibv_reg_mr");
	printf("mr lkey=%#x addr=%#lx len=%d seed=%u\n", mr->lkey,
	       (unsigned long)buf, LEN, seed & 0xff);
	fflush(stdout);
	for (int i = 0; i < 600 && access(done, F_OK) != 0; i++)
		usleep(100000);
	if (ibv_dereg_mr(mr))
		fail("ibv_dereg_mr");
	if (ibv_dealloc_pd(pd))
		fail("ibv_dealloc_pd");
	if (ibv_close_device(ctx))
		fail("ibv_close_device");
	ibv_free_device_list(list);
	free(buf);
	printf("done\n");
	return 0;
}
