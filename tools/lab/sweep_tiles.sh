#!/usr/bin/env bash
# Tile sweep on a GPU machine: each benchmark config built with each GEMM tile
# shape for the roles named (all three by default: FWD, DGRAD, WGRAD), ms
# per epoch (median of the epochs after the first) in a table.
#   tools/lab/sweep_tiles.sh OUT_DIR [--roles FWD,DGRAD,WGRAD] [CONFIG...]
set -u
cd "$(dirname "$0")/../.."
usage="usage: tools/lab/sweep_tiles.sh OUT_DIR [--roles FWD,DGRAD,WGRAD] [CONFIG...]"
OUT=${1:?$usage}; shift
roles="FWD DGRAD WGRAD"
if [ "${1:-}" = --roles ]; then
    roles=${2:?$usage}; roles=${roles//,/ }; shift 2
    for r in $roles; do
        case $r in FWD|DGRAD|WGRAD) ;; *) echo "sweep_tiles: unknown role '$r' (FWD, DGRAD, WGRAD)" >&2; exit 2 ;; esac
    done
fi
configs=${*:-h100_128x1_b64 h100_784x4_b64 h100_1024x3_b32 h100_8192x3_b32}
# block M N K / warp M N K
tiles=("64 64 16 32 32 16" "32 32 32 16 16 32" "32 64 32 16 32 32" "64 64 32 32 32 32")
mkdir -p "$OUT"
header="| config ($roles) |" rule="|---|"
for t in "${tiles[@]}"; do
    set -- $t
    header="$header block $1x$2x$3, warp $4x$5x$6 |" rule="$rule---|"
done
printf '%s\n%s\n' "$header" "$rule" | tee "$OUT/tiles.md"
for c in $configs; do
    row="| $c |"
    for t in "${tiles[@]}"; do
        set -- $t
        d=build/sweep/$c-${roles// /-}-${t// /-}
        mkdir -p "$d"
        { cat "configs/${c}_defconfig"
          for r in $roles; do
              printf "CONFIG_GEMM_${r}_%s\n" "BLOCK_M=$1" "BLOCK_N=$2" "BLOCK_K=$3" "WARP_M=$4" "WARP_N=$5" "WARP_K=$6"
          done
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
