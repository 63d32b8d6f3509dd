#!/usr/bin/env bash
# The guest tier alone: boots Debian trixie's 6.12 cloud kernel under QEMU
# (software emulation) with our MANA PCI function attached over vfio-user,
# and runs the real `mana` driver against it. One line per scenario:
#   <scenario>: ok
#   <scenario>: FAILED <reason>   (then the guest's kernel log and the device log)
# Exit status 1 if any scenario failed.
#
#   scripts/guest.sh [-v] [--cpus N] [SCENARIO...]
#
# Needs root (QEMU runs in the cached chroot, the host peer in a network
# namespace) and the pieces scripts/guest-setup.sh caches (scripts/setup.sh
# runs it). MANA_GUEST_BIN names a prebuilt mana-guest (the cargo test uses
# its own); otherwise it is built here. MANA_GUEST_PMD / MANA_GUEST_C_PMD
# name the PMDs the dpdk-* scenarios put in the guest (ours, DPDK 22.11's C
# driver), MANA_GUEST_PREFLIGHT the mana-preflight binary of the preflight
# scenario; otherwise they are built here.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "guest.sh: run as root (chroot, network namespaces)" >&2
    exit 2
fi
bin=${MANA_GUEST_BIN:-}
if [ -z "$bin" ]; then
    cargo build -q --locked -p mana-pci --bin mana-guest
    bin=target/debug/mana-guest
fi
# Our PMD for the dpdk-* scenarios (issue 14), unless one is named.
if [ -z "${MANA_GUEST_PMD:-}" ]; then
    cargo build -q --locked --lib
    export MANA_GUEST_PMD=$PWD/target/debug/librte_net_mana.so
fi
# mana-preflight for the preflight scenario, unless one is named.
if [ -z "${MANA_GUEST_PREFLIGHT:-}" ]; then
    cargo build -q --locked -p mana-preflight --bin mana-preflight
    export MANA_GUEST_PREFLIGHT=$PWD/target/debug/mana-preflight
fi
# DPDK 22.11's own C driver for dpdk-c (bookworm does not ship it): built
# out of tree from the installed DPDK's source, unless one is named. If it
# cannot be built, dpdk-c fails saying so.
if [ -z "${MANA_GUEST_C_PMD:-}" ]; then
    if so=$(tests/upstream/build-c-driver.sh 2>&1 | tail -1) && [ -f "$so" ]; then
        export MANA_GUEST_C_PMD=$so
    else
        echo "guest.sh: tests/upstream/build-c-driver.sh failed ($so): dpdk-c will fail" >&2
    fi
fi
exec "$bin" "$@"
