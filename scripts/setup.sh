#!/usr/bin/env bash
# Installs everything net_mana needs on Debian bookworm (run as root):
# DPDK 22.11 with testpmd, rdma-core 44, the bindgen toolchain, test tools
# (stress-ng: the CPU hog of scripts/test.sh's busy pass), debhelper for the
# Debian package (debian/), the crates of Cargo.lock (`cargo fetch`, so that
# builds, the package's included, need no network afterwards),
# and the DPDK source of exactly the installed version (its driver-SDK
# headers are not packaged in libdpdk-dev; the C reference driver is built
# from it in tests), and the guest tier's pieces (scripts/guest-setup.sh).
# Idempotent.
set -euo pipefail

CACHE=${NET_MANA_CACHE:-/var/cache/net-mana}
PKGS=(libdpdk-dev dpdk-dev dpdk libibverbs-dev ibverbs-providers libclang-dev clang
      meson ninja-build pkg-config valgrind python3-pyelftools iproute2 iputils-ping
      netcat-openbsd tcpdump ethtool dpkg-dev debhelper xz-utils debootstrap stress-ng)

if [ "$(id -u)" -ne 0 ]; then
    echo "setup.sh: run as root (it installs Debian packages)" >&2
    exit 1
fi

# An earlier setup.sh wrote this file without Signed-By, which apt refuses
# next to a deb822 entry with Signed-By; it is ours, so take it back.
rm -f /etc/apt/sources.list.d/net-mana-deb-src.sources

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The DPDK source of exactly the installed version. apt needs deb-src
# entries for it; they are derived from this machine's own apt sources (same
# URIs, suites and Signed-By: a machine may use a local mirror) and used
# through a private apt configuration under $CACHE, so /etc/apt is never
# touched and cannot end up with conflicting entries.
ver=$(dpkg-query -W -f='${Version}' libdpdk-dev)
upstream=${ver%%-*}
src="$CACHE/dpdk-stable-$upstream"
if [ ! -f "$src/lib/ethdev/ethdev_driver.h" ]; then
    . /etc/os-release
    apt_dir="$CACHE/apt"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/parts"
    /usr/bin/python3 "$(dirname "$0")/lib/deb_src.py" "${VERSION_CODENAME:-bookworm}" "$apt_dir/deb-src.sources"
    apt_src=(-o "Dir::Etc::SourceList=$apt_dir/deb-src.sources" -o "Dir::Etc::SourceParts=$apt_dir/parts"
             -o "Dir::State::Lists=$apt_dir/lists" -o APT::Sandbox::User=root)
    apt-get -qq "${apt_src[@]}" update
    ( cd "$CACHE" && apt-get -qq "${apt_src[@]}" source --download-only "dpdk=$ver" >/dev/null )
    tar -C "$CACHE" -xf "$CACHE/dpdk_${upstream}.orig.tar.xz"
fi
test -f "$src/lib/ethdev/ethdev_driver.h" || { echo "setup.sh: DPDK source not found at $src" >&2; exit 1; }

# The guest tier (QEMU with the vfio-user client in a trixie chroot, the
# trixie 6.12 cloud kernel, the guest's userspace): cheap when cached.
"$(dirname "$0")/guest-setup.sh"

if ! command -v cargo >/dev/null; then
    echo "setup.sh: cargo (Rust >= 1.81) is required; install it with rustup" >&2
    exit 1
fi
# Every crate of Cargo.lock into cargo's registry: debian/rules builds with
# --offline.
(cd "$(dirname "$0")/.." && cargo fetch --locked -q)
echo "setup.sh: ready (DPDK $ver, source in $src)"
