#!/usr/bin/env bash
# make run: the whole main job on the machine at hand. With no .config, pick
# the defconfig for the GPU present (by compute capability), or host; fetch
# the data if missing; build; train.
set -eu
cd "$(dirname "$0")/../.."
. tools/lib/gpu.sh
O=${O:-.}
M="make --no-print-directory O=$O"

board_for_this_machine() {
    local cc
    cc=$(gpu_cc)
    if [ -z "$cc" ]; then echo host; return; fi
    if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
        echo "run: a GPU (compute capability $cc) but no nvcc: building the host target" >&2
        echo host; return
    fi
    if [ "$cc" -eq 90 ]; then echo h100
    elif [ "$cc" -ge 80 ]; then echo a100
    elif [ "$cc" -ge 75 ]; then echo rtx2060
    else echo "run: compute capability $cc is older than Turing: building the host target" >&2; echo host; fi
}

if [ ! -f "$O/.config" ]; then
    board=$(board_for_this_machine)
    echo "run: no $O/.config, configuring for this machine: ${board}_defconfig"
    $M "${board}_defconfig"
fi
$M data
$M -j"$(nproc)"
exec "$O/app/mnist"
