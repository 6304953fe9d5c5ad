#!/usr/bin/env bash
# make test: builds the host configuration (and the small one the gradient
# check uses), runs every host test, and the GPU tests where a GPU is present.
# Each test prints "ok - NAME", "not ok - NAME: WHY" or "skip - NAME: WHY";
# this script counts them and ends with "N passed, N failed, N skipped".
set -u
shopt -s lastpipe # so that "... | count" tallies in this shell
cd "$(dirname "$0")/.."
export SNN_TEST_OUT=${SNN_TEST_OUT:-build/test}
mkdir -p "$SNN_TEST_OUT"
pass=0 fail=0 skip=0

count() { # reads test output, echoes it, tallies the verdict lines
    local line
    while IFS= read -r line; do
        echo "$line"
        case "$line" in
        "ok - "*) pass=$((pass + 1)) ;;
        "not ok - "*) fail=$((fail + 1)) ;;
        "skip - "*) skip=$((skip + 1)) ;;
        esac
    done
}

# build NAME O CONFIG-GOAL...: one case; its log is $O.log.
build() {
    local name=$1 out=$2; shift 2
    if make --no-print-directory O="$out" "$@" >"$out.log" 2>&1 &&
        make --no-print-directory O="$out" EXTRA_WARN=-Werror -j"$(nproc)" >>"$out.log" 2>&1; then
        echo "ok - build $name (warning-free, -Werror)"
    else
        echo "not ok - build $name: see $out.log"; tail -n 20 "$out.log" | sed 's/^/    /'
        return 1
    fi
}

if make --no-print-directory data >"$SNN_TEST_OUT/data.log" 2>&1; then echo "ok - make data: MNIST present and verified"
else echo "not ok - make data failed: see $SNN_TEST_OUT/data.log"; fi | count

H=$SNN_TEST_OUT/host S=$SNN_TEST_OUT/small
build host_defconfig "$H" host_defconfig | count
build tests/configs/small_defconfig "$S" defconfig DEFCONFIG=tests/configs/small_defconfig | count
P=$SNN_TEST_OUT/pool
build tests/configs/pool_defconfig "$P" defconfig DEFCONFIG=tests/configs/pool_defconfig | count

# Every GPU board compiles (no GPU needed), and so does the device side of
# the other memory strategies; CI must have nvcc.
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
gpu_build() { # NAME O CONFIG-GOAL...: build, unless there is no nvcc
    if [ -n "$NVCC" ]; then build "$1 (compile only)" "${@:2}"
    elif [ "${CI:-}" = true ]; then echo "not ok - build $1: CI has no nvcc"
    else echo "skip - build $1: skipped: no nvcc"; fi
}
for f in $(grep -l '^CONFIG_TARGET_SM' configs/*_defconfig); do
    b=$(basename "$f" _defconfig)
    gpu_build "${b}_defconfig" "$SNN_TEST_OUT/board-$b" "${b}_defconfig"
done | count
for s in POOL CUDA_ASYNC; do
    d=$SNN_TEST_OUT/board-h100-mm-$s
    mkdir -p "$d" && { cat configs/h100_defconfig; echo "CONFIG_MM_$s=y"; } >"$d/def"
    gpu_build "h100_defconfig with CONFIG_MM_$s" "$d" defconfig DEFCONFIG="$d/def"
done | count

run() { # run NAME CMD...: a test program or script; a crash is a failure
    local name=$1; shift
    if [ ! -x "$1" ] && [ "${1##*.}" != sh ]; then echo "not ok - $name: $1 was not built"; return; fi
    "$@" 2>&1; local rc=$?
    [ $rc -eq 0 ] || echo "not ok - $name: exited with status $rc"
}

# make run: configure for this machine (no GPU here: host), build, train.
if out=$(make --no-print-directory run O="$SNN_TEST_OUT/run" 2>&1) &&
    epochs=$(sed -n 's/^CONFIG_TRAIN_EPOCHS=//p' "$SNN_TEST_OUT/run/.config") &&
    grep -q "^ *$epochs .*%" <<<"$out"; then
    echo "ok - make run configures, builds and trains all epochs"
else echo "not ok - make run: $(tail -n 3 <<<"$out" | tr '\n' ' ')"; fi | count

run "host kernels" "$H/tests/bin/host/test_kernels" | count
run "gradient check" "$S/tests/bin/host/test_gradcheck" | count
run "pool allocator" "$H/tests/bin/host/test_pool" | count
run "memory strategies" tests/host/test_strategies.sh "$H" "$P" | count
run "memory benchmark tables" tests/host/test_bench_mm.py | count
# the first python3 with numpy (Debian's python3-numpy is under /usr/bin/python3)
NUMPY_PYTHON=$(for p in python3 /usr/bin/python3; do "$p" -c 'import numpy' 2>/dev/null && command -v "$p" && break; done)
run "torch_parity numerics" "${NUMPY_PYTHON:-$(command -v python3)}" tests/host/test_torch_parity.py "$H/app/mnist" | count
run "idx reader" tests/host/test_idx.sh "$H/tests/bin/host/test_idx_load" | count
run "fetch" tests/host/test_fetch.sh | count
run "config" tests/host/test_config.sh | count
run "menuconfig" tests/host/test_menuconfig.sh | count
run "tensor-core ptx" tests/host/test_ptx.sh | count
run "program" tests/host/test_app.sh "$H/app/mnist" | count
run "gpu" tests/gpu/run.sh | count

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
