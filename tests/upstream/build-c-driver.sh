#!/bin/bash
# Builds the upstream C MANA PMD (drivers/net/mana) of the *installed* DPDK
# version out of tree, from Debian's dpdk source package, against the
# installed libdpdk-dev and rdma-core headers. Nothing of its code is kept
# in this repository: the source is fetched into /var/cache/net-mana.
#
# Output: $OUT_DIR/librte_net_mana_upstream.so and the testpmd queue-state
# shim $OUT_DIR/libtestpmd_qstate_shim.so (default
# <repo>/target/upstream-c), in a directory that is not world-writable
# (EAL refuses -d plugins from such directories).
#
# Usage: tests/upstream/build-c-driver.sh [--print-path]
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${NET_MANA_CACHE:-/var/cache/net-mana}
OUT_DIR=${OUT_DIR:-$REPO/target/upstream-c}
SO=$OUT_DIR/librte_net_mana_upstream.so

if [ "${1:-}" = "--print-path" ]; then echo "$SO"; exit 0; fi

VERSION=$(dpkg-query -W -f='${Version}' libdpdk-dev)      # e.g. 22.11.11-0+deb12u1
UPSTREAM=${VERSION%%-*}                                     # 22.11.11
SRC=$CACHE/dpdk-stable-$UPSTREAM

# scripts/setup.sh fetches exactly this source (through a private apt
# configuration; /etc/apt is never written). For the releases built by
# scripts/dpdk.sh, DPDK's own build of the driver is used instead
# (NET_MANA_UPSTREAM_PMD, set by scripts/matrix.sh).
if [ ! -f "$SRC/drivers/net/mana/mana.c" ]; then
    echo "build-c-driver: the DPDK $UPSTREAM source is not at $SRC; run scripts/setup.sh" >&2
    exit 1
fi

mkdir -p "$OUT_DIR"
chmod 0755 "$OUT_DIR"
if [ -f "$SO" ] && [ -f "$OUT_DIR/libtestpmd_qstate_shim.so" ] && \
   [ -z "$(find "$SRC/drivers/net/mana" "$0" "$(dirname "$0")/queue-state-shim.c" -newer "$SO" 2>/dev/null | head -1)" ]; then
    echo "$SO"
    exit 0
fi

D=$SRC/drivers/net/mana
# shellcheck disable=SC2046
cc -O2 -g -fPIC -shared -o "$SO.tmp" \
    -include rte_config.h \
    -DALLOW_INTERNAL_API -DALLOW_EXPERIMENTAL_API \
    -DRTE_LOG_DEFAULT_LOGTYPE=pmd.net.mana \
    -I "$SRC/lib/ethdev" -I "$SRC/lib/eal/include" -I "$SRC/drivers/bus/pci" -I "$SRC/lib/kvargs" \
    -I "$D" \
    "$D"/gdma.c "$D"/mana.c "$D"/mp.c "$D"/mr.c "$D"/rx.c "$D"/tx.c \
    $(pkg-config --cflags --libs libdpdk) -libverbs -lmana \
    -Wno-deprecated-declarations
mv "$SO.tmp" "$SO"
chmod 0644 "$SO"

# The testpmd queue-state shim (see queue-state-shim.c).
# shellcheck disable=SC2046
cc -O2 -g -fPIC -shared -o "$OUT_DIR/libtestpmd_qstate_shim.so" "$(dirname "$0")/queue-state-shim.c" \
    -DALLOW_INTERNAL_API -DALLOW_EXPERIMENTAL_API \
    -I "$SRC/lib/ethdev" -I "$SRC/lib/eal/include" \
    $(pkg-config --cflags --libs libdpdk) -ldl -Wno-deprecated-declarations
echo "$SO"
