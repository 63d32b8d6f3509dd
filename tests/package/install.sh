#!/usr/bin/env bash
# install.sh ROOT WHAT... [--check PKG PLUGIN]: apt-get install WHAT (package
# names or .deb files inside ROOT) in the chroot ROOT (mounted by
# overlay.sh), and says which packages apt added. With --check: PKG is
# installed, owns PLUGIN, and every library PLUGIN links resolves (ldd).
set -euo pipefail
root=$1
shift
what=() check=
while [ $# -gt 0 ]; do
    case $1 in
        --check) check=1 pkg=$2 pmd=$3; shift 3 ;;
        *) what+=("$1"); shift ;;
    esac
done
log=$root/tmp/apt.log
apt_get() {
    DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get -o APT::Sandbox::User=root \
        -o Dpkg::Use-Pty=0 "$@" >>"$log" 2>&1
}
before=$(chroot "$root" dpkg-query -W -f='${Package}\n' | sort)
# The chroot's package lists may be older than the archive: refresh once.
apt_get install -y --no-install-recommends "${what[@]}" ||
    { apt_get update && apt_get install -y --no-install-recommends "${what[@]}"; } || {
    tail -n 20 "$log" >&2
    echo "install.sh: apt-get install ${what[*]} failed in $root; apt's output: $log" >&2
    exit 1
}
added=$(comm -13 <(echo "$before") <(chroot "$root" dpkg-query -W -f='${Package}\n' | sort) | wc -l)
echo "deb.sh: apt-get install ${what[*]##*/}: $added packages added"
[ -n "$check" ] || exit 0
status=$(chroot "$root" dpkg-query -W -f='${Status}' "$pkg")
[ "$status" = "install ok installed" ] || { echo "install.sh: $pkg is '$status' after apt-get install" >&2; exit 1; }
echo "deb.sh:   with it: $(comm -13 <(echo "$before") <(chroot "$root" dpkg-query -W -f='${Package}\n' | sort) | grep -vx "$pkg" | tr '\n' ' ')"
owner=$(chroot "$root" dpkg-query -S "$pmd" | cut -d: -f1)
[ "$owner" = "$pkg" ] || { echo "install.sh: $pmd belongs to '$owner', not $pkg" >&2; exit 1; }
# Every library the plugin links, found among what apt installed.
libs=$(chroot "$root" ldd "$pmd")
if echo "$libs" | grep -q 'not found'; then
    echo "install.sh: with $pkg and its Depends installed, $pmd still lacks:" >&2
    echo "$libs" | grep 'not found' >&2
    exit 1
fi
echo "deb.sh:   ldd $pmd: all $(echo "$libs" | wc -l) libraries resolved"
