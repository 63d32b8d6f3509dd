#!/usr/bin/env bash
# The guest tier alone: boots a Debian cloud kernel under QEMU (software
# emulation) with our MANA PCI function attached over vfio-user, and runs
# the real `mana` driver, rdma-core and DPDK against it. One line per
# scenario:
#   <scenario>: ok
#   <scenario>: FAILED <reason>   (then the guest's kernel log and the device log)
# Exit status 1 if any scenario failed.
#
#   scripts/guest.sh [-v] [--cpus N] [--stack NAME] [SCENARIO...]
#   scripts/guest.sh [-v] [--cpus N] --matrix [NAME...]
#
# A stack is a kernel, rdma-core and DPDK from one Debian release
# (emu-pci/src/guest/stack.rs): `bookworm` (the default: trixie's 6.12,
# rdma-core 44, DPDK 22.11, every scenario), `trixie` (6.12, rdma-core
# 56.1, DPDK 24.11 with its packaged C net/mana: the RDMA and DPDK
# scenarios) or `trixie-bpo` (trixie's userspace on trixie-backports' 7.3:
# the DPDK scenarios and the device-raised service reset) or `sid` (sid's
# 7.2, rdma-core 65, DPDK 25.11 with its packaged C net/mana: the same
# scenarios as trixie-bpo) or `newest` (the newest cached Debian kernel,
# trixie-backports' 7.3 today, sid's rdma-core 65 and DPDK 26.07 as
# scripts/dpdk.sh builds it, with its C net/mana: the same scenarios).
# MANA_GUEST_STACK names it too. --matrix runs each stack (all, or the ones
# named) in its own guest and prints one line per stack:
#   stack <name>: <n> passed, <m> failed
# with each stack's output in target/guest-matrix/<name>.log.
#
# Needs root (QEMU runs in the cached chroot, the host peer in a network
# namespace) and the pieces scripts/guest-setup.sh caches (scripts/setup.sh
# runs it). MANA_GUEST_BIN names a prebuilt mana-guest (the cargo test uses
# its own); otherwise it is built here. MANA_GUEST_PMD / MANA_GUEST_C_PMD
# name the PMDs the dpdk-* scenarios put in the guest (ours, DPDK 22.11's C
# driver for bookworm), MANA_GUEST_PREFLIGHT the mana-preflight binary of
# the preflight scenario; otherwise they are built here: our PMD against the
# stack's DPDK (bookworm's installed 22.11; for trixie the 24.11 release
# scripts/dpdk.sh caches, the same ABI as trixie's 24.11.8, in
# target/dpdk-matrix like scripts/matrix.sh). MANA_GUEST_DPDK names the
# DPDK install the `newest` stack runs in the guest instead of its
# userspace's packages; otherwise it is `scripts/dpdk.sh 26.07`'s.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "guest.sh: run as root (chroot, network namespaces)" >&2
    exit 2
fi

# The stacks and the DPDK series each one's PMD is built against.
STACKS=(bookworm trixie trixie-bpo sid newest)
declare -A STACK_DPDK=([bookworm]=22.11 [trixie]=24.11 [trixie-bpo]=24.11 [sid]=25.11 [newest]=26.07)
# The stacks whose guest runs that build of DPDK instead of its packages
# (Stack::dpdk_build).
declare -A DPDK_IN_GUEST=([newest]=1)

pass=() stack=${MANA_GUEST_STACK:-bookworm} matrix=0
while [ $# -gt 0 ]; do
    case $1 in
        --stack) [ $# -ge 2 ] || { echo "guest.sh: --stack needs a name (${STACKS[*]})" >&2; exit 2; }
                 stack=$2; shift 2 ;;
        --matrix) matrix=1; shift ;;
        --cpus) pass+=("$1" "${2:-}"); shift 2 ;;
        *) pass+=("$1"); shift ;;
    esac
done

bin=${MANA_GUEST_BIN:-}
if [ -z "$bin" ]; then
    cargo build -q --locked -p mana-pci --bin mana-guest
    bin=$PWD/target/debug/mana-guest
fi
# mana-preflight for the preflight scenario, unless one is named.
if [ -z "${MANA_GUEST_PREFLIGHT:-}" ]; then
    cargo build -q --locked -p mana-preflight --bin mana-preflight
    export MANA_GUEST_PREFLIGHT=$PWD/target/debug/mana-preflight
fi

# Builds what stack $1 needs and runs mana-guest on it with "$@" after.
run_stack() {
    local s=$1
    shift
    local series=${STACK_DPDK[$s]:-}
    [ -n "$series" ] || { echo "guest.sh: unknown stack '$s' (known: ${STACKS[*]})" >&2; return 2; }
    (
        export MANA_GUEST_STACK=$s
        # The DPDK the guest runs when it is scripts/dpdk.sh's build of the
        # series, unless one is named.
        if [ -n "${DPDK_IN_GUEST[$s]:-}" ] && [ -z "${MANA_GUEST_DPDK:-}" ]; then
            MANA_GUEST_DPDK=$(scripts/dpdk.sh "$series") || { echo "guest.sh: scripts/dpdk.sh $series failed" >&2; exit 1; }
            export MANA_GUEST_DPDK
        fi
        # Our PMD for the dpdk-* scenarios (issue 14), unless one is named.
        if [ -z "${MANA_GUEST_PMD:-}" ]; then
            if [ "$series" = 22.11 ]; then
                cargo build -q --locked --lib
                export MANA_GUEST_PMD=$PWD/target/debug/librte_net_mana.so
            else
                prefix=$(scripts/dpdk.sh "$series") || { echo "guest.sh: scripts/dpdk.sh $series failed" >&2; exit 1; }
                PKG_CONFIG_PATH=$prefix/lib/pkgconfig LD_LIBRARY_PATH=$prefix/lib \
                    CARGO_TARGET_DIR=$PWD/target/dpdk-matrix cargo build -q --locked -p net_mana --lib
                export MANA_GUEST_PMD=$PWD/target/dpdk-matrix/debug/librte_net_mana.so
            fi
        fi
        # DPDK 22.11's own C driver for bookworm's dpdk-c (bookworm does not
        # ship it): built out of tree from the installed DPDK's source,
        # unless one is named. If it cannot be built, dpdk-c fails saying so.
        # Later stacks' packages carry theirs.
        if [ "$series" = 22.11 ] && [ -z "${MANA_GUEST_C_PMD:-}" ]; then
            if so=$(tests/upstream/build-c-driver.sh 2>&1 | tail -1) && [ -f "$so" ]; then
                export MANA_GUEST_C_PMD=$so
            else
                echo "guest.sh: tests/upstream/build-c-driver.sh failed ($so): dpdk-c will fail" >&2
            fi
        fi
        exec "$bin" "$@"
    )
}

if [ "$matrix" = 0 ]; then
    run_stack "$stack" "${pass[@]}"
    exit
fi

# --matrix [NAME...]: the names among the arguments pick stacks.
want=() rest=()
for a in "${pass[@]}"; do
    if [ -n "${STACK_DPDK[$a]:-}" ]; then want+=("$a"); else rest+=("$a"); fi
done
[ ${#want[@]} -gt 0 ] || want=("${STACKS[@]}")
mkdir -p target/guest-matrix
status=0
for s in "${want[@]}"; do
    log=target/guest-matrix/$s.log
    start=$SECONDS
    run_stack "$s" "${rest[@]}" >"$log" 2>&1 || true
    passed=$(grep -c ': ok$' "$log" || true)
    failed=$(grep -c ': FAILED' "$log" || true)
    # A guest that never ran a scenario (no boot, a build error) is a failure.
    if [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then
        failed=1
        echo "guest.sh: stack $s ran no scenario: see $log" >&2
    fi
    echo "stack $s: $passed passed, $failed failed"
    echo "guest.sh: stack $s took $((SECONDS - start)) s (log: $log)" >&2
    [ "$failed" -eq 0 ] || status=1
done
exit $status
