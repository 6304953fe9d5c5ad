#!/usr/bin/env bash
# Everything a GPU machine can check, in one invocation:
#   tools/gpu_check.sh OUT_DIR [--data-from DIR] [--skip-tests] [--skip-bench] [--skip-parity]
# builds each board's code path for the card present, runs the whole test
# suite (host and GPU tests, compute-sanitizer), the PyTorch parity check and
# the benchmark against PyTorch, dumps the SASS and ptxas reports, and writes
# every log under OUT_DIR: summary.txt (the verdicts and tables), parity.png,
# and logs.tar.gz (everything else).
set -u
cd "$(dirname "$0")/.."
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

say "== gpu_check $(date -u +%FT%TZ)"
nvidia-smi >"$L/nvidia-smi.txt" 2>&1
say "$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader)"
say "$(nvcc --version | tail -n 1)"
tools/fetch_data.sh ${from:+--from "$from"} >"$L/data.log" 2>&1 || { say "data: failed (see data.log)"; }

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

if [ $parity -eq 1 ]; then
    say "== parity (h100_defconfig shapes in FP32, against PyTorch)"
    d=build/parity
    mkdir -p $d
    { grep -v '^CONFIG_PRECISION_' configs/h100_defconfig; echo CONFIG_PRECISION_FP32=y; } >$d/def
    { make --no-print-directory O=$d defconfig DEFCONFIG=$d/def && make --no-print-directory O=$d -j"$(nproc)" $d/app/mnist; } >"$L/parity-build.log" 2>&1
    rm -rf "$d/dump"; mkdir -p "$d/dump"
    $d/app/mnist --epochs 1 --dump $d/dump --log "$L/parity-run.jsonl" >"$L/parity-run.txt" 2>&1
    python3 tools/torch_parity.py $d/dump --png "$OUT/parity.png" >"$L/parity.txt" 2>&1
    tail -n 3 "$L/parity.txt" | tee -a "$S"
fi

if [ $bench -eq 1 ]; then
    say "== benchmark"
    python3 tools/bench.py --out "$L/bench" >"$L/bench.txt" 2>&1
    cat "$L/bench/bench.md" 2>/dev/null | tee -a "$S" || tail -n 20 "$L/bench.txt" | tee -a "$S"
fi

tar czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$L"
say "== done $(date -u +%FT%TZ)"
