#!/usr/bin/env bash
# Builds the Debian package (debian/) and installs it into a clean chroot of
# this machine's Debian release (bookworm), where apt resolves its Depends:
#
#   1. copies the tree (git's tracked and untracked, not ignored, files) to
#      target/deb/src and runs `dpkg-buildpackage -us -uc -b` there, cargo's
#      target directory kept in target/deb/cargo: target/deb/net-mana-pmd_*.deb;
#   2. a minimal chroot (debootstrap --variant=minbase), built once and cached
#      in /var/cache/net-mana/deb-chroot with the .debs apt downloads, copied
#      afresh to target/deb/root;
#   3. `apt-get install ./net-mana-pmd_*.deb` in that copy, then checks that
#      the package is installed, that its plugin is in the DPDK plugin
#      directory the package was built for, and that every library the
#      plugin links resolves (`ldd`: nothing "not found"), with only the
#      packages apt pulled in for the Depends line; then installs `dpdk`
#      (dpdk-testpmd) for the run.
#
# tests/package.rs runs it, then dpdk-testpmd without -d in the chroot on the
# emulated device (tests/package/in-root.sh). Needs root. The last lines
# printed are `deb: <file>`, `plugin: <path>`, `root: <dir>`.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
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
rm -rf "$ROOT"
cp -a "$BASE" "$ROOT"
flock -u 9
cp "$deb" "$ROOT/tmp/"
log "clean $SUITE chroot in $ROOT ($(( $(date +%s) - t1 )) s)"

# --- 3. install, check, add testpmd ---------------------------------------
t2=$(date +%s)
unshare --mount --propagation private -- bash -s "$ROOT" "$C/archives" "$(basename "$deb")" "$pmd" "$PKG" <<'EOS' || fail "installing in the chroot (above)"
set -euo pipefail
root=$1 archives=$2 deb=$3 pmd=$4 pkg=$5
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --bind "$archives" "$root/var/cache/apt/archives"
apt_get() {
    DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get -o APT::Sandbox::User=root \
        -o Dpkg::Use-Pty=0 "$@" >>"$root/tmp/apt.log" 2>&1
}
install() {
    # The chroot's package lists may be older than the archive: refresh once.
    apt_get install -y --no-install-recommends "$@" || { apt_get update && apt_get install -y --no-install-recommends "$@"; } || {
        tail -n 20 "$root/tmp/apt.log" >&2
        echo "deb.sh: apt-get install $* failed in the chroot" >&2
        exit 1
    }
}
before=$(chroot "$root" dpkg-query -W -f='${Package}\n' | sort)
install "/tmp/$deb"
status=$(chroot "$root" dpkg-query -W -f='${Status}' "$pkg")
[ "$status" = "install ok installed" ] || { echo "deb.sh: $pkg is '$status' after apt-get install" >&2; exit 1; }
added=$(comm -13 <(echo "$before") <(chroot "$root" dpkg-query -W -f='${Package}\n' | sort) | grep -vx "$pkg" | tr '\n' ' ')
echo "deb.sh: apt installed $pkg with: $added"
owner=$(chroot "$root" dpkg-query -S "$pmd" | cut -d: -f1)
[ "$owner" = "$pkg" ] || { echo "deb.sh: $pmd belongs to '$owner', not $pkg" >&2; exit 1; }
# Every library the plugin links, found with what the Depends line pulled in.
libs=$(chroot "$root" ldd "$pmd")
if echo "$libs" | grep -q 'not found'; then
    echo "deb.sh: with $pkg's dependencies installed, the plugin still lacks:" >&2
    echo "$libs" | grep 'not found' >&2
    exit 1
fi
echo "deb.sh: ldd $pmd: every library resolved ($(echo "$libs" | wc -l) entries)"
install dpdk
EOS
log "installed in $(( $(date +%s) - t2 )) s"
echo "deb: $deb"
echo "plugin: $pmd"
echo "root: $ROOT"
