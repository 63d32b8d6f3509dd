#!/usr/bin/env bash
# The two meson subproject builds, from a clean copy of the tree, with one
# DPDK release's source (default 26.07; scripts/dpdk.sh provides it), and a
# run of what each produced on the emulated adapter:
#
#  1. DPDK as our subproject: `meson setup --force-fallback-for=dpdk` with
#     the DPDK tree at subprojects/dpdk builds DPDK and the driver together;
#     the plugin's install directory is that DPDK's driver_install_path.
#     Run: the forwarding test `io_1q` (exact counters) with that build's
#     dpdk-testpmd and that build's plugin.
#  2. Us as a subproject beside DPDK, in an application (tests/meson/app,
#     configured with --force-fallback-for=dpdk as this machine has Debian's
#     DPDK installed): the application links net_mana statically through
#     `net_mana_dep`.
#     Run: the application, without -d for the driver, sends 32 frames on a
#     loopback port and receives all 32.
#
# Usage: tests/meson/subproject.sh [VERSION]
# Work and build directories: /var/cache/net-mana/meson-subproject-<VERSION>/
# (NET_MANA_CACHE; kept across runs and clones, so a second run rebuilds
# only what changed in the tree, not DPDK; one run at a time, by a lock).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
v=${1:-26.07}
prefix=$(scripts/dpdk.sh "$v")
dpdk_src=$(dirname "$prefix")/src
work=${NET_MANA_CACHE:-/var/cache/net-mana}/meson-subproject-$v
mkdir -p "$work"
exec 9>"$work.lock"
flock 9
fail() { echo "subproject.sh: $*" >&2; exit 1; }

# DPDK's meson runs python3 from PATH and needs elftools (see dpdk.sh).
for py in "$(command -v python3 || true)" /usr/bin/python3; do
    if [ -n "$py" ] && "$py" -c 'import elftools' 2>/dev/null; then
        PATH=$(dirname "$py"):$PATH
        break
    fi
done

# A clean copy of the tree: tracked and new files, nothing ignored or built.
rm -rf "$work/net_mana.new"
mkdir -p "$work/net_mana.new"
# Extracted with the current time as mtime (-m): an older mtime carried over
# from the work tree would make cargo and ninja take a changed file for
# one they have already built.
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -C "$work/net_mana.new" -mxf -
mkdir -p "$work/net_mana.new/subprojects"
ln -s "$dpdk_src" "$work/net_mana.new/subprojects/dpdk"
# Keep the old copy's timestamps where nothing changed (warm rebuilds).
if [ -d "$work/net_mana" ] && diff -r -q --no-dereference "$work/net_mana" "$work/net_mana.new" >/dev/null; then
    rm -rf "$work/net_mana.new"
else
    rm -rf "$work/net_mana"
    mv "$work/net_mana.new" "$work/net_mana"
fi

# Only what testpmd and the tests need from DPDK (its C net/mana is left
# out: the plugin under test is ours).
dpdk_opts=(-Ddpdk:platform=generic -Ddpdk:tests=false -Ddpdk:enable_docs=false
           -Ddpdk:enable_apps=test-pmd -Ddpdk:enable_drivers=bus/pci,bus/vdev,mempool/ring,net/ring
           -Ddpdk:enable_libs=ethdev)
if grep -q "option('enable_kmods'" "$dpdk_src/meson_options.txt"; then
    dpdk_opts+=(-Ddpdk:enable_kmods=false)
fi

echo "subproject.sh: 1. DPDK $v as our subproject" >&2
ours=$work/build-ours
[ -f "$ours/build.ninja" ] ||
    meson setup "$ours" "$work/net_mana" --force-fallback-for=dpdk "${dpdk_opts[@]}" >"$work/setup-ours.log" 2>&1 ||
    { tail -30 "$work/setup-ours.log" >&2; fail "meson setup (DPDK as our subproject) failed"; }
ninja -C "$ours" >"$work/build-ours.log" 2>&1 ||
    { grep -A20 -m3 'FAILED\|error' "$work/build-ours.log" | head -60 >&2; fail "ninja (DPDK as our subproject) failed"; }
testpmd=$ours/subprojects/dpdk/app/dpdk-testpmd
plugin=$ours/librte_net_mana.so
[ -x "$testpmd" ] && [ -f "$plugin" ] || fail "the build produced no $testpmd or $plugin"
# The plugin goes where that DPDK's EAL looks: <prefix>/<driver_install_path>.
pmd_path=$(grep -o '"RTE_EAL_PMD_PATH" *"[^"]*"\|RTE_EAL_PMD_PATH "[^"]*"' \
    "$ours/subprojects/dpdk/rte_build_config.h" | grep -o '"[^"]*"$' | tr -d '"')
installed=$(meson introspect --installed "$ours" | python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin).values()))' | grep '/librte_net_mana.so$')
[ "$installed" = "$pmd_path/librte_net_mana.so" ] ||
    fail "the plugin would be installed as $installed, but this DPDK's EAL loads plugins from $pmd_path"
echo "subproject.sh: plugin install path $installed (EAL's RTE_EAL_PMD_PATH)" >&2

echo "subproject.sh: 2. net_mana as a subproject beside DPDK $v in an application" >&2
rm -rf "$work/app.new"
cp -r tests/meson/app "$work/app.new"
mkdir -p "$work/app.new/subprojects"
ln -s "$dpdk_src" "$work/app.new/subprojects/dpdk"
ln -s "$work/net_mana" "$work/app.new/subprojects/net_mana"
if [ -d "$work/app" ] && diff -r -q --no-dereference "$work/app" "$work/app.new" >/dev/null; then
    rm -rf "$work/app.new"
else
    rm -rf "$work/app" "$work/build-app"
    mv "$work/app.new" "$work/app"
fi
app_build=$work/build-app
[ -f "$app_build/build.ninja" ] ||
    meson setup "$app_build" "$work/app" --force-fallback-for=dpdk "${dpdk_opts[@]}" >"$work/setup-app.log" 2>&1 ||
    { tail -30 "$work/setup-app.log" >&2; fail "meson setup (application) failed"; }
ninja -C "$app_build" >"$work/build-app.log" 2>&1 ||
    { grep -A20 -m3 'FAILED\|error' "$work/build-app.log" | head -60 >&2; fail "ninja (application) failed"; }
[ -f "$app_build/subprojects/net_mana/librte_net_mana.so" ] || fail "the application's build made no plugin"

# Runs: the emulator (built in the default target directory; it does not
# link DPDK) and the tests' binaries, which only launch testpmd.
cargo build --locked -q -p mana-emu --examples --bins
emu=$REPO/target/debug/examples/libmana_emu.so

echo "subproject.sh: run 1: io forwarding, exact counters, through build 1's testpmd and plugin" >&2
mkdir -p "$work/bin"
cat >"$work/bin/dpdk-testpmd" <<EOF
#!/bin/sh
# build 1's testpmd; its buses and mempool driver are not installed, so
# they are loaded from the build tree (EAL loads a -d directory's files
# after the -d files, so the plugin finds the PCI bus it links through
# LD_LIBRARY_PATH).
export LD_LIBRARY_PATH="$ours/subprojects/dpdk/drivers\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
exec "$testpmd" -d "$ours/subprojects/dpdk/drivers" "\$@"
EOF
chmod 0755 "$work/bin/dpdk-testpmd"
PATH=$work/bin:$PATH NET_MANA_PMD=$plugin \
    cargo test --locked -q --test forwarding -- --exact io_1q --test-threads=1 >"$work/run-ours.log" 2>&1 ||
    { tail -60 "$work/run-ours.log" >&2; fail "forwarding through build 1 failed"; }
grep -q '^test result: ok. 1 passed' "$work/run-ours.log" || fail "io_1q did not run: $(tail -5 "$work/run-ours.log")"

echo "subproject.sh: run 2: the application with net_mana linked in" >&2
run=$(mktemp -d /tmp/net-mana-app.XXXXXX)
# EAL leaves its runtime directory behind.
trap 'rm -rf "$run" "/var/run/dpdk/mana-app-$$"' EXIT
cat >"$run/emu.toml" <<EOF
[options]
sysfs_root = "$run/sys"
run_dir = "$run/run"

[[adapter]]
pci = "7870:00:00.0"
ib_name = "mana_0"

[[adapter.port]]
mac = "00:0d:3a:00:00:01"
backend = { kind = "loopback" }
EOF
MANA_EMU_CONFIG=$run/emu.toml SYSFS_PCI_DEVICES=$run/sys/bus/pci/devices LD_PRELOAD=$emu \
    timeout 60 "$app_build/mana_app" --no-huge -m 512 --iova-mode=va -l 0 --file-prefix "mana-app-$$" \
    -d "$app_build/subprojects/dpdk/drivers" -a 7870:00:00.0 >"$work/run-app.log" 2>&1 ||
    { cat "$work/run-app.log" >&2; fail "the application failed"; }
grep -q '^app: driver net_mana$' "$work/run-app.log" && grep -q '^app: sent 32 received 32$' "$work/run-app.log" ||
    { cat "$work/run-app.log" >&2; fail "the application did not forward through net_mana"; }
echo "subproject.sh: ok (DPDK $v: both subproject builds, testpmd forwarding with exact counters, static application)" >&2
