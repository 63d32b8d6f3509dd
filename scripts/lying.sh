#!/usr/bin/env bash
# A device that lies, for long (issue 15): tests/lying_device.rs's main case
# (two ports, two queues each, flowgen traffic) with the emulated device
# corrupting completions and events at random for the whole duration, then
# telling the truth again: testpmd must stay alive, count every lie in its
# xstats, forward again on every queue and give every mbuf back exactly once.
# The timed suite runs the same case until 600 lies are told.
#
#   scripts/lying.sh [--minutes M] [--seed S] [--per-million P] [--kinds K,K...]
#
# Defaults: 10 minutes, the test's seed, 4000 per million completions, every
# kind. Prints the lies told and what the driver counted, and last:
#   lying: <ms> ms, <n> lies told, <c> garbled completions refused, skipped or dropped, mbufs back: yes
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10 seed="" per_million="" kinds=""
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --per-million) per_million=$2; shift 2 ;;
        --kinds) kinds=$2; shift 2 ;;
        *) echo "usage: $0 [--minutes M] [--seed S] [--per-million P] [--kinds K,K...]" >&2; exit 2 ;;
    esac
done
case "$minutes$seed$per_million" in
    *[!0-9]*) echo "lying.sh: --minutes, --seed and --per-million take numbers" >&2; exit 2 ;;
esac

export LYING_MS=$((minutes * 60000))
[ -n "$seed" ] && export LYING_SEED=$seed
[ -n "$per_million" ] && export LYING_PER_MILLION=$per_million
[ -n "$kinds" ] && export LYING_KINDS=$kinds
# The preload library is an example target: build it with the test.
cargo build --release -q -p mana-emu --examples
log=target/lying-$(date +%Y%m%d-%H%M%S).log
set +e
cargo test --release -q --test lying_device -- --nocapture --test-threads=1 \
    the_driver_survives_a_lying_device_and_counts_every_lie 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
echo "lying.sh: full output in $log"
grep -E '^lying: ' "$log" | tail -1
exit "$status"
