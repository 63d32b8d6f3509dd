/* SPDX-License-Identifier: BSD-3-Clause */
#ifndef RTE_PMD_MANA_H
#define RTE_PMD_MANA_H

/**
 * @file
 * net_mana: the Microsoft Azure Network Adapter poll-mode driver.
 *
 * The driver registers itself with DPDK's PCI bus from its constructor and
 * is used only through the ethdev API; this header documents the names and
 * values an application may rely on.
 */

/** The PCI driver name, as printed by EAL and dpdk-pmdinfo.py. */
#define RTE_PMD_MANA_DRIVER_NAME "net_mana"

/** Devargs key selecting ports by MAC; repeat it for up to 8 ports. */
#define RTE_PMD_MANA_DEVARG_MAC "mac"

/** Maximum number of mac= devargs per PCI device. */
#define RTE_PMD_MANA_MAX_MACS 8

/** Entries in the RSS redirection table. */
#define RTE_PMD_MANA_RETA_SIZE 64

#endif /* RTE_PMD_MANA_H */
