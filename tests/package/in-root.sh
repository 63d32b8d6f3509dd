#!/usr/bin/env bash
# The launcher of tests/package.rs (emu harness `TestpmdBuilder::launcher`):
# runs its arguments (`stdbuf -oL -eL dpdk-testpmd ...`) in the chroot
# $NET_MANA_ROOT, as the same process, with LD_PRELOAD set to
# $MANA_EMU_PRELOAD there. In a private mount namespace, so that every
# mount goes when the process ends: /proc, /sys, /dev, a fresh /run (EAL's
# runtime files), and at their own paths the emulator's directory (the
# configuration, fake sysfs tree, control socket and counters of
# $MANA_EMU_CONFIG) and the preloaded libraries' directories.
set -euo pipefail
root=${NET_MANA_ROOT:?set NET_MANA_ROOT to the chroot}
: "${MANA_EMU_CONFIG:?}" "${MANA_EMU_PRELOAD:?}"
binds=$(dirname "$MANA_EMU_CONFIG")
for lib in $MANA_EMU_PRELOAD; do binds="$binds $(dirname "$lib")"; done
exec unshare --mount --propagation private -- /bin/sh -c '
    set -e
    root=$1 binds=$2
    shift 2
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs tmpfs "$root/run"
    for d in $binds; do
        mkdir -p "$root$d"
        mount --bind "$d" "$root$d"
    done
    exec chroot "$root" /usr/bin/env LD_PRELOAD="$MANA_EMU_PRELOAD" "$@"
' sh "$root" "$binds" "$@"
