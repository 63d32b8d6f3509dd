#!/usr/bin/env bash
# The per-packet benchmark of doc/performance.md, in one command:
#
#   benches/run.sh [--update-doc] [perf.py options]
#
# Builds the Rust PMD and the emulator (release), DPDK 22.11's C net/mana
# driver (tests/upstream/build-c-driver.sh) and the pacing shim
# (benches/pace.c), then runs benches/perf.py: callgrind instruction counts
# of both drivers' burst functions, then A/B packets-per-second runs.
# Results: target/bench/results.{md,json} (and, with callgrind's output and
# a copy of every measured binary, target/bench/runs/<time>-<pid>/);
# --update-doc rewrites the result sections of doc/performance.md. Needs scripts/setup.sh's packages
# (valgrind, dpdk-testpmd, libdpdk-dev, the DPDK source). About 12 minutes
# on 2 cores. Not part of the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

# The preload library is an example target of mana-emu; the CLI a bin.
cargo build --release -p net_mana -p mana-emu --lib --bins --examples
bash tests/upstream/build-c-driver.sh >/dev/null
mkdir -p target/bench
# shellcheck disable=SC2046
cc -O2 -g -fPIC -shared -fno-optimize-sibling-calls -fno-ipa-icf -Wall -Wextra \
    -Wno-deprecated-declarations -o target/bench/libbench_pace.so.$$ benches/pace.c \
    $(pkg-config --cflags --libs libdpdk) -ldl
mv target/bench/libbench_pace.so.$$ target/bench/libbench_pace.so
exec /usr/bin/python3 benches/perf.py "$@"
