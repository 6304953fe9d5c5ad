#!/usr/bin/env bash
# make test (every suite) and make check (tests/run.sh --quick: the quick
# ones, for the edit-build-test loop). Each test prints "ok - NAME",
# "not ok - NAME: WHY" or "skip - NAME: WHY"; this script says up front what
# it will run and for about how long, times each suite, and ends with
# "N passed, N failed, N skipped".
set -u
shopt -s lastpipe # so that "... | count" tallies in this shell
cd "$(dirname "$0")/.."
quick=0
case ${1:-} in
--quick) quick=1 ;;
"") ;;
*) echo "usage: tests/run.sh [--quick]" >&2; exit 2 ;;
esac
export SNN_TEST_OUT=${SNN_TEST_OUT:-build/test}
mkdir -p "$SNN_TEST_OUT"
pass=0 fail=0 skip=0
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
H=$SNN_TEST_OUT/host S=$SNN_TEST_OUT/small P=$SNN_TEST_OUT/pool
G=$SNN_TEST_OUT/guards V=$SNN_TEST_OUT/validation

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

# build NAME O CONFIG-GOAL...: one configuration, warning-free; its log is $O.log.
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

run() { # run NAME CMD...: a test program or script; a crash is a failure
    local name=$1; shift
    if [ ! -x "$1" ] && [ "${1##*.}" != sh ]; then echo "not ok - $name: $1 was not built"; return; fi
    "$@" 2>&1; local rc=$?
    [ $rc -eq 0 ] || echo "not ok - $name: exited with status $rc"
}

# ---- the suites: each a function, listed below with its time and whether
# ---- make check runs it

suite_data() {
    if make --no-print-directory data >"$SNN_TEST_OUT/data.log" 2>&1; then
        echo "ok - make data: MNIST $(grep -q 'nothing to fetch' "$SNN_TEST_OUT/data.log" && echo 'already there' ||
            echo 'fetched'), verified"
    else echo "not ok - make data failed: see $SNN_TEST_OUT/data.log"; fi
}

suite_builds() {
    build host_defconfig "$H" host_defconfig
    build tests/configs/small_defconfig "$S" defconfig DEFCONFIG=tests/configs/small_defconfig
    build tests/configs/pool_defconfig "$P" defconfig DEFCONFIG=tests/configs/pool_defconfig
    build tests/configs/validation_defconfig "$V" defconfig DEFCONFIG=tests/configs/validation_defconfig
    local g
    for g in diverge collapse; do
        build "tests/configs/${g}_defconfig" "$G-$g" defconfig DEFCONFIG="tests/configs/${g}_defconfig"
    done
}

suite_host_kernels() { run "host kernels" "$H/tests/bin/host/test_kernels"; }

# The training recipes (tests/configs/recipe_*): each build's kernels against
# the double reference of its recipe, its plan, and its run step by step
# against the numpy trainer of tools/torch_parity.py (two epochs of 60 steps).
suite_recipe() {
    local r d py out
    py=$(python_with numpy)
    for r in nesterov adamw plain noise; do
        d=$SNN_TEST_OUT/recipe-$r
        build "tests/configs/recipe_${r}_defconfig" "$d" defconfig DEFCONFIG="tests/configs/recipe_${r}_defconfig" || continue
        run "host kernels, recipe $r" "$d/tests/bin/host/test_kernels" | sed "s/^\(ok\|not ok\|skip\) - /\1 - recipe $r: /"
        [[ $r == noise ]] && run "counter-based draws" "$d/tests/bin/host/test_noise"
        rm -rf "$d/dump"
        if ! out=$("$d/app/mnist" --data data/mnist --epochs 2 --max-steps 60 --dump "$d/dump" 2>&1); then
            echo "not ok - recipe $r: training: $(tail -n 3 <<<"$out" | tr '\n' ' ')"; continue
        fi
        case $r in # the plan holds the optimizer's state and nothing more
        plain) grep -q "^  momentum \|^  AdamW moments" <<<"$out" && echo "not ok - recipe $r: the plan has optimizer state" ||
            echo "ok - recipe $r: no momentum, no optimizer state in the plan" ;;
        adamw) grep -q "^  AdamW moments" <<<"$out" && echo "ok - recipe $r: the plan holds AdamW's two moments" ||
            echo "not ok - recipe $r: no AdamW moments in the plan" ;;
        esac
        if out=$("$py" tools/torch_parity.py "$d/dump" --backend numpy --epochs 2 2>&1) && [[ $out == *PASS ]]; then
            echo "ok - recipe $r: parity with the numpy trainer, steps 1-50: $(tail -n 1 <<<"$out" | sed 's/.*max rel diff \([^,]*\),.*/max rel diff \1/')"
        else echo "not ok - recipe $r: parity: $(tail -n 3 <<<"$out" | tr '\n' ' ')"; fi
        [[ $r == noise ]] || continue # its dumped draws: one flipped mask bit is found
        "$py" -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[74] ^= 1; open(sys.argv[1], "wb").write(b)' \
            "$d/dump/draws-1.bin" # step 1, byte 10 of hidden layer 0's mask (after 32 rows' dx, dy)
        if out=$("$py" tools/torch_parity.py "$d/dump" --backend numpy --epochs 1 2>&1); then
            echo "not ok - recipe noise: a dumped dropout mask changed, and parity did not notice"
        elif [[ $out == *"dropout mask of hidden layer 0 differs"* ]]; then
            echo "ok - recipe noise: a changed bit of the dumped dropout masks is refused by name"
        else echo "not ok - recipe noise: a changed dumped mask: $(tail -n 1 <<<"$out")"; fi
    done
}
suite_gradcheck() { run "gradient check" "$S/tests/bin/host/test_gradcheck"; }
suite_pool() { run "pool allocator" "$H/tests/bin/host/test_pool"; }
suite_strategies() { run "memory strategies" tests/host/test_strategies.sh "$H" "$P"; }
suite_bench() { run "benchmark tables" tests/host/test_bench.py; }
suite_bench_mm() { run "memory benchmark tables" tests/host/test_bench_mm.py; }
suite_roofline() { run "roofline" tests/host/test_roofline.py; }
suite_idx() { run "idx reader" tests/host/test_idx.sh "$H/tests/bin/host/test_idx_load"; }
suite_safetensors() { run "safetensors reader" tests/host/test_safetensors.sh "$H/tests/bin/host/test_safetensors"; }
suite_images() { run "image files and digits" tests/host/test_images.sh "$H/tests/bin/host/test_image_load"; }
suite_fuzz() { SNN_FUZZ_SECONDS=$((quick ? 5 : 20)) run "fuzz" tests/host/test_fuzz.sh; }
suite_fetch() { run "fetch" tests/host/test_fetch.sh; }
suite_setup() { run "setup" tests/host/test_setup.sh; }
suite_config() { run "config" tests/host/test_config.sh; }
suite_layers() { run "layers" tests/host/test_layers.sh; }
suite_menuconfig() { run "menuconfig" tests/host/test_menuconfig.sh; }
suite_program() { run "program" tests/host/test_app.sh "$H/app/mnist"; }
suite_outputs() { run "outputs and signals" tests/host/test_outputs.sh "$H/app/mnist"; }
suite_model_files() { run "model files" tests/host/test_model_files.sh "$H/app/mnist"; }
suite_target() { run "seed, validation and target" tests/host/test_target.sh "$H/app/mnist" "$V/app/mnist"; }
suite_guards() { run "training guards" tests/host/test_guards.sh "$G-diverge/app/mnist" "$G-collapse/app/mnist"; }

# make run: configure for this machine (no GPU here: host), build, train.
suite_make_run() {
    local out epochs
    if out=$(make --no-print-directory run O="$SNN_TEST_OUT/run" 2>&1) &&
        epochs=$(sed -n 's/^CONFIG_TRAIN_EPOCHS=//p' "$SNN_TEST_OUT/run/.config") &&
        grep -q "^ *$epochs .*%" <<<"$out"; then
        echo "ok - make run configures, builds and trains all epochs"
    else echo "not ok - make run: $(tail -n 3 <<<"$out" | tr '\n' ' ')"; fi
}

# the first python3 that can import $1 (Debian's python3-* packages are under /usr/bin/python3)
python_with() {
    local p
    for p in python3 /usr/bin/python3; do "$p" -c "import $1" 2>/dev/null && command -v "$p" && return; done
    command -v python3
}

suite_torch_parity() { run "torch_parity numerics" "$(python_with numpy)" tests/host/test_torch_parity.py "$H/app/mnist"; }
suite_plot() { run "plot" "$(python_with matplotlib)" tests/host/test_plot.py "$H/app/mnist"; }
suite_tune() { run "tune" "$(python_with kconfiglib)" tests/host/test_tune.py "$SNN_TEST_OUT/tune"; }

# Every GPU board compiles (no GPU needed), and so does the device side of
# the other memory strategies; CI must have nvcc. A CUDA build run where no
# GPU or driver is says so and names the host target.
suite_gpu_builds() {
    if [ -z "$NVCC" ]; then
        if [ "${CI:-}" = true ]; then echo "not ok - GPU boards: CI has no nvcc"
        else echo "skip - GPU boards: skipped: no nvcc"; fi
        return
    fi
    # Each board's time goes mostly to one large translation unit (the GEMM
    # entry): two boards at a time keep two cores busy. Lines in board order.
    local f b d s order=()
    queue_build() { # NAME O CONFIG-GOAL...
        while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n; done
        build "$@" >"$2.verdict" 2>&1 &
        order+=("$2")
    }
    for f in $(grep -l '^CONFIG_TARGET_SM' configs/*_defconfig); do
        b=$(basename "$f" _defconfig)
        # a tuned board that kept every hand-made value (make tune) is the same build as its board
        if [[ $b == *_tuned ]] && diff -q <(grep -v '^#' "$f") <(grep -v '^#' "configs/${b%_tuned}_defconfig") >/dev/null; then
            echo "ok - ${b}_defconfig: the same settings as ${b%_tuned}_defconfig, built above" >"$SNN_TEST_OUT/board-$b.verdict"
            order+=("$SNN_TEST_OUT/board-$b")
            continue
        fi
        queue_build "${b}_defconfig (compile only)" "$SNN_TEST_OUT/board-$b" "${b}_defconfig"
    done
    for s in POOL CUDA_ASYNC; do
        d=$SNN_TEST_OUT/board-h100-mm-$s
        mkdir -p "$d" && { cat configs/h100_defconfig; echo "CONFIG_MM_$s=y"; } >"$d/def"
        queue_build "h100_defconfig with CONFIG_MM_$s (compile only)" "$d" defconfig DEFCONFIG="$d/def"
    done
    wait
    for d in "${order[@]}"; do cat "$d.verdict"; done
    run "CUDA build without a GPU" tests/host/test_no_gpu.sh "$SNN_TEST_OUT/board-rtx2060/app/mnist"
}

# SANITIZE=address,undefined: the host engine under ASan and UBSan, a short
# training run and the host kernel tests (a report exits non-zero).
suite_sanitize() {
    local d=$SNN_TEST_OUT/sanitize out
    SANITIZE=address,undefined build "host_defconfig SANITIZE=address,undefined" "$d" host_defconfig || return
    if out=$("$d/app/mnist" --data data/mnist --epochs 1 --max-steps 50 2>&1); then
        echo "ok - sanitized build: a short training run, no report"
    else echo "not ok - sanitized build: $(tail -n 5 <<<"$out" | tr '\n' ' ')"; fi
    run "sanitized host kernels" "$d/tests/bin/host/test_kernels" | sed 's/^\(ok\|not ok\|skip\) - /\1 - sanitized: /'
    run "sanitized image files and digits" tests/host/test_images.sh "$d/tests/bin/host/test_image_load" |
        sed 's/^\(ok\|not ok\|skip\) - /\1 - sanitized: /'
    run "sanitized safetensors reader" tests/host/test_safetensors.sh "$d/tests/bin/host/test_safetensors" |
        sed 's/^\(ok\|not ok\|skip\) - /\1 - sanitized: /'
    local m=("$d/app/mnist" --data data/mnist --max-steps 30) f=$d/model
    if out=$("${m[@]}" --epochs 1 --checkpoint "$f-c.st" 2>&1 && "${m[@]}" --epochs 2 --resume "$f-c.st" --save "$f.st" 2>&1 &&
        "$d/app/mnist" --data data/mnist --load "$f.st" --eval 2>&1 && predict_seeds "$d/app/mnist" "$f.st"); then
        echo "ok - sanitized build: checkpoint, resume, save, --eval and --predict, no report"
    else echo "not ok - sanitized build: model files: $(tail -n 5 <<<"$out" | tr '\n' ' ')"; fi
}

# predict_seeds APP MODEL: --predict over the image fuzz seeds classifies each
# good one (a line with a percentage) and refuses each bad-* one (its own
# error line, exit status 1); true if so.
predict_seeds() {
    local seeds=(tests/fuzz/corpus_image/*) bad=(tests/fuzz/corpus_image/bad-*) out rc b
    out=$("$1" --load "$2" --predict "${seeds[@]}" 2>&1)
    rc=$?
    echo "$out"
    [ $rc -eq 1 ] && [ "$(grep -c '%' <<<"$out")" -eq $((${#seeds[@]} - ${#bad[@]})) ] || return 1
    for b in "${bad[@]}"; do grep -q "$b" <<<"$out" || return 1; done
}

suite_ptx() { run "tensor-core ptx" tests/host/test_ptx.sh; }
suite_gpu() { run "gpu" tests/gpu/run.sh; }

# NAME SECONDS QUICK: seconds as measured on the 2-core development machine
# (AMD EPYC, idle); QUICK=y: make check runs it too.
SUITES="
data          2 y
builds       13 y
host_kernels  1 y
recipe       26 n
gradcheck     1 y
pool          1 y
strategies    2 y
bench         1 y
bench_mm      1 y
roofline      1 y
idx           2 y
safetensors   1 y
images        3 y
fuzz         22 y
fetch         3 y
setup         1 y
config       28 y
layers        1 y
outputs       3 y
guards        3 y
target       18 y
model_files  10 y
program      10 y
plot          7 y
menuconfig   12 n
make_run     10 n
torch_parity  6 n
tune         22 n
sanitize     14 n
gpu_builds  650 n
ptx          80 n
gpu           1 n
"
chosen=() total=0
while read -r name secs q; do
    [ -n "$name" ] || continue
    [ $quick -eq 1 ] && [ "$q" != y ] && continue
    [ $quick -eq 1 ] && [ "$name" = fuzz ] && secs=7
    chosen+=("$name:$secs") total=$((total + secs))
done <<<"$SUITES"
echo "# $([ $quick -eq 1 ] && echo 'make check' || echo 'make test'): ${#chosen[@]} suites, about $(((total + 30) / 60)) min" \
    "($total s) on an idle 2-core machine$([ $quick -eq 0 ] && echo '; make check runs the quick ones in under 2 min')"
i=0
for entry in "${chosen[@]}"; do
    name=${entry%:*} i=$((i + 1)) t0=$(date +%s)
    echo "# [$i/${#chosen[@]}] $name (about ${entry#*:} s)"
    "suite_$name" | count
    echo "# $name: $(($(date +%s) - t0)) s"
done

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
