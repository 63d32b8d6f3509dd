#!/usr/bin/env bash
# meson custom_target helper: runs cargo, then copies the libraries where
# meson expects its outputs.
set -euo pipefail
out=$1 profile=$2 so_name=$3 cargo=$4
shift 4
cd "$(dirname "$0")/.."
"$cargo" "$@"
cp "$out/cargo/$profile/librte_net_mana.so" "$out/$so_name"
cp "$out/cargo/$profile/librte_net_mana.a" "$out/"
