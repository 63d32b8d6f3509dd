#!/usr/bin/env bash
# overlay.sh LOWERS UPPER MNT CMD...: runs CMD (as the same process) in a
# private mount namespace where MNT is an overlay of the read-only layers
# LOWERS (colon-separated, topmost first) with the writable directory
# UPPER/data on top, prepared for chroot: /proc, /sys, /dev, a fresh /run,
# and each entry of $NET_MANA_BINDS (space-separated `SRC=DST` or `PATH`,
# DST inside MNT, default the same path) bind-mounted. Everything is
# unmounted when CMD ends; what CMD wrote stays in UPPER/data.
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 LOWERS UPPER MNT CMD..." >&2; exit 2; }
mkdir -p "$2/data" "$2/work" "$3"
exec unshare --mount --propagation private -- /bin/sh -c '
    set -e
    lowers=$1 upper=$2 mnt=$3
    shift 3
    mount -t overlay overlay -o "lowerdir=$lowers,upperdir=$upper/data,workdir=$upper/work" "$mnt"
    mount -t proc proc "$mnt/proc"
    mount --rbind /sys "$mnt/sys"
    mount --rbind /dev "$mnt/dev"
    mount -t tmpfs tmpfs "$mnt/run"
    for b in ${NET_MANA_BINDS:-}; do
        src=${b%%=*} dst=${b#*=}
        mkdir -p "$mnt$dst"
        mount --bind "$src" "$mnt$dst"
    done
    exec "$@"
' sh "$@"
