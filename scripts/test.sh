#!/usr/bin/env bash
# Runs every test: formatting and lints, unit and property tests, the layout
# check against the C compiler, the dpdk-testpmd integration tests and the
# guest tier on DPDK 22.11 (Debian's; and its stacks `trixie` and `newest`,
# emu-pci/tests/guest_tier.rs), the fuzz smoke run, the loom model
# checks, then the same driver built and tested against DPDK 23.11, 24.11,
# 25.11 and 26.07 and the meson builds (scripts/matrix.sh; NET_MANA_MATRIX=0
# skips it). Expects scripts/setup.sh to have run.
#
# Busy machines: after the normal pass, the timing-sensitive test files
# (netvsc, symmetric_mp, failover, reset, robustness, multi_process, soak
# and the guest tier) run again beside a CPU hog on every core (stress-ng --cpu N at
# normal priority), as on a machine shared with other work; then one
# callgrind row of the benchmark (benches/run.sh --smoke), so it cannot
# silently break. NET_MANA_BUSY_PASS=0 skips that pass. `--busy` (or
# NET_MANA_BUSY=1) runs the whole suite beside the hog instead.
# doc/testing.md says how tests wait so that they pass either way.
set -euo pipefail
cd "$(dirname "$0")/.."

busy=${NET_MANA_BUSY:-0}
for a in "$@"; do
    case $a in
        --busy) busy=1 ;;
        *) echo "test.sh: unknown argument $a (only --busy)" >&2; exit 2 ;;
    esac
done

# The CPU hog: one stress-ng worker per core, its own process group, ended
# with the script however it ends.
hog_pid=
hog_start() {
    command -v stress-ng >/dev/null || {
        echo "test.sh: stress-ng missing (scripts/setup.sh installs it)" >&2
        exit 1
    }
    setsid stress-ng --cpu "$(nproc)" --quiet &
    hog_pid=$!
    echo "test.sh: CPU hog on $(nproc) cores (stress-ng, process group $hog_pid)"
}
hog_stop() {
    if [ -n "$hog_pid" ]; then
        kill -TERM -- "-$hog_pid" 2>/dev/null || true
        wait "$hog_pid" 2>/dev/null || true
        hog_pid=
    fi
}
trap hog_stop EXIT
trap 'hog_stop; exit 130' INT TERM
if [ "$busy" = 1 ]; then
    hog_start
fi

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
# The benchmark's testpmd prompt parsing (benches/perf.py).
/usr/bin/python3 -m unittest -q benches/test_perf.py
cargo clippy --workspace --all-targets --locked -- -D warnings
# The integration tests start dpdk-testpmd processes; run them one at a time
# on this 2-core class of machine.
cargo test --workspace --locked -- --test-threads=1
# The receive path: on a CPU with AVX2 the pass above ran the vector loop
# (NET_MANA_RX_PATH unset chooses it); the burst-level tests run again on
# the scalar one, and the other way round on a CPU without AVX2 (where
# only the scalar loop exists, so there is nothing more to run).
if grep -qw avx2 /proc/cpuinfo; then
    NET_MANA_RX_PATH=scalar cargo test --locked -p net_mana --test lying_device \
        --test rx_metadata --test robustness --test forwarding --test rx_path \
        -- --test-threads=1
    # The transmit path likewise (NET_MANA_TX_PATH unset chose the vector
    # plain run above): the burst-level transmit tests on the scalar one.
    NET_MANA_TX_PATH=scalar cargo test --locked -p net_mana --test lying_device \
        --test robustness --test forwarding --test vlan --test scatter --test tx_path \
        -- --test-threads=1
fi
# The timing-sensitive files again, beside the hog (already running in
# --busy mode, where the pass above was the busy one).
if [ "$busy" != 1 ] && [ "${NET_MANA_BUSY_PASS:-1}" != 0 ]; then
    hog_start
    cargo test --locked -p net_mana --test netvsc --test symmetric_mp --test failover \
        --test reset --test robustness --test multi_process --test soak -- --test-threads=1
    # The 6.12 boot only (the quiet pass above runs the others). Under the
    # hog the 7.3 boot once failed on "Failed to fence RQ 3: -110": the
    # device answered a service reset's teardown late, against the
    # kernel's zero wait; it no longer answers it (emu-pci/README.md).
    cargo test --locked -p mana-pci --test guest_tier -- --test-threads=1 --exact guest_tier
    hog_stop
fi
# The benchmark's one-row check (a few minutes under valgrind; also beside
# the hog in --busy mode).
benches/run.sh --smoke --budget 256
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
