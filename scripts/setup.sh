#!/usr/bin/env bash
# Installs everything net_mana needs on Debian bookworm (run as root):
# DPDK 22.11 with testpmd, rdma-core 44, the bindgen toolchain, test tools,
# and the DPDK source of exactly the installed version (its driver-SDK
# headers are not packaged in libdpdk-dev; the C reference driver is built
# from it in tests). Idempotent.
set -euo pipefail

CACHE=${NET_MANA_CACHE:-/var/cache/net-mana}
PKGS=(libdpdk-dev dpdk-dev dpdk libibverbs-dev ibverbs-providers libclang-dev clang
      meson ninja-build pkg-config valgrind python3-pyelftools iproute2 iputils-ping
      netcat-openbsd tcpdump ethtool dpkg-dev xz-utils)

if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: run as root (it installs Debian packages)" >&2
    exit 1
fi

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# deb-src for bookworm, so the matching DPDK source can be fetched.
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
    cat > /etc/apt/sources.list.d/net-mana-deb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
SRC
    apt-get update -qq
fi

ver=$(dpkg-query -W -f='${Version}' libdpdk-dev)
upstream=${ver%%-*}
src="$CACHE/dpdk-stable-$upstream"
if [ ! -f "$src/lib/ethdev/ethdev_driver.h" ]; then
    mkdir -p "$CACHE"
    ( cd "$CACHE" && apt-get source -qq --download-only "dpdk=$ver" >/dev/null 2>&1 )
    tar -C "$CACHE" -xf "$CACHE/dpdk_${upstream}.orig.tar.xz"
fi
test -f "$src/lib/ethdev/ethdev_driver.h" || { echo "setup.sh: DPDK source not found at $src" >&2; exit 1; }

if ! command -v cargo >/dev/null; then
    echo "setup.sh: cargo (Rust >= 1.81) is required; install it with rustup" >&2
    exit 1
fi
echo "setup.sh: ready (DPDK $ver, source in $src)"
