#!/usr/bin/env bash
# The tensor-core GEMMs' instructions, read from their PTX (no GPU needed):
# the Turing path (sm75) must hold mma.sync m16n8k8 and ldmatrix (.trans
# too), the Ampere path (sm80) mma.sync m16n8k16 (m16n8k8 .tf32 for TF32),
# cp.async and (its kernel on 16-bit twins) ldmatrix, the Hopper path
# (sm90a, the h100 board) wgmma.mma_async (m64nNk8 .tf32 in TF32),
# cp.async.bulk.tensor (TMA), mbarrier waits and setmaxnreg; and ptxas -v
# must report no spills for any instance of the kernel; the fused step's
# kernels likewise.
# Skipped where there is no nvcc.
set -u
cd "$(dirname "$0")/../.."
. tools/lib/gpu.sh
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "skip - tensor-core PTX: skipped: no nvcc"; exit 0
fi
T=${SNN_TEST_OUT:-build/test}/ptx
M="make --no-print-directory"

# run_variant NAME BOARD SM PRECISION SOURCE PATTERN...: BOARD's defconfig on
# target SM with CONFIG_PRECISION_<PRECISION>; each PATTERN (grep -E) must
# occur in the PTX of kernels/cuda/SOURCE.cu ("gemm": the three roles' units,
# gemm/forward, backward_input and weight, which compile every GEMM kernel).
run_variant() {
    local name=$1 board=$2 sm=$3 prec=$4 d=$T/$1 p counts="" n srcs=() s; shift 4
    [ "$1" = gemm ] && srcs=(gemm/forward gemm/backward_input gemm/weight) || srcs=("$1")
    shift
    rm -rf "$d" && mkdir -p "$d"
    if ! board_def_retarget "$board" "$d/board" >"$d/def"; then echo "not ok - tensor-core PTX $name: ${board}_defconfig failed"; return; fi
    { echo "CONFIG_TARGET_SM$sm=y"; echo "CONFIG_PRECISION_$prec=y"
      if [ "${srcs[0]}" = fused/grid_wide ]; then echo "CONFIG_STEP_FUSED=y"; fi; } >>"$d/def"
    build_units() { # the PTX, and the object with ptxas's report, of each unit
        $M O="$d" defconfig DEFCONFIG="$d/def" || return
        for s in "${srcs[@]}"; do
            $M O="$d" "$d/build/kernels/cuda/$s.ptx" &&
                $M O="$d" EXTRA_WARN=-Werror EXTRA_NVCCFLAGS="-Xptxas -v" "$d/build/kernels/cuda/$s.o" || return
        done
    }
    if ! build_units >"$d.log" 2>&1; then
        echo "not ok - tensor-core PTX $name: build failed (see $d.log)"; return
    fi
    for s in "${srcs[@]}"; do cat "$d/build/kernels/cuda/$s.ptx"; done >"$d/all.ptx"
    for p in "$@"; do
        n=$(grep -cE "$p" "$d/all.ptx")
        if [ "$n" -eq 0 ]; then echo "not ok - tensor-core PTX $name: no '$p'"; return; fi
        counts="$counts, $n x ${p//\\/}"
    done
    echo "ok - tensor-core PTX $name: ${counts#, }"
    local inst spilled regs
    inst=$(grep -c 'Used [0-9]* registers' "$d.log")
    spilled=$(grep -E 'bytes spill' "$d.log" | grep -cv ' 0 bytes spill stores, 0 bytes spill loads')
    regs=$(grep -o 'Used [0-9]* registers' "$d.log" | awk '{print $2}' | sort -n | sed -n '1p;$p' | paste -sd-)
    if [ "$inst" -gt 0 ] && [ "$spilled" -eq 0 ]; then
        echo "ok - tensor-core ptxas $name: $inst kernel instances, $regs registers, 0 bytes spilled"
    else echo "not ok - tensor-core ptxas $name: $spilled of $inst kernel instances spill (see $d.log)"; fi
}

# make test checks one variant per path the CUDA board builds do not take (make test-full all of them:
# SNN_TEST_TIER, tests/run.sh). The variants compile their units side by side, as many at once as there
# are cores, and print their lines in this order.
full() { [ "${SNN_TEST_TIER:-full}" = full ]; }
jobs_max=$(nproc) order=()
queue() { # the arguments of run_variant, in the background
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
    mkdir -p "$T" && run_variant "$@" >"$T/$1.out" 2>&1 &
    order+=("$1")
}

queue sm75-fp16 rtx2060 75 FP16 gemm 'mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.f16\.f16\.f32' 'ldmatrix\.sync\.aligned\.m8n8\.x4' \
    'ldmatrix\.sync\.aligned\.m8n8\.x4\.trans'
full && queue sm75-fp16acc16 rtx2060 75 FP16_ACC16 gemm 'mma\.sync\.aligned\.m16n8k8\.row\.col\.f16\.f16\.f16\.f16' \
    'ldmatrix\.sync\.aligned\.m8n8\.x4'
full && queue sm80-bf16 h100 80 BF16 gemm 'mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32' 'cp\.async\.cg\.shared\.global.*16' \
    'cp\.async\.wait_group' 'ldmatrix\.sync\.aligned\.m8n8\.x4\.trans' # ldmatrix: the kernel on 16-bit twins
queue sm80-tf32 h100 80 TF32 gemm 'mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32' 'cvt\.rna\.tf32\.f32' \
    'cp\.async\.cg\.shared\.global.*16'
for pt in BF16:bf16:16 FP16:f16:16 TF32:tf32:8; do # precision : PTX type : instruction k
    IFS=: read -r p t k <<<"$pt"
    [ "$p" = FP16 ] && ! full && continue
    queue sm90-$t h100 90 "$p" gemm "wgmma\.mma_async\.sync\.aligned\.m64n[0-9]+k$k\.f32\.$t\.$t" \
        'cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.tile\.mbarrier::complete_tx::bytes' \
        'mbarrier\.try_wait\.parity' 'mbarrier\.arrive\.expect_tx' 'setmaxnreg\.(inc|dec)' 'wgmma\.wait_group'
done
# The grid-wide fused kernel (kernels/cuda/fused/grid_wide.cu) reads FP32 operands and rounds them as it
# stages them: the same instructions from cp.async'd FP32 tiles on sm90, from registers on sm75.
full && queue fused-sm90-bf16 h100_128x1_b64 90 BF16 fused/grid_wide 'mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32' \
    'cp\.async\.ca\.shared\.global.*16' # FP32 tiles through L1
queue fused-sm75-fp16acc16 rtx2060 75 FP16_ACC16 fused/grid_wide 'mma\.sync\.aligned\.m16n8k8\.row\.col\.f16\.f16\.f16\.f16'
wait
for name in "${order[@]}"; do cat "$T/$name.out"; done
