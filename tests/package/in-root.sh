#!/usr/bin/env bash
# The launcher of tests/package.rs (emu harness `TestpmdBuilder::launcher`):
# runs its arguments (`stdbuf -oL -eL dpdk-testpmd ...`) as the same process
# in the chroot tests/package/deb.sh prepared (the overlay of
# $NET_MANA_LOWERS and $NET_MANA_UPPER, mounted at $NET_MANA_ROOT by
# overlay.sh), with LD_PRELOAD set to $MANA_EMU_PRELOAD there. The
# emulator's directory (configuration, fake sysfs tree, control socket,
# counters of $MANA_EMU_CONFIG) and the preloaded libraries' directories
# are bind-mounted at their own paths.
set -euo pipefail
: "${NET_MANA_LOWERS:?}" "${NET_MANA_UPPER:?}" "${NET_MANA_ROOT:?}" "${MANA_EMU_CONFIG:?}" "${MANA_EMU_PRELOAD:?}"
binds=$(dirname "$MANA_EMU_CONFIG")
for lib in $MANA_EMU_PRELOAD; do binds="$binds $(dirname "$lib")"; done
NET_MANA_BINDS=$binds exec "$(dirname "$0")/overlay.sh" "$NET_MANA_LOWERS" "$NET_MANA_UPPER" "$NET_MANA_ROOT" \
    chroot "$NET_MANA_ROOT" /usr/bin/env LD_PRELOAD="$MANA_EMU_PRELOAD" "$@"
