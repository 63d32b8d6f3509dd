#!/usr/bin/env bash
# Builds the driver against each DPDK release and runs its tests there.
#
# Usage: scripts/matrix.sh [VERSION...]   (default: 22.11 23.11 24.11 25.11 26.07
#                                          meson install)
#
# 22.11 is Debian bookworm's DPDK (scripts/setup.sh): the whole test suite
# runs on it, in the default target directory. Every other release is built
# from its tarball by scripts/dpdk.sh (cached under /var/cache/net-mana) and
# builds in target/dpdk-matrix, which they share: the dependencies and the
# emulator build once, and build.rs reruns when PKG_CONFIG_PATH names
# another DPDK, so only the driver and its tests rebuild per version (about
# 2.5 minutes less per version on a fresh clone); the DPDK under test is chosen through the environment
# only: PKG_CONFIG_PATH (build), PATH (dpdk-testpmd), LD_LIBRARY_PATH
# (DPDK's libraries) and NET_MANA_UPSTREAM_PMD (DPDK's own C net/mana, for
# the tests that compare against it). On those releases the tests run are
# the unit and layout tests, probe and devargs, forwarding with exact
# counters, queue states, reset recovery and failover, and the C driver's
# tests on the emulated device; on 26.07 also DPDK 26.07's netvsc with our
# driver as its VF.
#
# Two more entries test the meson builds: "meson" runs tests/meson/subproject.sh
# (DPDK 26.07 as our subproject, and us as a subproject beside it in an
# application; both builds run on the emulated adapter), "install" runs
# tests/meson/install.sh (`ninja install` puts the plugin where bookworm's EAL
# autoloads it, and testpmd probes it without -d).
#
# Prints one line per entry, "dpdk <version>: <passed> passed, <failed>
# failed" (or "meson subproject (dpdk 26.07): ...", "meson install (dpdk
# 22.11): ..."), and exits non-zero when anything failed. Each entry's
# output is in target/matrix/<entry>.log.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
CACHE=${NET_MANA_CACHE:-/var/cache/net-mana}

if [ $# -gt 0 ]; then
    versions=("$@")
else
    versions=(22.11 $(scripts/dpdk.sh --list) meson install)
fi

# The tests of the driver run on every release (the full suite on 22.11).
SUBSET=(-p net_mana --lib --test probe --test devargs_prop --test forwarding
        --test queue_state --test reset --test failover)
# DPDK's own C driver on the emulated device.
C_DRIVER=(-p mana-emu --test upstream_testpmd)

mkdir -p target/matrix
status=0

# Sums "test result:" lines; a cargo that failed without any failed test
# (a build error, a test binary that died) counts as one failure.
count() {
    local log=$1 rc=$2 passed failed
    passed=$(grep -o '^test result: [A-Za-z]*\. [0-9]* passed' "$log" | awk '{s += $4} END {print s + 0}')
    failed=$(grep -o '[0-9]* failed;' "$log" | awk '{s += $1} END {print s + 0}')
    if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        failed=1
        echo "matrix: cargo failed without a failing test (build error?): see $log" >&2
    fi
    echo "$passed $failed"
}

run_version() {
    local v=$1 log=$REPO/target/matrix/dpdk-$1.log rc=0
    : >"$log"
    if [ "$v" = 22.11 ]; then
        (
            unset PKG_CONFIG_PATH LD_LIBRARY_PATH NET_MANA_UPSTREAM_PMD CARGO_TARGET_DIR NET_MANA_PMD
            # target/debug/librte_net_mana.so, for the emulator's tests that
            # load our plugin from there.
            cargo build --locked -p net_mana --lib
            cargo test --workspace --locked --no-fail-fast -- --test-threads=1
        ) >>"$log" 2>&1 || rc=$?
    else
        local prefix
        if ! prefix=$(scripts/dpdk.sh "$v" 2>>"$log"); then
            echo "matrix: building DPDK $v failed: see $log" >&2
            echo "0 1"
            return
        fi
        local top
        top=$(dirname "$prefix")
        (
            export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
            export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
            export PATH=$prefix/bin:$PATH
            export CARGO_TARGET_DIR=$REPO/target/dpdk-matrix
            export NET_MANA_UPSTREAM_PMD=$top/reference/librte_net_mana_c.so
            r=0
            unset NET_MANA_PMD
            cargo build --locked -p net_mana --lib -p mana-emu --examples --bins || exit 1
            cargo test --locked --no-fail-fast "${SUBSET[@]}" -- --test-threads=1 || r=1
            cargo test --locked --no-fail-fast "${C_DRIVER[@]}" -- --test-threads=1 || r=1
            if [ "$v" = 26.07 ]; then
                # The newest netvsc (tests/netvsc.rs *_newest_netvsc) with
                # our driver just built for it.
                NET_MANA_DPDK_26_07_PREFIX=$prefix \
                NET_MANA_PMD_26_07=$CARGO_TARGET_DIR/debug/librte_net_mana.so \
                    cargo test --locked --no-fail-fast -p net_mana --test netvsc \
                    -- newest_netvsc --test-threads=1 || r=1
            fi
            exit $r
        ) >>"$log" 2>&1 || rc=$?
    fi
    sed -n 's/^test \(.*\) \.\.\. FAILED$/matrix: dpdk '"$v"' failed: \1/p' "$log" >&2
    count "$log" "$rc"
}

# A script test: one passed or one failed.
run_script() {
    local log=$1
    shift
    if "$@" >"$log" 2>&1; then echo "1 0"; else tail -20 "$log" >&2; echo "0 1"; fi
}

for v in "${versions[@]}"; do
    start=$SECONDS
    case $v in
    meson)
        name="meson subproject (dpdk 26.07)" log=target/matrix/meson.log
        read -r passed failed < <(run_script "$log" tests/meson/subproject.sh 26.07) ;;
    install)
        name="meson install (dpdk 22.11)" log=target/matrix/install.log
        read -r passed failed < <(run_script "$log" tests/meson/install.sh) ;;
    *)
        name="dpdk $v" log=target/matrix/dpdk-$v.log
        read -r passed failed < <(run_version "$v") ;;
    esac
    echo "$name: $passed passed, $failed failed"
    echo "matrix: $name took $((SECONDS - start)) s (log: $log)" >&2
    [ "$failed" -eq 0 ] || status=1
done
exit $status
