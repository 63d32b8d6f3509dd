/* SPDX-License-Identifier: BSD-3-Clause
 *
 * Asks the software MANA device inside this process (LD_PRELOADed
 * libmana_emu.so) for a fault on the PCI device $VF_PCI, over its control
 * socket in $MANA_EMU_RUN_DIR. Returns 0 once the device has taken it.
 */
#ifndef NET_MANA_TEST_EMU_FAULT_H
#define NET_MANA_TEST_EMU_FAULT_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static inline int emu_fault(const char *fault)
{
	const char *run_dir = getenv("MANA_EMU_RUN_DIR");
	const char *pci = getenv("VF_PCI");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char req[256], rep[256];
	int fd, n;

	if (run_dir == NULL || pci == NULL)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/mana-emu-%d.sock", run_dir, (int)getpid());
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("emulator control socket");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	n = snprintf(req, sizeof(req),
		     "{\"cmd\":\"fault\",\"fault\":{\"fault\":\"%s\",\"pci\":\"%s\"},\"trigger\":\"now\"}\n",
		     fault, pci);
	if (write(fd, req, n) != n || read(fd, rep, sizeof(rep) - 1) <= 0) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

#endif
