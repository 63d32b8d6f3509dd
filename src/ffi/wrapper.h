/* Headers the driver binds to: DPDK 22.11 or later (public + driver SDK) and
 * rdma-core (libibverbs + libmana). Bindgen reads this file. */
#include <rte_common.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_memzone.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_udp.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <rte_alarm.h>
#include <rte_devargs.h>
#include <rte_dev.h>
#include <rte_bus_pci.h>
#include <ethdev_driver.h>
#include <ethdev_pci.h>
#include <bus_pci_driver.h>
#include <infiniband/verbs.h>
#include <infiniband/manadv.h>
#include "shim.h"
