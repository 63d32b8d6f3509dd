#!/usr/bin/env bash
# The main job: builds librte_net_mana.so and runs dpdk-testpmd with it on a
# fake MANA PCI function (7870:00:00.0, as on Azure), showing the probe.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p net_mana --lib
pmd=$PWD/target/release/librte_net_mana.so

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dev=$root/7870:00:00.0
mkdir -p "$dev" "$root/drivers/mana"
printf '0x1414\n' > "$dev/vendor"; printf '0x00ba\n' > "$dev/device"
printf '0x1414\n' > "$dev/subsystem_vendor"; printf '0x0001\n' > "$dev/subsystem_device"
printf '0x020000\n' > "$dev/class"; printf '0\n' > "$dev/numa_node"
for _ in 1 2 3 4 5 6; do echo "0x0 0x0 0x0"; done > "$dev/resource"
ln -s ../drivers/mana "$dev/driver"

dpdk-pmdinfo.py "$pmd"
SYSFS_PCI_DEVICES=$root timeout 60 dpdk-testpmd --no-huge -m 1024 --file-prefix=net-mana-demo \
    -d "$pmd" --vdev=7870:00:00.0,mac=00:0d:3a:76:3b:d0 -- -i --total-num-mbufs=8192 </dev/null
