#!/usr/bin/env bash
# Runs every test: formatting and lints, unit and property tests, the layout
# check against the C compiler, the dpdk-testpmd integration tests and the
# guest tier on DPDK 22.11 (Debian's), the fuzz smoke run, the loom model
# checks, then the same driver built and tested against DPDK 23.11, 24.11,
# 25.11 and 26.07 and the meson builds (scripts/matrix.sh; NET_MANA_MATRIX=0
# skips it). Expects scripts/setup.sh to have run.
set -euo pipefail
cd "$(dirname "$0")/.."

# A run builds about 7 GB (target/: the suite, the matrix, loom) on a
# fresh clone; a full disk shows up as a linker's bus error, so say it first.
free_gb=$(df -P --block-size=1G . | awk 'NR == 2 {print $4}')
if [ "$free_gb" -lt 15 ]; then
    echo "test.sh: warning: only ${free_gb} GB free on $(df -P . | awk 'NR == 2 {print $6}');" \
        "a fresh clone's run builds about 7 GB in target/" >&2
fi

cargo fmt --all -- --check
# setup.sh's deb-src entries, derived from the machine's apt sources.
/usr/bin/python3 -m unittest -q scripts/lib/test_deb_src.py
cargo clippy --workspace --all-targets --locked -- -D warnings
# The integration tests start dpdk-testpmd processes; run them one at a time
# on this 2-core class of machine.
cargo test --workspace --locked -- --test-threads=1
# The fuzz targets: their checks over the committed seeds and generated
# inputs ran in cargo test above (fuzz-checks); this adds a few seconds of
# libFuzzer per target where cargo-fuzz is installed, and says it skipped
# otherwise (doc/fuzzing.md).
fuzz/smoke.sh
# Model checks (loom) of the burst gate and the reset hand-off.
RUSTFLAGS="--cfg loom" cargo test --release --locked -p net_mana --lib \
    --target-dir target/loom -- gate:: handoff::
# The other DPDK releases (22.11 ran above).
if [ "${NET_MANA_MATRIX:-1}" != 0 ]; then
    # shellcheck disable=SC2046
    scripts/matrix.sh $(scripts/dpdk.sh --list) meson install
fi
