#!/usr/bin/env bash
# Runs every test of the workspace: formatting and lints, unit and property
# tests, the layout check against the C compiler, and the dpdk-testpmd
# integration tests. Expects scripts/setup.sh to have run.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo fmt --all -- --check
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
