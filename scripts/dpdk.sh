#!/usr/bin/env bash
# Builds one DPDK release from its source tarball, the way this project tests
# against it, and installs it under the cache; prints the install prefix.
#
# Usage: scripts/dpdk.sh VERSION      (23.11 | 24.11 | 25.11 | 26.07, or the
#                                      exact release: 23.11.7, 24.11.6, ...)
#        scripts/dpdk.sh --list       the versions it knows, one a line
#
# What is built: the driver SDK (-Denable_driver_sdk=true installs
# ethdev_driver.h and friends), only the drivers the tests use (PCI, vdev
# and VMBus buses, the ring mempool, net/ring, net/failsafe, net/bonding,
# net/netvsc, and net/mana: DPDK's own C driver, the reference the tests
# compare against) and dpdk-testpmd. No unit tests, no docs, no examples.
#
# Layout, under $NET_MANA_CACHE (default /var/cache/net-mana):
#   dpdk-<release>/src       the unpacked source tree
#   dpdk-<release>/install   the install prefix (bin/dpdk-testpmd,
#                            lib/pkgconfig/libdpdk.pc, include/, lib/dpdk/pmds-<ABI>/)
#   dpdk-<release>/reference DPDK's C librte_net_mana.so, moved out of the
#                            autoloaded plugin directory so that a testpmd of
#                            this install loads it only when asked (-d)
# A finished install carries a stamp naming the tarball's checksum and the
# build options; when it matches, nothing is rebuilt.
#
# Tarballs come from $NET_MANA_DPDK_TARBALLS, else from <repo>/../shared/dpdk
# when that directory exists (<repo> being the main checkout of a worktree) (their SHA256SUMS file is checked), else they
# are downloaded from DPDK's release site, https://fast.dpdk.org/rel/.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${NET_MANA_CACHE:-/var/cache/net-mana}
RELEASE_SITE=${NET_MANA_DPDK_SITE:-https://fast.dpdk.org/rel}

# The releases this project builds and tests: series -> exact release.
declare -A RELEASES=([23.11]=23.11.7 [24.11]=24.11.6 [25.11]=25.11.2 [26.07]=26.07)

DRIVERS=bus/pci,bus/vdev,bus/vmbus,mempool/ring,net/ring,net/failsafe,net/bonding,net/netvsc,net/mana

die() { echo "dpdk.sh: $*" >&2; exit 1; }

if [ "${1:-}" = "--list" ]; then
    printf '%s\n' "${!RELEASES[@]}" | sort
    exit 0
fi
[ $# -eq 1 ] || die "usage: scripts/dpdk.sh VERSION (one of: $(printf '%s ' $(printf '%s\n' "${!RELEASES[@]}" | sort)))"

want=$1
release=${RELEASES[$want]:-}
if [ -z "$release" ]; then
    for r in "${RELEASES[@]}"; do [ "$r" = "$want" ] && release=$r; done
fi
[ -n "$release" ] || die "unknown DPDK version '$want'; known: $(printf '%s\n' "${!RELEASES[@]}" | sort | tr '\n' ' ')(22.11 is Debian's, installed by scripts/setup.sh)"

top=$CACHE/dpdk-$release
prefix=$top/install
tarball_name=dpdk-$release.tar.xz

# --- where the tarball comes from ---------------------------------------
tar_dir=${NET_MANA_DPDK_TARBALLS:-}
if [ -z "$tar_dir" ]; then
    # <repo>/../shared/dpdk, where <repo> is this checkout or, for a git
    # worktree, the main checkout it belongs to.
    common=$(git -C "$REPO" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
    for d in "$REPO/../shared/dpdk" ${common:+"$(dirname "$common")/../shared/dpdk"}; do
        if [ -d "$d" ]; then tar_dir=$(cd "$d" && pwd); break; fi
    done
fi

options=(
    --prefix="$prefix" --libdir=lib --buildtype=release -Ddefault_library=shared
    -Dplatform=generic -Denable_driver_sdk=true -Dtests=false -Denable_docs=false
    -Dexamples= -Denable_apps=test-pmd -Denable_drivers=$DRIVERS
)

# The cheap check: a finished install whose stamp matches. The stamp names
# the tarball's checksum when it is known before any work, else the file
# name (a download is verified when it happens).
tarball=
sum=
if [ -n "$tar_dir" ]; then
    tarball=$tar_dir/$tarball_name
    [ -f "$tarball" ] || die "$tarball_name is not in $tar_dir (set NET_MANA_DPDK_TARBALLS to a directory holding it)"
    if [ -f "$tar_dir/SHA256SUMS" ]; then
        sum=$(awk -v f="$tarball_name" '$2 == f || $2 == "*" f { print $1 }' "$tar_dir/SHA256SUMS")
        [ -n "$sum" ] || die "$tar_dir/SHA256SUMS has no line for $tarball_name"
    fi
fi
stamp_text="dpdk $release tarball ${sum:-$tarball_name} options ${options[*]}"
stamp=$prefix/.net-mana-stamp
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ] &&
   [ -x "$prefix/bin/dpdk-testpmd" ] && [ -f "$prefix/lib/pkgconfig/libdpdk.pc" ]; then
    echo "$prefix"
    exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/dpdk-$release.lock"
flock 9
# Another run may have finished the build while this one waited.
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_text" ]; then
    echo "$prefix"
    exit 0
fi

work=$(mktemp -d "$CACHE/.dpdk-$release.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ -z "$tarball" ]; then
    url=$RELEASE_SITE/$tarball_name
    echo "dpdk.sh: downloading $url" >&2
    if ! curl -fsSL --connect-timeout 20 --max-time 600 -o "$work/$tarball_name" "$url"; then
        die "could not download $url (no network access to DPDK's release site?). Put $tarball_name in a directory and set NET_MANA_DPDK_TARBALLS to it."
    fi
    tarball=$work/$tarball_name
    # The release site publishes no checksum file next to each tarball; an
    # incomplete download fails to unpack (xz checks its own CRC).
elif [ -n "$sum" ]; then
    echo "$sum  $tarball" | sha256sum --quiet -c - >&2 ||
        die "$tarball does not match its SHA256SUMS line ($sum)"
fi

# --- unpack: the top directory is dpdk-<release>/ or dpdk-stable-<release>/
echo "dpdk.sh: unpacking $tarball" >&2
mkdir "$work/src"
tar -C "$work/src" -xJf "$tarball" || die "could not unpack $tarball"
srcdir=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d)
[ "$(echo "$srcdir" | wc -l)" = 1 ] && [ -f "$srcdir/meson.build" ] ||
    die "$tarball does not hold one DPDK source tree"

# Options a release does not have are left out (enable_kmods left 24.11).
if grep -q "option('enable_kmods'" "$srcdir/meson_options.txt"; then
    options+=(-Denable_kmods=false)
fi
# Only the mandatory libraries, plus what net/bonding needs (sched for
# rte_bitmap.h, ip_frag).
if grep -q "option('enable_libs'" "$srcdir/meson_options.txt"; then
    options+=(-Denable_libs=sched,ip_frag)
fi

# DPDK's build runs python3 from PATH and needs its elftools module. A pyenv
# (or other) python3 ahead of Debian's usually lacks it; use the first
# python3 that has it.
py_dir=
for py in "$(command -v python3 || true)" /usr/bin/python3; do
    if [ -n "$py" ] && "$py" -c 'import elftools' 2>/dev/null; then
        py_dir=$(dirname "$py")
        break
    fi
done
[ -n "$py_dir" ] || die "no python3 with the elftools module (apt-get install python3-pyelftools)"

echo "dpdk.sh: building DPDK $release into $prefix" >&2
start=$SECONDS
(
    export PATH="$py_dir:$PATH"
    cd "$srcdir"
    meson setup "${options[@]}" "$work/build" >"$work/setup.log" 2>&1 ||
        { tail -30 "$work/setup.log" >&2; exit 1; }
    # Staged, so that a previous install stays usable until this one is
    # complete; the paths compiled in (the plugin directory) are $prefix's.
    DESTDIR="$work/stage" ninja -C "$work/build" install >"$work/build.log" 2>&1 ||
        { grep -B2 -A20 -m3 'FAILED\|error' "$work/build.log" | head -60 >&2; exit 1; }
) || die "building DPDK $release failed (logs were in $work, removed on exit)"
staged=$work/stage$prefix
# DPDK's Python tools (dpdk-pmdinfo.py needs elftools) run with the
# python3 the build used, as distributions' packages do.
sed -i "1s|^#!/usr/bin/env python3\$|#!$py_dir/python3|" "$staged"/bin/*.py

# Every driver the tests load must be there: meson skips a driver whose
# dependencies are missing and says so only in its summary.
pmd_dir=$(ls -d "$staged"/lib/dpdk/pmds-* | head -1)
for so in bus_pci bus_vdev bus_vmbus mempool_ring net_ring net_failsafe net_bond net_netvsc net_mana; do
    [ -e "$pmd_dir/librte_$so.so" ] ||
        die "DPDK $release built without librte_$so (for net_mana: rdma-core's libibverbs-dev and libmana); meson's summary: $(grep -A30 'Drivers Disabled' "$work/setup.log" | head -30)"
done
# DPDK's C net/mana leaves the autoloaded directory: the tests choose which
# MANA driver a testpmd loads.
mkdir -p "$work/reference"
mv "$(readlink -f "$pmd_dir/librte_net_mana.so")" "$work/reference/librte_net_mana_c.so"
rm -f "$pmd_dir"/librte_net_mana.so*

rm -rf "$prefix" "$top/src" "$top/reference"
mkdir -p "$top"
mv "$staged" "$prefix"
mv "$work/reference" "$top/reference"
mv "$srcdir" "$top/src"
echo "$stamp_text" >"$stamp"
echo "dpdk.sh: DPDK $release built and installed in $((SECONDS - start)) s" >&2
echo "$prefix"
