#!/usr/bin/env bash
# The soak (issue 15): multi-queue testpmd traffic through two ports of the
# emulated adapter while the device is reset at random intervals, then hot
# removed and added back, checking that every reset recovers with its events
# in order, nothing is lost but what the resets took, no mbuf leaks and the
# resident memory stays flat. Not part of the timed suite (a 20-reset,
# one-hot-plug version of it is: tests/soak.rs).
#
#   scripts/soak.sh [--resets N | --minutes M] [--hotplug H] [--seed S]
#
# Defaults: 1000 resets, 3 hot plug cycles, a fixed seed. --minutes resets
# at random intervals (10-300 ms apart, each device outage 10-200 ms) for
# that long instead of a count. Prints the
# driver's and the soak's progress, and last:
#   soak: <n> resets, <r> recovered, <d> deviations, <l> mbufs leaked, rss <start> -> <end> KiB, longest recovery <ms> ms
set -euo pipefail
cd "$(dirname "$0")/.."

resets=1000 minutes=0 hotplug=3 seed=$((0x5eed1234abcd))
while [ $# -gt 0 ]; do
    case "$1" in
        --resets) resets=$2; shift 2 ;;
        --minutes) minutes=$2; shift 2 ;;
        --hotplug) hotplug=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        *) echo "usage: $0 [--resets N | --minutes M] [--hotplug H] [--seed S]" >&2; exit 2 ;;
    esac
done
case "$resets$minutes$hotplug$seed" in
    *[!0-9]*) echo "soak.sh: --resets, --minutes, --hotplug and --seed take numbers" >&2; exit 2 ;;
esac

# The preload library is an example target: build it with the test.
cargo build --release -q -p mana-emu --examples
log=target/soak-$(date +%Y%m%d-%H%M%S)-$$.log
set +e
SOAK_RESETS=$resets SOAK_SECONDS=$((minutes * 60)) SOAK_HOTPLUG=$hotplug SOAK_SEED=$seed \
    SOAK_TESTPMD_LOG=$PWD/${log%.log}-testpmd.log \
    cargo test --release -q --test soak -- --nocapture --test-threads=1 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
echo "soak.sh: full output in $log"
grep -E '^soak: [0-9]+ resets, [0-9]+ recovered' "$log" | tail -1
exit "$status"
