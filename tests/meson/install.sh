#!/usr/bin/env bash
# `meson setup build && ninja -C build install` puts the plugin where the
# installed DPDK's EAL autoloads plugins, and dpdk-testpmd then probes
# net_mana on the emulated adapter without -d.
#
# The install is the real command into the real paths, run in a private
# mount namespace in which the directories it writes (the plugin directory
# and /usr/local) are overlays: nothing reaches the machine's file system,
# and other processes never see the plugin. Needs root (unshare, mount).
#
# Usage: tests/meson/install.sh        (build directory: target/meson-install)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
fail() { echo "install.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (a private mount namespace)"

build=$REPO/target/meson-install
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null || fail "meson setup failed"
ninja -C "$build" >"$REPO/target/meson-install.log" 2>&1 ||
    { tail -40 "$REPO/target/meson-install.log" >&2; fail "ninja failed"; }
cargo build --locked -q -p mana-emu --examples --bins

# Where EAL autoloads plugins: the path compiled into librte_eal itself.
eal=$(pkg-config --variable=libdir libdpdk)/librte_eal.so
eal_dir=$(grep -a -o '/[[:alnum:]/._-]*/pmds-[0-9.]*' "$eal" | head -1)
[ -n "$eal_dir" ] || fail "no plugin directory compiled into $eal"
dest=$(meson introspect --installed "$build" | python3 -c \
    'import json,sys; print("\n".join(json.load(sys.stdin).values()))')
plugin=$(echo "$dest" | grep '/librte_net_mana[_a-z]*\.so$') || fail "meson installs no plugin: $dest"
[ "$(dirname "$plugin")" = "$eal_dir" ] ||
    fail "meson installs the plugin as $plugin, but $eal autoloads $eal_dir"
echo "$dest" | while read -r f; do
    case $f in "$eal_dir"/* | /usr/local/*) ;; *) fail "meson would install $f outside the overlays" ;; esac
done

before=$(ls -l "$plugin" 2>/dev/null || true)
run=$(mktemp -d /var/tmp/net-mana-install.XXXXXX)
# EAL leaves its runtime directory behind.
trap 'rm -rf "$run" "/var/run/dpdk/mana-install-$$"' EXIT
mkdir -p "$run/pmd/u" "$run/pmd/w" "$run/local/u" "$run/local/w"
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
export build eal_dir plugin run emu=$REPO/target/debug/examples/libmana_emu.so
unshare -m --propagation private bash -euo pipefail -c '
    mount -t overlay overlay -o lowerdir="$eal_dir",upperdir="$run/pmd/u",workdir="$run/pmd/w" "$eal_dir"
    mount -t overlay overlay -o lowerdir=/usr/local,upperdir="$run/local/u",workdir="$run/local/w" /usr/local
    ninja -C "$build" install >"$run/install.log" 2>&1 || { cat "$run/install.log" >&2; exit 1; }
    test -f "$plugin"
    # No -d: the plugin must come from the autoloaded directory.
    (sleep 6; printf "show port info 0\n"; sleep 2; printf "quit\n") |
        MANA_EMU_CONFIG="$run/emu.toml" SYSFS_PCI_DEVICES="$run/sys/bus/pci/devices" LD_PRELOAD="$emu" \
        timeout 60 dpdk-testpmd --no-huge -m 1024 --iova-mode=va -l 0,1 --file-prefix "mana-install-$$" \
        -a 7870:00:00.0 -- -i --total-num-mbufs=8192 >"$run/testpmd.log" 2>&1 || true
' || fail "installing in the private namespace failed"
[ "$(ls -l "$plugin" 2>/dev/null || true)" = "$before" ] || fail "$plugin changed outside the namespace"
grep -q 'Driver name: net_mana' "$run/testpmd.log" && grep -q 'Firmware-version: .*net_mana-rs' "$run/testpmd.log" ||
    { cat "$run/testpmd.log" >&2; fail "testpmd did not probe our net_mana from $eal_dir"; }
echo "install.sh: ok (installed as $plugin, which EAL autoloads; testpmd without -d probed net_mana)" >&2
