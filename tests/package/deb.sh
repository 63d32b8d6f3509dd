#!/usr/bin/env bash
# Builds the Debian package (debian/) and installs it into a clean chroot of
# this machine's Debian release (bookworm), where apt resolves its Depends:
#
#   1. copies the tree (git's tracked and untracked, not ignored, files) to
#      target/deb/src and runs `dpkg-buildpackage -us -uc -b` there, cargo's
#      target directory kept in target/deb/cargo: target/deb/net-mana-pmd_*.deb;
#   2. two cached read-only layers in /var/cache/net-mana/deb-chroot (built
#      once, with the .debs apt fetched): a minimal chroot (debootstrap
#      --variant=minbase) and, over it, dpdk-dev (bookworm's dpdk-testpmd);
#   3. in a fresh overlay of the bare base (tests/package/overlay.sh):
#      `apt-get install ./net-mana-pmd_*.deb`; the package is installed,
#      owns its plugin, and every library the plugin links resolves (`ldd`)
#      with only what apt pulled in for the Depends line;
#   4. the same in a fresh overlay of the base with dpdk-dev: the chroot
#      tests/package.rs runs dpdk-testpmd in, without -d, on the emulated
#      device (tests/package/in-root.sh mounts it again).
#
# Needs root. The last lines printed are `deb: <file>`, `plugin: <path>`,
# and the overlay to run in: `lowers:`, `upper:`, `root: <mount point>`.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${NET_MANA_CACHE:-/var/cache/net-mana}
OUT=$REPO/target/deb
C=$CACHE/deb-chroot
. /etc/os-release
SUITE=${VERSION_CODENAME:-bookworm}
BASE=$C/$SUITE
ROOT=$OUT/root
PKG=net-mana-pmd

log() { echo "deb.sh: $*"; }
fail() { echo "deb.sh: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, chroot, mount)"
mkdir -p "$OUT" "$C/archives/partial"

# --- 1. the package ---------------------------------------------------------
t0=$(date +%s)
log "copying the tree to $OUT/src"
python3 - "$REPO" "$OUT/src" <<'PY'
# Mirror git's file list into dst: unchanged files keep their mtime (cargo's
# fingerprints), files gone from the tree go from the copy.
import os, shutil, subprocess, sys
src, dst = sys.argv[1], sys.argv[2]
names = subprocess.run(["git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       check=True, capture_output=True).stdout.split(b"\0")
keep = set()
for n in filter(None, (x.decode() for x in names)):
    s, d = os.path.join(src, n), os.path.join(dst, n)
    if not os.path.lexists(s):
        continue
    keep.add(n)
    st = os.lstat(s)
    try:
        dt = os.lstat(d)
        if dt.st_size == st.st_size and int(dt.st_mtime) == int(st.st_mtime) and dt.st_mode == st.st_mode:
            continue
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(d), exist_ok=True)
    if os.path.lexists(d):
        os.unlink(d)
    if os.path.islink(s):
        os.symlink(os.readlink(s), d)
    else:
        shutil.copy2(s, d)
for dirpath, dirnames, filenames in os.walk(dst):
    rel = os.path.relpath(dirpath, dst)
    if rel == "debian" or rel.startswith("debian" + os.sep):
        continue  # dpkg-buildpackage's own files, cleaned by debian/rules clean
    for f in filenames:
        n = os.path.normpath(os.path.join(rel, f))
        if n not in keep:
            os.unlink(os.path.join(dirpath, f))
PY
rm -f "$OUT"/*.deb "$OUT"/*.buildinfo "$OUT"/*.changes
log "dpkg-buildpackage -us -uc -b (log: $OUT/build.log)"
if ! (cd "$OUT/src" && CARGO_TARGET_DIR=$OUT/cargo dpkg-buildpackage -us -uc -b) >"$OUT/build.log" 2>&1; then
    tail -n 30 "$OUT/build.log" >&2
    fail "dpkg-buildpackage failed; its output is in $OUT/build.log"
fi
deb=$(ls "$OUT"/${PKG}_*.deb)
pmd=$(dpkg-deb -c "$deb" | awk '$6 ~ /\/librte_net_mana[^/]*\.so$/ { sub(/^\./, "", $6); print $6 }')
log "built $(basename "$deb") in $(( $(date +%s) - t0 )) s: $pmd"
log "Depends: $(dpkg-deb -f "$deb" Depends)"
want_dir=$(printf '#include <rte_build_config.h>\nRTE_EAL_PMD_PATH\n' |
    cc -E -P $(pkg-config --cflags libdpdk) - | tail -n 1 | tr -d '"')
[ "$(dirname "$pmd")" = "$want_dir" ] ||
    fail "the package installs $pmd, not into $want_dir (RTE_EAL_PMD_PATH of the DPDK built against)"

# --- 2. a clean chroot ------------------------------------------------------
t1=$(date +%s)
exec 9>"$C/.lock"
flock 9
stamp="v1 $SUITE minbase"
if [ ! -f "$BASE/.net-mana-base" ] || [ "$(cat "$BASE/.net-mana-base")" != "$stamp" ]; then
    mapfile -t archive < <(python3 "$REPO/scripts/lib/debian_archive.py" "$SUITE")
    main_uri="" sec_uri=""
    for line in "${archive[@]}"; do
        case "$line" in
            main\ *) main_uri=${line#main } ;;
            security\ *) sec_uri=${line#security } ;;
        esac
    done
    [ -n "$main_uri" ] || fail "no Debian archive for $SUITE in this machine's apt sources"
    log "debootstrap --variant=minbase $SUITE from $main_uri into $BASE (~2 min, once)"
    rm -rf "$BASE"
    debootstrap --variant=minbase "$SUITE" "$BASE" "$main_uri" >"$C/debootstrap.log" 2>&1 || {
        tail -n 20 "$C/debootstrap.log" >&2
        fail "debootstrap failed; its output is in $C/debootstrap.log"
    }
    rm -f "$BASE/etc/apt/sources.list"
    {
        printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
            "$main_uri" "$SUITE" "$SUITE"
        if [ -n "$sec_uri" ]; then
            printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
                "$sec_uri" "$SUITE"
        fi
    } >"$BASE/etc/apt/sources.list.d/debian.sources"
    chroot "$BASE" apt-get -qq update
    # The chroot's apt keeps the .debs it fetches in $C/archives (bind-mounted).
    rm -rf "$BASE/var/cache/apt/archives"/*.deb
    echo "$stamp" >"$BASE/.net-mana-base"
fi
# testpmd's layer: dpdk-dev (bookworm's dpdk-testpmd is in it, with every
# DPDK library) installed over the base, once.
LAYER=$C/$SUITE-dpdk-dev
lstamp="v1 dpdk-dev $(cat "$BASE/.net-mana-base")"
if [ ! -f "$LAYER/.net-mana-layer" ] || [ "$(cat "$LAYER/.net-mana-layer")" != "$lstamp" ]; then
    log "installing dpdk-dev in a layer over the base, $LAYER (once)"
    rm -rf "$LAYER"
    NET_MANA_BINDS="$C/archives=/var/cache/apt/archives" \
        "$HERE/overlay.sh" "$BASE" "$LAYER" "$C/mnt" "$HERE/install.sh" "$C/mnt" dpdk-dev ||
        fail "installing dpdk-dev in the chroot (above)"
    echo "$lstamp" >"$LAYER/.net-mana-layer"
fi
flock -u 9
log "cached chroots ready ($(( $(date +%s) - t1 )) s)"

# --- 3. and 4. install and check ---------------------------------------------------
# Each in a fresh writable layer (the chroot is clean every run).
t2=$(date +%s)
rm -rf "$OUT/deps" "$OUT/run"
mkdir -p "$OUT/pkg"
cp "$deb" "$OUT/pkg/"
export NET_MANA_BINDS="$C/archives=/var/cache/apt/archives $OUT/pkg=/tmp/pkg"
# On the bare base: apt resolves the Depends line; the plugin's libraries
# must all be there afterwards.
"$HERE/overlay.sh" "$BASE" "$OUT/deps" "$OUT/deps-root" \
    "$HERE/install.sh" "$OUT/deps-root" "/tmp/pkg/$(basename "$deb")" --check "$PKG" "$pmd" ||
    fail "installing $(basename "$deb") in a clean $SUITE chroot (above)"
# Where testpmd runs: the base with dpdk-dev, and the package.
"$HERE/overlay.sh" "$LAYER/data:$BASE" "$OUT/run" "$ROOT" \
    "$HERE/install.sh" "$ROOT" "/tmp/pkg/$(basename "$deb")" --check "$PKG" "$pmd" ||
    fail "installing $(basename "$deb") beside dpdk-dev (above)"
log "installed and checked in $(( $(date +%s) - t2 )) s"
echo "deb: $deb"
echo "plugin: $pmd"
echo "lowers: $LAYER/data:$BASE"
echo "upper: $OUT/run"
echo "root: $ROOT"
