#!/usr/bin/env bash
# The main job: builds librte_net_mana.so and the software MANA device, then
# runs dpdk-testpmd with the driver on an emulated adapter (7870:00:00.0, two
# ports wired to each other): io forwarding for a few seconds, a service
# reset in the middle (recovered automatically), then the counters of
# testpmd and of the device side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p net_mana --lib
cargo build --release --locked -p mana-emu --examples --bins
rel=$PWD/target/release
run=$(mktemp -d /tmp/net-mana-demo.XXXXXX)
# EAL leaves its runtime directory behind.
trap 'rm -rf "$run" "/var/run/dpdk/net-mana-demo"' EXIT
cat > "$run/emu.toml" <<TOML
[options]
sysfs_root = "$run/sys"
run_dir = "$run/run"
reset_down_ms = 1000

[[adapter]]
pci = "7870:00:00.0"
ib_name = "mana_0"

[[adapter.port]]
mac = "00:0d:3a:76:3b:d0"
ifname = "eth1"
backend = { kind = "pair", peer = "00:0d:3a:76:3b:d1" }

[[adapter.port]]
mac = "00:0d:3a:76:3b:d1"
ifname = "eth2"
backend = { kind = "pair", peer = "00:0d:3a:76:3b:d0" }
TOML
"$rel/mana-emu" sysfs "$run/emu.toml"
export MANA_EMU_CONFIG=$run/emu.toml
dpdk-pmdinfo.py "$rel/librte_net_mana.so"

# testpmd reads its commands from this script; the reset comes from outside.
{
    sleep 6 # let testpmd come up
    echo "set fwd io"
    echo "start tx_first"
    sleep 2
    "$rel/mana-emu" inject reset --pci 7870:00:00.0 >&2
    sleep 3
    echo "stop"
    echo "start tx_first"
    sleep 2
    echo "stop"
    echo "show port stats all"
    echo "show port xstats 0"
    sleep 1
    "$rel/mana-emu" counters >&2
    echo "quit"
} | SYSFS_PCI_DEVICES=$run/sys/bus/pci/devices \
    LD_PRELOAD=$rel/examples/libmana_emu.so \
    timeout 120 dpdk-testpmd --no-huge -m 1024 --iova-mode=va -l 0,1 --file-prefix=net-mana-demo \
    -d "$rel/librte_net_mana.so" -a 7870:00:00.0,mac=00:0d:3a:76:3b:d0,mac=00:0d:3a:76:3b:d1 \
    -- -i --total-num-mbufs=8192 --rxq=2 --txq=2
