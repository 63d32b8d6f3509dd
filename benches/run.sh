#!/usr/bin/env bash
# The per-packet benchmark of doc/performance.md, in one command:
#
#   benches/run.sh [--update-doc] [perf.py options]
#   benches/run.sh --dpdk RELEASE [--update-doc] [perf.py options]
#
# Builds the Rust PMD and the emulator (release), DPDK 22.11's C net/mana
# driver (tests/upstream/build-c-driver.sh) and the pacing shim
# (benches/pace.c), then runs benches/perf.py: callgrind instruction counts
# of both drivers' burst functions, then A/B packets-per-second runs, then
# A/B cycles-per-packet runs against the emulator's saturating benchmark
# mode (--native-runs; alone: --no-callgrind --pps-runs 0).
# Results: target/bench/results.{md,json} (and, with callgrind's output and
# a copy of every measured binary, target/bench/runs/<time>-<pid>/);
# --update-doc rewrites the result sections of doc/performance.md. Needs scripts/setup.sh's packages
# (valgrind, dpdk-testpmd, libdpdk-dev, the DPDK source). About 18 minutes
# on 2 cores (idle; instruction counts do not depend on load, only the time
# does). `--smoke` runs one callgrind row at --budget and nothing else
# (results in target/bench/smoke/), failing if it fails: scripts/test.sh
# runs it so the benchmark cannot silently break. perf.py exits non-zero
# when any row failed (the other rows are still in the results).
#
# With --dpdk RELEASE (23.11, 24.11, 25.11, 26.07: what scripts/dpdk.sh
# builds, cached), the same rows run on that release: its testpmd and
# libraries, our driver built against its headers (in target/bench-dpdk),
# the pacing shim built against them, and the release's own C net/mana.
# Results: target/bench/versions/<release>.json; --update-doc rewrites the
# per-version table only.
set -euo pipefail
cd "$(dirname "$0")/.."

dpdk=
for ((i = 1; i <= $#; i++)); do
    if [ "${!i}" = --dpdk ]; then
        j=$((i + 1))
        dpdk=${!j:-}
        [ -n "$dpdk" ] || { echo "run.sh: --dpdk needs a release (23.11, 24.11, 25.11, 26.07)" >&2; exit 2; }
    fi
done

# The preload library is an example target of mana-emu; the CLI a bin.
mkdir -p target/bench
pace() { # output, pkg-config path
    # shellcheck disable=SC2046
    cc -O2 -g -fPIC -shared -fno-optimize-sibling-calls -fno-ipa-icf -Wall -Wextra \
        -Wno-deprecated-declarations -o "$1.$$" benches/pace.c \
        $(PKG_CONFIG_PATH=$2 pkg-config --cflags --libs libdpdk) -ldl
    mv "$1.$$" "$1"
}
if [ "$dpdk" = 22.11 ]; then
    echo "run.sh: 22.11 (bookworm's) is the default: run without --dpdk" >&2
    exit 2
fi
if [ -z "$dpdk" ]; then
    cargo build --release -p net_mana -p mana-emu --lib --bins --examples
    bash tests/upstream/build-c-driver.sh >/dev/null
    pace target/bench/libbench_pace.so "${PKG_CONFIG_PATH:-}"
    exec /usr/bin/python3 benches/perf.py "$@"
fi

prefix=$(scripts/dpdk.sh "$dpdk")
c_pmd=$(dirname "$prefix")/reference/librte_net_mana_c.so
[ -f "$c_pmd" ] || { echo "run.sh: $c_pmd missing: rerun scripts/dpdk.sh $dpdk" >&2; exit 1; }
# The emulator does not link DPDK: one build serves every release.
cargo build --release -p mana-emu --lib --bins --examples
PKG_CONFIG_PATH=$prefix/lib/pkgconfig CARGO_TARGET_DIR=target/bench-dpdk \
    cargo build --release -p net_mana --lib
# The driver is copied per release: the next release's build replaces it.
mkdir -p "target/bench/dpdk-$dpdk"
cp target/bench-dpdk/release/librte_net_mana.so "target/bench/dpdk-$dpdk/"
pace "target/bench/dpdk-$dpdk/libbench_pace.so" "$prefix/lib/pkgconfig"
export PATH=$prefix/bin:$PATH
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
export NET_MANA_BENCH_DPDK=$dpdk
export NET_MANA_BENCH_PMD=$PWD/target/bench/dpdk-$dpdk/librte_net_mana.so
export NET_MANA_BENCH_C_PMD=$c_pmd
export NET_MANA_BENCH_PACE=$PWD/target/bench/dpdk-$dpdk/libbench_pace.so
exec /usr/bin/python3 benches/perf.py "$@"
