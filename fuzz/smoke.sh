#!/usr/bin/env bash
# Smoke run of every fuzz target under libFuzzer, for the timed suite: the
# committed seeds (fuzz/seeds/<target>), then a few seconds of fuzzing each
# (FUZZ_SMOKE_SECONDS, default 3). New inputs go to a scratch directory, so
# the seeds stay as committed; a crash is saved in fuzz/artifacts/<target>/
# and fails the run. `rx_paths` builds the driver crate, so the build needs
# DPDK's headers and libraries as the driver's own build does.
#
# Needs cargo-fuzz. Without it the run is skipped with a message: CI clones
# have none, and installing it costs minutes (doc/fuzzing.md); the same
# checks run there anyway over the seeds and generated inputs in
# `cargo test -p fuzz-checks`. NET_MANA_FUZZ_INSTALL=1 installs it from
# crates.io instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${FUZZ_SMOKE_SECONDS:-3}

if ! cargo fuzz --version >/dev/null 2>&1; then
    if [ "${NET_MANA_FUZZ_INSTALL:-0}" = 1 ]; then
        cargo install cargo-fuzz --locked
    else
        echo "fuzz/smoke.sh: skipped: cargo-fuzz is not installed (cargo install cargo-fuzz," \
            "or NET_MANA_FUZZ_INSTALL=1 fuzz/smoke.sh); the fuzz targets' checks ran over" \
            "the seeds and generated inputs in cargo test -p fuzz-checks"
        exit 0
    fi
fi
# libFuzzer wants nightly features; a stable toolchain allows them with
# RUSTC_BOOTSTRAP.
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    fuzz=(cargo +nightly fuzz)
else
    fuzz=(env RUSTC_BOOTSTRAP=1 cargo fuzz)
fi

start=$(date +%s)
"${fuzz[@]}" build >/dev/null 2>&1 || "${fuzz[@]}" build
triple=$(rustc -vV | sed -n 's/^host: //p')
bins=fuzz/target/$triple/release
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

for t in $("${fuzz[@]}" list); do
    mkdir -p "$scratch/$t" "fuzz/artifacts/$t" "fuzz/seeds/$t"
    extra=()
    [ "$t" = devargs ] && extra+=(-dict=fuzz/devargs.dict)
    log=$scratch/$t.log
    if ! "$bins/$t" -max_total_time="$secs" -print_final_stats=1 \
        -artifact_prefix="fuzz/artifacts/$t/" "${extra[@]}" \
        "$scratch/$t" "fuzz/seeds/$t" >"$log" 2>&1; then
        tail -30 "$log"
        echo "fuzz/smoke.sh: $t FAILED (input saved in fuzz/artifacts/$t/)" >&2
        exit 1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -E 's/.* cov: ([0-9]+).*/\1/')
    echo "fuzz/smoke.sh: $t: $runs runs, cov $cov, seeds $(ls "fuzz/seeds/$t" | wc -l)"
done
echo "fuzz/smoke.sh: every target passed in $(($(date +%s) - start)) s"
