#!/usr/bin/env bash
# Installs the guest tier's pieces under /var/cache/net-mana/guest (run as
# root; called by scripts/setup.sh). Idempotent: a piece already in the cache
# is kept, and a run with everything cached only checks stamps.
#
#   chroot/   Debian trixie (debootstrap --variant=minbase) with trixie-backports'
#             qemu-system-x86 (QEMU >= 10.1 has the vfio-user client; its
#             binaries need trixie's glibc, hence the chroot) and busybox-static.
#   kernel/   trixie's cloud kernel (linux-image-6.12.*-cloud-amd64): vmlinuz,
#             its config, and the modules the guest loads, decompressed
#             (busybox insmod cannot read .ko.xz).
#   rootfs/   the guest's userspace before the project adds its init:
#             busybox-static and a few dynamically linked tools from the chroot
#             (ethtool) with their libraries (trixie's glibc), and Debian
#             bookworm's verbs userspace unpacked from its .debs (rdma-core 44:
#             libibverbs1, ibverbs-providers with libmana, ibverbs-utils'
#             ibv_devinfo; libnl), the combination an Azure VM with bookworm's
#             DPDK runs. Bookworm binaries run on trixie's newer glibc.
#             And bookworm's dpdk-testpmd (DPDK 22.11, which scripts/setup.sh
#             installs on this machine) with the libraries it and our PMD load,
#             copied from this machine (glibc's own libraries stay trixie's).
#   debs-bookworm/  those .debs, as `apt-get download` on this (bookworm)
#             machine fetched them with its own, unmodified apt sources.
#
# Packages come from the Debian archive this machine's apt sources name
# (scripts/lib/debian_archive.py), through the chroot's own apt
# configuration; the host's /etc/apt is never touched.
set -euo pipefail

CACHE=${NET_MANA_CACHE:-/var/cache/net-mana}
G="$CACHE/guest"
ROOT="$G/chroot"
HERE=$(cd "$(dirname "$0")" && pwd)
SUITE=trixie
# The guest's kernel modules: mana and what it needs, plus the RDMA stack for
# mana_ib (issue 14). Their dependencies are added from modules.dep.
MODULES=(mana mana_ib ib_uverbs)
# Tools copied into the guest with their shared libraries (from the chroot).
TOOLS=(/usr/sbin/ethtool)
CHROOT_PKGS=(busybox-static ethtool xz-utils kmod)
# Bookworm packages unpacked into the guest (issue 14: rdma-core 44 in the
# guest, against the 6.12 kernel's mana_ib).
GUEST_DEBS=(libibverbs1 ibverbs-providers ibverbs-utils libnl-3-200 libnl-route-3-200)

log() { echo "guest-setup: $*"; }

if [ "$(id -u)" -ne 0 ]; then
    echo "guest-setup.sh: run as root (debootstrap and chroot need it)" >&2
    exit 1
fi
mkdir -p "$G"

# --- 1. the trixie chroot with QEMU -----------------------------------------
chroot_stamp="$ROOT/.net-mana-chroot"
want_stamp="v1 ${CHROOT_PKGS[*]} qemu-system-x86/$SUITE-backports"
if [ ! -f "$chroot_stamp" ] || [ "$(cat "$chroot_stamp")" != "$want_stamp" ]; then
    command -v debootstrap >/dev/null || {
        log "installing debootstrap (host)"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    }
    mapfile -t archive < <(/usr/bin/python3 "$HERE/lib/debian_archive.py" "$(. /etc/os-release; echo "${VERSION_CODENAME:-bookworm}")")
    main_uri="" sec_uri=""
    for line in "${archive[@]}"; do
        case "$line" in
            main\ *) main_uri=${line#main } ;;
            security\ *) sec_uri=${line#security } ;;
        esac
    done
    [ -n "$main_uri" ] || { echo "guest-setup.sh: no Debian archive in this machine's apt sources" >&2; exit 1; }
    if [ ! -x "$ROOT/usr/bin/apt-get" ]; then
        log "debootstrap --variant=minbase $SUITE from $main_uri into $ROOT (~2 min)"
        rm -rf "$ROOT"
        debootstrap --variant=minbase --include=debian-archive-keyring,ca-certificates \
            "$SUITE" "$ROOT" "$main_uri" >"$G/debootstrap.log" 2>&1 || {
            tail -20 "$G/debootstrap.log" >&2
            exit 1
        }
    fi
    # The chroot's own apt sources: the same archive, trixie + backports.
    rm -f "$ROOT/etc/apt/sources.list"
    {
        printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates %s-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
            "$main_uri" "$SUITE" "$SUITE" "$SUITE"
        if [ -n "$sec_uri" ]; then
            printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
                "$sec_uri" "$SUITE"
        fi
    } >"$ROOT/etc/apt/sources.list.d/debian.sources"
    log "installing in the chroot: qemu-system-x86 ($SUITE-backports) ${CHROOT_PKGS[*]}"
    chroot "$ROOT" apt-get -qq update
    DEBIAN_FRONTEND=noninteractive chroot "$ROOT" apt-get install -y -qq --no-install-recommends \
        -t "$SUITE-backports" qemu-system-x86 "${CHROOT_PKGS[@]}" >"$G/apt-install.log" 2>&1 || {
        tail -20 "$G/apt-install.log" >&2
        exit 1
    }
    chroot "$ROOT" apt-get -qq clean
    echo "$want_stamp" >"$chroot_stamp"
fi
qemu_ver=$(chroot "$ROOT" dpkg-query -W -f='${Version}' qemu-system-x86)

# The chroot's apt: its own configuration (trixie + backports), or after
# `use_suite SUITE` a private one naming only SUITE of the same archive,
# with its own lists and an empty dpkg status (what the chroot has
# installed is trixie's, not SUITE's). Nothing in the chroot's /etc/apt
# changes for it. A mirror frozen in time (a snapshot) serves a sid whose
# Release file has expired: NET_MANA_APT_VALID_UNTIL=false accepts it (the
# signature is still checked).
APT_OPTS=()
capt() { chroot "$ROOT" apt-get "${APT_OPTS[@]}" "$@"; }
ccache() { chroot "$ROOT" apt-cache "${APT_OPTS[@]}" "$@"; }
use_suite() {
    local suite=$1 d=/var/lib/net-mana-apt/$1 uri
    if [ "$suite" = "$SUITE" ]; then
        APT_OPTS=()
        return
    fi
    uri=$(sed -n 's/^URIs: //p' "$ROOT/etc/apt/sources.list.d/debian.sources" | head -1)
    mkdir -p "$ROOT$d/lists/partial" "$ROOT$d/parts" "$ROOT$d/cache/archives/partial"
    : >"$ROOT$d/status"
    printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$uri" "$suite" >"$ROOT$d/debian.sources"
    APT_OPTS=(-o "Dir::Etc::SourceList=$d/debian.sources" -o "Dir::Etc::SourceParts=$d/parts"
              -o "Dir::State::Lists=$d/lists" -o "Dir::State::Status=$d/status"
              -o "Dir::Cache=$d/cache" -o APT::Sandbox::User=root
              -o Acquire::Check-Valid-Until="${NET_MANA_APT_VALID_UNTIL:-true}")
    ls "$ROOT$d/lists/"*_Packages* >/dev/null 2>&1 || capt -qq update
}

# --- 2. the cloud kernels ---------------------------------------------------
# fetch_kernel DIR PICK: the cloud kernel whose metapackage version matches
# the awk regex PICK (of `apt-cache madison`), into $G/DIR: vmlinuz, config,
# version, the listed modules with their dependencies in load order. 7.x
# splits the image into linux-{base,binary,modules}-<version> packages.
want_kstamp="v1 ${MODULES[*]}"
fetch_kernel() {
    local dir=$1 pick=$2 kdir="$G/$1"
    if [ -f "$kdir/.net-mana-kernel" ] && [ "$(cat "$kdir/.net-mana-kernel")" = "$want_kstamp" ]; then
        return 0
    fi
    capt -qq update
    local meta pkg kv deps
    meta=$(ccache madison linux-image-cloud-amd64 |
        awk -F' *[|] *' -v pick="$pick" '$2 ~ pick { print $2; exit }')
    [ -n "$meta" ] || { echo "guest-setup.sh: no linux-image-cloud-amd64 matching $pick" >&2; exit 1; }
    pkg=$(ccache depends "linux-image-cloud-amd64=$meta" |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-cloud-amd64\(-unsigned\)\?\)$/\1/p' | head -1)
    [ -n "$pkg" ] || { echo "guest-setup.sh: linux-image-cloud-amd64 $meta names no kernel image" >&2; exit 1; }
    kv=${pkg#linux-image-}; kv=${kv%-unsigned}
    deps=$(ccache depends "$pkg" |
        sed -n "s/^ *Depends: \(linux-\(base\|binary\|modules\)-$kv\)\$/\1/p")
    log "downloading $pkg $(echo $deps)"
    rm -rf "$kdir" "$ROOT/tmp/kernel-deb"
    mkdir -p "$ROOT/tmp/kernel-deb" "$kdir"
    chroot "$ROOT" sh -c "cd /tmp/kernel-deb && apt-get ${APT_OPTS[*]} -qq -o APT::Sandbox::User=root download $pkg $(echo $deps)"
    # Extracted inside the chroot, whose kmod reads the modules' .modinfo.
    local x="$ROOT/tmp/kernel-x" deb
    rm -rf "$x"
    for deb in "$ROOT"/tmp/kernel-deb/*.deb; do dpkg-deb -x "$deb" "$x"; done
    # trixie ships modules under /usr/lib (merged /usr).
    local mods="$x/usr/lib/modules"
    [ -d "$mods" ] || mods="$x/lib/modules"
    local kver
    kver=$(ls "$mods")
    # /boot in 6.12's package; next to the modules in 7.x's.
    for f in vmlinuz config; do
        if [ -f "$x/boot/$f-$kver" ]; then cp "$x/boot/$f-$kver" "$kdir/$f"; else cp "$mods/$kver/$f" "$kdir/$f"; fi
    done
    # The listed modules and everything they depend on (modinfo's `depends`;
    # the package has no modules.dep, depmod runs at install time),
    # decompressed, in load order: dependencies first.
    local moddir="$mods/$kver" f n m
    declare -A path_of=()
    while IFS= read -r f; do
        n=${f##*/}; n=${n%.xz}; n=${n%.zst}; n=${n%.ko}; n=${n//-/_}
        path_of[$n]=$f
    done < <(find "$moddir" -name '*.ko*')
    local order=()
    declare -A seen=()
    visit() {
        local m=$1 f d deps
        [ -n "${seen[$m]:-}" ] && return
        seen[$m]=1
        f=${path_of[$m]:-}
        [ -n "$f" ] || { echo "guest-setup.sh: module $m not in $kver" >&2; exit 1; }
        deps=$(chroot "$ROOT" modinfo -F depends "${f#"$ROOT"}") || { echo "guest-setup.sh: modinfo $f failed" >&2; exit 1; }
        for d in ${deps//,/ }; do visit "${d//-/_}"; done
        order+=("$m")
    }
    for m in "${MODULES[@]}"; do visit "$m"; done
    mkdir -p "$kdir/modules"
    : >"$kdir/modules.order"
    for m in "${order[@]}"; do
        f=${path_of[$m]}
        n=${f##*/}
        case "$n" in
            *.xz) xz -dc "$f" >"$kdir/modules/${n%.xz}" ;;
            *.zst) zstd -qdc "$f" >"$kdir/modules/${n%.zst}" ;;
            *) cp "$f" "$kdir/modules/$n" ;;
        esac
        n=${n%.xz}; n=${n%.zst}
        echo "$n" >>"$kdir/modules.order"
    done
    echo "$kver" >"$kdir/version"
    rm -rf "$x" "$ROOT/tmp/kernel-deb"
    echo "$want_kstamp" >"$kdir/.net-mana-kernel"
}
# trixie's 6.12, the issue's kernel; trixie-backports' (7.x), whose mana
# handles the device's service-reset event (emu-pci/README.md).
fetch_kernel kernel '^6[.]12[.]'
fetch_kernel kernel-backports 'bpo'
# sid's (issue 21's `sid` stack): optional, see below.
SID_HINT="the sid stack and the newest (sid's userspace) are not cached (scripts/guest.sh --stack sid or --stack newest fails saying so); if the mirror is a snapshot whose sid Release file expired, rerun with NET_MANA_APT_VALID_UNTIL=false"
sid_ok=1
# (In the background and waited for: a subshell whose status is tested
# would run without set -e.)
( use_suite sid; fetch_kernel kernel-sid '.' ) &
wait $! || { sid_ok=0; log "$SID_HINT"; }
kver=$(cat "$G/kernel/version")

# --- 3. the guest's base userspace ------------------------------------------
rootfs_stamp="$G/rootfs/.net-mana-rootfs"
VERBS_CHECK="$HERE/../emu-pci/guest/verbs-check.c"
want_rstamp="v7 ${TOOLS[*]} ${GUEST_DEBS[*]} $(sha256sum "$VERBS_CHECK" | cut -c1-16) $(cat "$chroot_stamp")"
if [ ! -f "$rootfs_stamp" ] || [ "$(cat "$rootfs_stamp")" != "$want_rstamp" ]; then
    log "assembling the guest's base userspace in $G/rootfs"
    rm -rf "$G/rootfs"
    mkdir -p "$G/rootfs/bin"
    cp "$ROOT/usr/bin/busybox" "$G/rootfs/bin/busybox"
    for t in "${TOOLS[@]}"; do
        mkdir -p "$G/rootfs$(dirname "$t")"
        cp "$ROOT$t" "$G/rootfs$t"
        # The tool's libraries and the dynamic loader, resolved in the chroot.
        for lib in $(chroot "$ROOT" ldd "$t" | grep -o '/[^ ]*'); do
            real=$(chroot "$ROOT" readlink -f "$lib")
            mkdir -p "$G/rootfs$(dirname "$lib")"
            cp "$ROOT$real" "$G/rootfs$lib"
        done
    done
    # Bookworm's verbs userspace. The host is bookworm: its own apt fetches
    # the .debs (downloading changes nothing in its configuration).
    debs="$G/debs-bookworm"
    rm -rf "$debs"
    mkdir -p "$debs"
    log "downloading bookworm ${GUEST_DEBS[*]}"
    (cd "$debs" && apt-get -qq -o APT::Sandbox::User=root download "${GUEST_DEBS[@]}") || {
        apt-get -qq update
        (cd "$debs" && apt-get -qq -o APT::Sandbox::User=root download "${GUEST_DEBS[@]}")
    }
    for d in "$debs"/*.deb; do
        dpkg-deb -x "$d" "$G/rootfs"
    done
    # Documentation, manuals and the other RDMA providers' libraries are not
    # needed in the guest (libmana and its mana.driver file stay).
    rm -rf "$G/rootfs/usr/share"
    find "$G/rootfs/usr/lib/x86_64-linux-gnu/libibverbs" -name '*-rdmav*.so' ! -name 'libmana-*' -delete
    rm -f "$G"/rootfs/usr/lib/x86_64-linux-gnu/lib{efa,mlx4,mlx5}.so.*
    # The verbs check of scenario rdma-mr, built against this machine's
    # bookworm libibverbs (libibverbs-dev, which scripts/setup.sh installs).
    mkdir -p "$G/rootfs/usr/local/bin"
    clang -O2 -Wall -o "$G/rootfs/usr/local/bin/mana-verbs-check" "$VERBS_CHECK" -libverbs
    # DPDK 22.11's testpmd and what it and our PMD link (issue 14): resolved
    # on this (bookworm) machine; glibc's libraries come from the chroot, the
    # ones the guest already has are kept.
    cp /usr/bin/dpdk-testpmd "$G/rootfs/usr/local/bin/"
    # The mempool handler testpmd's pools use is a plugin (the scenarios
    # load it with -d); the other bundled drivers stay out of the guest.
    pmds=$(ls -d /usr/lib/x86_64-linux-gnu/dpdk/pmds-*)
    mkdir -p "$G/rootfs$pmds"
    cp "$(readlink -f "$pmds/librte_mempool_ring.so")" "$G/rootfs$pmds/librte_mempool_ring.so.23"
    pmd_libs="librte_ethdev.so.23 librte_bus_pci.so.23 librte_mbuf.so.23 librte_mempool.so.23 librte_eal.so.23 librte_kvargs.so.23 librte_telemetry.so.23 librte_net.so.23 librte_ring.so.23 librte_meter.so.23 librte_pci.so.23 libbsd.so.0 libmd.so.0 libfdt.so.1 libnuma.so.1 libgcc_s.so.1"
    for lib in $(ldd /usr/bin/dpdk-testpmd | grep -o '/[^ ]*') \
               $(for l in $pmd_libs; do ldconfig -p | awk -v l="$l" '$1 == l && /x86-64/ {print $NF; exit}'; done); do
        name=${lib##*/}
        case "$name" in
            libc.so.*|libm.so.*|ld-linux*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*)
                src=$(chroot "$ROOT" sh -c "readlink -f /lib/x86_64-linux-gnu/$name" 2>/dev/null) || continue
                dst="$G/rootfs/lib/x86_64-linux-gnu/$name"
                [ -e "$dst" ] || { mkdir -p "${dst%/*}"; cp "$ROOT$src" "$dst"; } ;;
            *)
                dst="$G/rootfs/usr/lib/x86_64-linux-gnu/$name"
                [ -e "$dst" ] || cp "$(readlink -f "$lib")" "$dst" ;;
        esac
    done
    find "$G/rootfs/etc/libibverbs.d" -name '*.driver' ! -name 'mana.driver' -delete
    echo "$want_rstamp" >"$rootfs_stamp"
fi

# --- 4. the other stacks' userspace (issue 21) -----------------------------
# stack_rootfs NAME PKGS...: rootfs-NAME/, the base userspace above with
# Debian NAME's verbs and DPDK userspace instead of bookworm's: PKGS (whose
# binaries the guest runs) and the libraries they need, from NAME's archive
# through the chroot's own apt configuration (its sources name the suite).
# The .debs are kept in debs-NAME/. dpdk-dev carries dpdk-testpmd; its
# dependencies on libdpdk-dev (headers) and python3 (scripts) are not
# followed. Everything unpacked lands in a staging tree inside the chroot,
# and the guest gets what the programs' dynamic linking resolves there
# (falling back to the chroot's own libraries: the same suite), plus the
# verbs provider (libmana) and DPDK's ring mempool plugin. The distro's C
# net/mana (librte_net_mana.so.<ABI>) stays at its package path, outside the
# autoloaded plugin directory: testpmd loads it only when told to (-d), so
# it never competes with our PMD for the function.
STACK_BINS=(/usr/bin/dpdk-testpmd /usr/bin/ibv_devinfo)
stack_rootfs() {
    local name=$1 dir="$G/rootfs-$1" debs="$G/debs-$1"
    shift
    local stamp="$dir/.net-mana-rootfs"
    local want="v2 ${APT_OPTS[*]:+${APT_OPTS[*]} }$* ${STACK_BINS[*]} $(cat "$rootfs_stamp")"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    log "assembling stack $name's userspace in $dir"
    # Another suite than the chroot's brings its own glibc: everything is
    # taken from its packages, and resolved by its own dynamic loader.
    local own_libc=0
    [ ${#APT_OPTS[@]} -eq 0 ] || own_libc=1
    installed() { [ $own_libc = 1 ] || chroot "$ROOT" dpkg-query -W -f='${Package}\n'; }
    local dep_opts=(--no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances)
    local top=() p
    for p in "$@"; do
        if [ "$p" = dpdk-dev ]; then
            mapfile -t -O "${#top[@]}" top < <(ccache depends "${dep_opts[@]}" dpdk-dev |
                sed -n 's/^ *|\?Depends: //p' | grep -v '^<' | grep -vx 'libdpdk-dev\|python3')
        else
            top+=("$p")
        fi
    done
    # The run-time libraries (lib*, no -dev) of the closure, and the named
    # packages; not what the chroot has installed (its files are taken from it).
    local all
    all=$( (ccache depends --recurse "${dep_opts[@]}" "${top[@]}" |
            grep -v '^[ <]' | grep -x 'lib.*' | grep -v -e '-dev$' -e '^libpython'; printf '%s\n' "$@") |
        sort -u | comm -23 - <(installed | sort -u))
    rm -rf "$ROOT/tmp/stack-debs" "$debs"
    mkdir -p "$ROOT/tmp/stack-debs"
    log "downloading $(echo "$all" | wc -l) packages of $name ($*)"
    chroot "$ROOT" sh -c "cd /tmp/stack-debs && apt-get ${APT_OPTS[*]} -qq -o APT::Sandbox::User=root download $(echo $all)" || {
        capt -qq update
        chroot "$ROOT" sh -c "cd /tmp/stack-debs && apt-get ${APT_OPTS[*]} -qq -o APT::Sandbox::User=root download $(echo $all)"
    }
    mv "$ROOT/tmp/stack-debs" "$debs"
    local stage="$ROOT/tmp/stack-stage" d
    rm -rf "$stage"
    for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$stage"; done
    rm -rf "$dir"
    cp -a "$G/rootfs" "$dir"
    # Bookworm's verbs and DPDK userspace out; the guest's tools and glibc stay.
    rm -rf "$dir/usr/lib/x86_64-linux-gnu" "$dir/etc/libibverbs.d" "$dir/usr/local/bin/dpdk-testpmd"
    rm -f "$dir/usr/bin/ibv_"* "$dir"/lib/x86_64-linux-gnu/libnl*
    local L=/usr/lib/x86_64-linux-gnu lib real from
    local resolve=(chroot "$ROOT" env LD_LIBRARY_PATH="/tmp/stack-stage$L:/tmp/stack-stage/lib/x86_64-linux-gnu" ldd)
    if [ $own_libc = 1 ]; then
        rm -f "$dir"/lib/x86_64-linux-gnu/{libc.so.6,libm.so.6,ld-linux-x86-64.so.2} "$dir/lib64/ld-linux-x86-64.so.2"
        resolve=(chroot "$ROOT" /tmp/stack-stage$L/ld-linux-x86-64.so.2
                 --library-path "/tmp/stack-stage$L:/tmp/stack-stage/lib/x86_64-linux-gnu" --list)
    fi
    local pmds mana_c ring
    pmds=$(cd "$stage$L/dpdk" && ls -d pmds-*)
    mana_c=$(cd "$stage$L" && ls librte_net_mana.so.* | sort | head -1)
    ring=$(cd "$stage$L/dpdk/$pmds" && ls librte_mempool_ring.so.* | sort | head -1)
    local want_libs=("${STACK_BINS[@]}" "$L/$mana_c" "$L/dpdk/$pmds/$ring")
    want_libs+=("$L/libibverbs/$(cd "$stage$L/libibverbs" && ls libmana-rdmav*.so)")
    for b in "${want_libs[@]}"; do
        [ -e "$stage$b" ] || { echo "guest-setup.sh: $name has no $b" >&2; exit 1; }
        mkdir -p "$dir$(dirname "$b")"
        cp -L "$stage$b" "$dir$b"
        for lib in $("${resolve[@]}" "/tmp/stack-stage$b" |
                     awk '$2 == "=>" && $3 ~ /^\// {print $3}'); do
            case "$lib" in
                /tmp/stack-stage/*) from=$ROOT$lib lib=${lib#/tmp/stack-stage} ;;
                *) from=$ROOT$(chroot "$ROOT" readlink -f "$lib") ;;
            esac
            [ -e "$dir$lib" ] && continue
            mkdir -p "$dir$(dirname "$lib")"
            cp -L "$from" "$dir$lib"
        done
    done
    # testpmd where the scenarios start it on every stack.
    ln -s /usr/bin/dpdk-testpmd "$dir/usr/local/bin/dpdk-testpmd"
    mkdir -p "$dir/etc/libibverbs.d"
    cp "$stage/etc/libibverbs.d/mana.driver" "$dir/etc/libibverbs.d/"
    # The libraries our PMD links that testpmd does not (built against the
    # same DPDK ABI, see scripts/guest.sh --stack).
    for lib in librte_bus_pci librte_ethdev librte_mbuf librte_mempool librte_eal librte_log librte_kvargs librte_net librte_pci; do
        real=$(ls "$stage$L/$lib".so.* 2>/dev/null | sort | head -1)
        if [ -n "$real" ] && [ ! -e "$dir$L/${real##*/}" ]; then cp -L "$real" "$dir$L/"; fi
    done
    # Rust's cdylib links libgcc_s (the unwinder), which DPDK does not.
    if [ $own_libc = 1 ]; then
        [ -e "$dir$L/libgcc_s.so.1" ] || cp -L "$stage$L/libgcc_s.so.1" "$dir$L/"
        # The dynamic loader every binary names (PT_INTERP).
        cp -L "$stage$L/ld-linux-x86-64.so.2" "$dir/lib64/ld-linux-x86-64.so.2"
    else
        [ -e "$dir/lib/x86_64-linux-gnu/libgcc_s.so.1" ] ||
            cp -L "$ROOT/lib/x86_64-linux-gnu/libgcc_s.so.1" "$dir/lib/x86_64-linux-gnu/"
    fi
    printf '%s\n' "$(cd "$debs" && ls)" >"$dir/.net-mana-debs"
    rm -rf "$stage"
    echo "$want" >"$stamp"
}
# Debian trixie: rdma-core 56.1, DPDK 24.11 with its C driver (issue 21).
stack_rootfs trixie dpdk-dev librte-net-mana25 librte-mempool-ring25 libibverbs1 ibverbs-providers ibverbs-utils
# Debian sid: rdma-core 65, DPDK 25.11 with its C driver, sid's glibc.
# Optional: a failure here leaves the other stacks ready.
if [ $sid_ok = 1 ]; then
    ( use_suite sid; stack_rootfs sid dpdk-dev librte-net-mana26 librte-mempool-ring26 libibverbs1 \
          ibverbs-providers ibverbs-utils libc6 libgcc-s1 ) &
    wait $! || log "$SID_HINT"
fi

log "ready: QEMU $qemu_ver, kernel $kver ($(wc -l <"$G/kernel/modules.order") modules) and $(cat "$G/kernel-backports/version") from backports, in $G"
