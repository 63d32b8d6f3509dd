#!/usr/bin/env bash
# The soak (issues 15 and 23): multi-queue testpmd traffic through two
# ports of the emulated adapter while the device is reset at random
# intervals, then hot removed and added back, checking that every reset
# recovers with its events in order, nothing is lost but what the resets
# took, no mbuf leaks and the resident memory stays flat. With secondaries,
# DPDK secondary processes run beside the primary (a forwarding testpmd on
# queue 1, restarted now and then, half of the restarts during a recovery;
# and with 2, a monitor running dpdk-proc-info and dpdk-dumpcap in turn);
# hot plug cycles and lying-device episodes can be mixed in between the
# resets. Not part of the timed suite (a 20-reset, one-hot-plug version of
# it is: tests/soak.rs).
#
#   scripts/soak.sh [--resets N | --minutes M] [--hotplug H] [--seed S]
#                   [--secondaries 0|1|2] [--hotplug-rate R] [--lie-rate R]
#                   [--restart-rate R]
#
# Defaults: 1000 resets, 3 hot plug cycles after them, a fixed seed, no
# secondaries, nothing mixed in. --minutes resets at random intervals
# (10-300 ms apart, each device outage 10-200 ms) for that long instead of
# a count. The rates are per 1000 resets: hot plug cycles and lying
# episodes mixed in between the resets, and restarts of the forwarding
# secondary (default 20). Prints the driver's and the soak's progress,
# and last:
#   soak: <n> resets, <r> recovered, <d> deviations, <l> mbufs leaked, rss <start> -> <end> KiB, longest recovery <ms> ms[; forwarding secondary: ...; monitor: ...; faults: ...]
set -euo pipefail
cd "$(dirname "$0")/.."

resets=1000 minutes=0 hotplug=3 seed=$((0x5eed1234abcd))
secondaries=0 hotplug_rate=0 lie_rate=0 restart_rate=20
usage="usage: $0 [--resets N | --minutes M] [--hotplug H] [--seed S] [--secondaries 0|1|2] [--hotplug-rate R] [--lie-rate R] [--restart-rate R]"
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
    case "$1" in
        --resets) resets=$2 ;;
        --minutes) minutes=$2 ;;
        --hotplug) hotplug=$2 ;;
        --seed) seed=$2 ;;
        --secondaries) secondaries=$2 ;;
        --hotplug-rate) hotplug_rate=$2 ;;
        --lie-rate) lie_rate=$2 ;;
        --restart-rate) restart_rate=$2 ;;
        *) echo "$usage" >&2; exit 2 ;;
    esac
    shift 2
done
case "$resets$minutes$hotplug$seed$secondaries$hotplug_rate$lie_rate$restart_rate" in
    *[!0-9]*) echo "soak.sh: every option takes a number" >&2; exit 2 ;;
esac
if [ "$secondaries" -gt 2 ]; then
    echo "soak.sh: --secondaries is 0, 1 (a forwarding testpmd) or 2 (and a monitor)" >&2
    exit 2
fi

# The preload library is an example target: build it with the test.
cargo build --release -q -p mana-emu --examples
log=target/soak-$(date +%Y%m%d-%H%M%S)-$$.log
set +e
SOAK_RESETS=$resets SOAK_SECONDS=$((minutes * 60)) SOAK_HOTPLUG=$hotplug SOAK_SEED=$seed \
    SOAK_SECONDARIES=$secondaries SOAK_HOTPLUG_RATE=$hotplug_rate SOAK_LIE_RATE=$lie_rate \
    SOAK_RESTART_RATE=$restart_rate SOAK_TESTPMD_LOG=$PWD/${log%.log}-testpmd.log \
    cargo test --release -q --test soak -- --nocapture --test-threads=1 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
echo "soak.sh: full output in $log"
grep -E '^soak: [0-9]+ resets, [0-9]+ recovered' "$log" | tail -1
exit "$status"
