#!/bin/sh
# Prints the file name to install our plugin under in DPDK's plugin
# directory $1: librte_net_mana.so, unless a package of the distribution
# owns a file of that name there (Debian trixie and sid ship DPDK's C
# net_mana as librte_net_mana.so.*): then librte_net_mana_rs.so, so that
# installing never overwrites the package's file.
dir=$1
for f in "$dir"/librte_net_mana.so "$dir"/librte_net_mana.so.*; do
    [ -e "$f" ] || continue
    if { command -v dpkg >/dev/null && dpkg -S "$f" >/dev/null 2>&1; } ||
       { command -v rpm >/dev/null && rpm -qf "$f" >/dev/null 2>&1; }; then
        echo librte_net_mana_rs.so
        exit 0
    fi
done
echo librte_net_mana.so
