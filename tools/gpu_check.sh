#!/usr/bin/env bash
# Everything a GPU machine can check, in one invocation:
#   tools/gpu_check.sh OUT_DIR [--data-from DIR] [--skip-tests] [--skip-bench] [--skip-parity]
# builds each board's code path for the card present, runs the whole test
# suite (host and GPU tests, compute-sanitizer), the PyTorch parity check in
# every precision and the benchmark against PyTorch, dumps the SASS and ptxas
# reports, and writes every log under OUT_DIR: summary.txt (the verdicts and
# tables), parity-NAME.png (one per precision and code path), and logs.tar.gz
# (everything else).
set -u
cd "$(dirname "$0")/.."
. tools/lib/gpu.sh
OUT=${1:?usage: tools/gpu_check.sh OUT_DIR [--data-from DIR] [--skip-tests] [--skip-bench] [--skip-parity]}
shift
from= tests=1 bench=1 parity=1
while [ $# -gt 0 ]; do
    case $1 in
    --data-from) from=$2; shift ;;
    --skip-tests) tests=0 ;;
    --skip-bench) bench=0 ;;
    --skip-parity) parity=0 ;;
    *) echo "gpu_check: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
mkdir -p "$OUT"
L=$OUT/logs; mkdir -p "$L"
S=$OUT/summary.txt
export PYTHONUNBUFFERED=1 SNN_TEST_OUT=build/test
say() { echo "$*" | tee -a "$S"; }
cc=$(gpu_cc)

say "== gpu_check $(date -u +%FT%TZ)"
nvidia-smi >"$L/nvidia-smi.txt" 2>&1
say "$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader)"
say "$(nvcc --version | tail -n 1)"
tools/make/fetch_data.sh ${from:+--from "$from"} >"$L/data.log" 2>&1 || { say "data: failed (see data.log)"; }

if [ $tests -eq 1 ]; then
    say "== tests"
    bash tests/run.sh >"$L/tests.log" 2>&1
    grep -E '^(not ok|skip) - ' "$L/tests.log" | tee -a "$S"
    tail -n 1 "$L/tests.log" | tee -a "$S"
    cp build/test/*.log "$L/" 2>/dev/null
    for d in build/test/gpu-*; do
        [ -d "$d" ] || continue
        b=${d##*/gpu-}
        for f in "$d"/sanitizer-*.log; do [ -f "$f" ] && cp "$f" "$L/$b-$(basename "$f")"; done
        cuobjdump -sass "$d/app/mnist" >"$L/$b.sass" 2>&1
        say "$b SASS: $(grep -oE 'HMMA\.[0-9A-Z.]+|HGMMA[.A-Z0-9]*|LDGSTS|UTMALDG|FFMA' "$L/$b.sass" | sort | uniq -c | tr '\n' ' ')"
        make --no-print-directory O="$d" -B EXTRA_NVCCFLAGS="-Xptxas -v" "$d/build/kernels/cuda/gemm.o" >"$L/$b.ptxas.txt" 2>&1
        say "$b ptxas: $(grep -E 'registers|spill' "$L/$b.ptxas.txt" | grep -oE 'Used [0-9]+ registers|[0-9]+ bytes spill (stores|loads)' | sort | uniq -c | tr '\n' ' ')"
    done
fi

ACC_POINTS=0.3 # how far a precision's final validation accuracy may be from FP32's
fp32_acc=

accuracy_verdict() { # PRECISION ACC: the final validation accuracy against the FP32 run's
    if [ -z "$2" ]; then echo "no validation accuracy in the run's log"
    elif [ "$1" = FP32 ]; then echo "test acc $2% (the FP32 baseline)"
    elif [ -z "$fp32_acc" ]; then echo "test acc $2% (no FP32 run to compare with)"
    elif python3 -c "import sys; sys.exit(abs($2 - $fp32_acc) > $ACC_POINTS)"; then
        echo "test acc $2% (FP32 $fp32_acc%, within $ACC_POINTS points: ok)"
    else echo "test acc $2% (FP32 $fp32_acc%, more than $ACC_POINTS points apart: NOT OK)"; fi
}

# parity_run NAME BOARD SM PRECISION [NUMERICS [CONFIG_LINE...]]: BOARD's
# defconfig (its tiles) on target SM (that code path, built for this card) in
# CONFIG_PRECISION_<PRECISION>, plus the config lines given, trained for its
# configured epochs with --dump, then tools/torch_parity.py --precision
# NUMERICS (default: PRECISION in lower case) on every epoch of the dump:
# parity-NAME.png and one summary line, with the final validation accuracy
# against the FP32 run's (run that one first).
parity_run() {
    local name=$1 board=$2 sm=$3 prec=$4 numerics=${5:-${4,,}} d=build/parity-$1 line acc
    shift 4; [ $# -gt 0 ] && shift
    if ! usable "$cc" "$sm"; then
        say "$name: skipped: needs compute capability $sm, this GPU is ${cc:-unknown}"; return
    fi
    mkdir -p "$d"
    if ! board_def_retarget "$board" "$d/board" >"$d/def"; then say "$name: ${board}_defconfig failed"; return; fi
    { echo "CONFIG_TARGET_SM$sm=y"; echo "CONFIG_PRECISION_$prec=y"; echo "CONFIG_CUDA_ARCH_OVERRIDE=$cc"
      printf '%s\n' "$@"; } >>"$d/def"
    if ! { make --no-print-directory O="$d" defconfig DEFCONFIG="$d/def" &&
        make --no-print-directory O="$d" -j"$(nproc)" "$d/app/mnist"; } >"$L/parity-$name-build.log" 2>&1; then
        say "$name: build failed (see parity-$name-build.log)"; return
    fi
    if ! grep -q "^CONFIG_PRECISION_$prec=y" "$d/.config"; then
        say "$name: the config dropped CONFIG_PRECISION_$prec ($(grep -o 'CONFIG_PRECISION_[A-Z0-9_]*=y' "$d/.config"))"; return
    fi
    rm -rf "$d/dump"
    if ! "$d/app/mnist" --dump "$d/dump" --log "$L/parity-$name-run.jsonl" >"$L/parity-$name-run.txt" 2>&1; then
        say "$name: the run failed: $(tail -n 1 "$L/parity-$name-run.txt")"; return
    fi
    python3 tools/torch_parity.py "$d/dump" --precision "$numerics" --epochs 0 --png "$OUT/parity-$name.png" \
        >"$L/parity-$name.txt" 2>&1
    line=$(grep '^parity ' "$L/parity-$name.txt" || echo "torch_parity failed: $(tail -n 1 "$L/parity-$name.txt")")
    acc=$(test_acc "$L/parity-$name-run.jsonl")
    [ "$prec" = FP32 ] && fp32_acc=$acc
    say "$name: $line; $(accuracy_verdict "$prec" "$acc")"
}

if [ $parity -eq 1 ]; then
    say "== parity (h100_defconfig shapes in each precision, against PyTorch with the same GEMM rounding)"
    parity_run sm80-fp32 h100 80 FP32
    parity_run sm80-tf32 h100 80 TF32
    parity_run sm80-fp16 h100 80 FP16
    parity_run sm80-bf16 h100 80 BF16
    parity_run h100-bf16 h100 90 BF16 # the board as it is: the wgmma path
    parity_run h100-fp16 h100 90 FP16
    # TF32 on the Hopper path: every forward GEMM on wgmma, which truncates its operands
    parity_run h100-tf32-wgmma h100 90 TF32 tf32_wgmma CONFIG_GEMM_WGMMA_MIN_K=1 CONFIG_GEMM_WGMMA_MIN_MFLOP=0
    parity_run rtx2060-fp16_acc16 rtx2060 75 FP16_ACC16 # the only board of FP16 accumulation: its tiles, same model
fi

if [ $bench -eq 1 ]; then
    say "== benchmark"
    python3 tools/bench.py --out "$L/bench" >"$L/bench.txt" 2>&1
    cat "$L/bench/bench.md" 2>/dev/null | tee -a "$S" || tail -n 20 "$L/bench.txt" | tee -a "$S"
fi

tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$L"
say "== done $(date -u +%FT%TZ)"
