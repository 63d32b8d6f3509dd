#!/usr/bin/env bash
# One fuzzing campaign, outside the timed suite (doc/fuzzing.md has the
# figures of the recorded ones):
#
#   fuzz/campaign.sh libfuzzer <target> [executions]   (cargo fuzz, libFuzzer)
#   fuzz/campaign.sh afl <target> [executions]         (cargo afl, AFL++)
#
# Runs one process (the machine is shared: no -jobs/-workers beyond one)
# until <executions> inputs have run (default 10,000,000). The working
# corpus is fuzz/corpus/<target> (libFuzzer) or fuzz/afl-out/<target>
# (AFL++), both ignored by git, started from the committed seeds
# fuzz/seeds/<target>; the log goes to fuzz/logs/<engine>-<target>.log and
# the last line printed is the summary recorded in doc/fuzzing.md.
# Needs cargo-fuzz or cargo-afl (cargo install cargo-fuzz / cargo-afl).
set -euo pipefail
cd "$(dirname "$0")/.."

engine=${1:?usage: fuzz/campaign.sh libfuzzer|afl <target> [executions]}
target=${2:?usage: fuzz/campaign.sh libfuzzer|afl <target> [executions]}
runs=${3:-10000000}
seeds=fuzz/seeds/$target
mkdir -p fuzz/logs "$seeds"
log=fuzz/logs/$engine-$target.log

# libFuzzer wants nightly features; a stable toolchain allows them with
# RUSTC_BOOTSTRAP (what CI machines without nightly have).
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    fuzz=(cargo +nightly fuzz)
else
    fuzz=(env RUSTC_BOOTSTRAP=1 cargo fuzz)
fi

start=$(date +%s)
case $engine in
libfuzzer)
    corpus=fuzz/corpus/$target
    mkdir -p "$corpus"
    extra=()
    [ "$target" = devargs ] && extra+=(-dict=fuzz/devargs.dict)
    "${fuzz[@]}" run "$target" "$corpus" "$seeds" -- \
        -runs="$runs" -print_final_stats=1 "${extra[@]}" >"$log" 2>&1 || {
        tail -40 "$log"
        echo "campaign: $target (libFuzzer) FAILED after $(($(date +%s) - start)) s; log $log" >&2
        exit 1
    }
    secs=$(($(date +%s) - start))
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(sed -E 's/.* cov: ([0-9]+).*/\1/' <<<"$done_line")
    ft=$(sed -E 's/.* ft: ([0-9]+).*/\1/' <<<"$done_line")
    corp=$(sed -E 's/.* corp: ([^ ]+).*/\1/' <<<"$done_line")
    echo "campaign: $target libFuzzer: $execs executions in $secs s, cov $cov, ft $ft, corpus $corp, 0 crashes"
    ;;
afl)
    out=fuzz/afl-out/$target
    (cd fuzz/afl && cargo afl build --release >/dev/null 2>&1) || {
        echo "campaign: cargo afl build failed (cargo install cargo-afl)" >&2
        exit 1
    }
    # AFL++ needs at least one input; an empty one will do.
    inputs=$seeds
    if [ -z "$(ls -A "$seeds")" ]; then
        inputs=$(mktemp -d)
        printf '\0' >"$inputs/empty"
    fi
    # A campaign starts from the seeds, not from an earlier campaign's state.
    rm -rf "$out"
    mkdir -p "$(dirname "$out")"
    AFL_SKIP_CPUFREQ=1 AFL_NO_UI=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
        AFL_NO_AFFINITY=1 cargo afl fuzz -i "$inputs" -o "$out" -E "$runs" \
        -- fuzz/afl/target/release/net_mana-afl "$target" >"$log" 2>&1 || {
        tail -40 "$log"
        echo "campaign: $target (AFL++) FAILED; log $log" >&2
        exit 1
    }
    secs=$(($(date +%s) - start))
    stat() { sed -n "s/^$1 *: *//p" "$out/default/fuzzer_stats"; }
    crashes=$(stat saved_crashes)
    echo "campaign: $target AFL++: $(stat execs_done) executions in $secs s, bitmap $(stat bitmap_cvg), corpus $(stat corpus_count), $crashes crashes, $(stat saved_hangs) hangs"
    [ "$crashes" = 0 ] || exit 1
    ;;
*)
    echo "usage: fuzz/campaign.sh libfuzzer|afl <target> [executions]" >&2
    exit 2
    ;;
esac
