#!/usr/bin/env bash
# The main job: builds librte_net_mana.so and the software MANA device, then
# runs dpdk-testpmd with the driver on an emulated adapter (7870:00:00.0, two
# ports wired to each other, two queues each): io forwarding, a service
# reset in the middle (recovered automatically), then one screen: per port
# the frames and bytes testpmd counted against what the device counted, the
# reset's events, recovery time, frames lost and mbufs in use, and PASS or
# FAIL (exit status 0 or 1). One line per phase before that; the build's
# and testpmd's own output go to the log whose path the screen ends with.
#
#   scripts/demo.sh [--log <file>]     (default target/demo-<date>.log)
set -euo pipefail
cd "$(dirname "$0")/.."
log=$PWD/target/demo-$(date +%Y%m%d-%H%M%S).log
case "${1:-}" in
    --log) log=$2 ;;
    "") ;;
    *) echo "usage: $0 [--log <file>]" >&2; exit 2 ;;
esac
mkdir -p "$(dirname "$log")" target
build_log=$log.build
build() {
    if ! "$@" >>"$build_log" 2>&1; then
        tail -n 30 "$build_log" >&2
        echo "demo.sh: FAIL: the build failed ($*); its output is in $build_log" >&2
        exit 1
    fi
}
: >"$build_log"
echo "[1/6] building the driver, librte_net_mana.so (release; a few minutes the first time)"
build cargo build --release --locked -p net_mana --lib
echo "[2/6] building the software MANA device and the demo's runner"
build cargo build --release --locked -p mana-emu --examples --bins
exec target/release/mana-demo --log "$log" --pmd "$PWD/target/release/librte_net_mana.so"
