#!/usr/bin/env bash
# Tile sweep on a GPU machine: each benchmark config built with each GEMM tile
# shape, ms per epoch (median of the epochs after the first) in a table.
#   tools/sweep_tiles.sh OUT_DIR [CONFIG...]
set -u
cd "$(dirname "$0")/.."
OUT=${1:?usage: tools/sweep_tiles.sh OUT_DIR [CONFIG...]}; shift
configs=${*:-h100_mlp128_b64 h100_mlp784x4_b64 h100_h1024_b32 h100_h8192_b32}
# block M N K / warp M N K
tiles=("64 64 16 32 32 16" "32 32 32 16 16 32" "32 64 32 16 32 32" "64 64 32 32 32 32")
mkdir -p "$OUT"
header="| config |" rule="|---|"
for t in "${tiles[@]}"; do
    set -- $t
    header="$header block $1x$2x$3, warp $4x$5x$6 |" rule="$rule---|"
done
printf '%s\n%s\n' "$header" "$rule" | tee "$OUT/tiles.md"
for c in $configs; do
    row="| $c |"
    for t in "${tiles[@]}"; do
        set -- $t
        d=build/sweep/$c-${t// /-}
        mkdir -p "$d"
        { cat "configs/${c}_defconfig"
          printf 'CONFIG_GEMM_BLOCK_M=%s\nCONFIG_GEMM_BLOCK_N=%s\nCONFIG_GEMM_BLOCK_K=%s\nCONFIG_GEMM_WARP_M=%s\nCONFIG_GEMM_WARP_N=%s\nCONFIG_GEMM_WARP_K=%s\n' "$@"
        } | awk -F= '{v[$1]=$0} END {for (k in v) print v[k]}' >"$d/def"
        if make --no-print-directory O="$d" defconfig DEFCONFIG="$d/def" >"$d.log" 2>&1 &&
            make --no-print-directory O="$d" -j"$(nproc)" "$d/app/mnist" >>"$d.log" 2>&1 &&
            "$d/app/mnist" --epochs 3 --log "$d/run.jsonl" >>"$d.log" 2>&1; then
            ms=$(python3 -c "import json,sys,statistics as s; e=[json.loads(l)['ms'] for l in open(sys.argv[1]) if '\"epoch\",' in l]; print('%.1f' % s.median(e[1:]))" "$d/run.jsonl")
        else ms=failed; fi
        row="$row $ms |"
    done
    echo "$row" | tee -a "$OUT/tiles.md"
done
