#!/usr/bin/env bash
# The test tiers, one suite table (tests/suites.txt) for all three:
#   tests/run.sh --tier check   make check: the edit-build-test loop
#   tests/run.sh --tier test    make test (the README's command, CI's): everything that guards
#                               behaviour; one CUDA build and one GPU variant per code path
#   tests/run.sh --tier full    make test-full: the whole matrix (every board compiled, every GPU
#                               variant, long fuzzing), for a release or a change to the kernels
#   tests/run.sh --estimate T   the tier's estimate alone (make help; the README's is checked against it)
#   tests/run.sh --record T     run tier T and write its suites' measured seconds into the table
# Each test prints "ok - NAME", "not ok - NAME: WHY" or "skip - NAME: WHY". The script says up front
# what it will run and for about how long, runs the data and the builds first, then the other suites
# one per core (each suite's lines printed whole, in the table's order, with its time), and ends with
# "N passed, N failed, N skipped".
set -u
shopt -s lastpipe # so that "... | count" tallies in this shell
cd "$(dirname "$0")/.."
TABLE=tests/suites.txt
usage() { echo "usage: tests/run.sh [--tier check|test|full | --estimate check|test|full | --record check|test|full]" >&2; exit 2; }
mode=run tier=test
case ${1:-} in
--tier | --estimate | --record) [ $# -eq 2 ] || usage; mode=${1#--}; tier=$2 ;;
"") ;;
*) usage ;;
esac
case $tier in check) letter=c ;; test) letter=t ;; full) letter=f ;; *) usage ;; esac
export SNN_TEST_TIER=$tier # suites that check less outside make test-full read it
gpu_present() { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }

# The tier's suites from the table: NAME:SECONDS, the GPU column where a GPU is present.
chosen=()
while read -r name secs gpu_secs tiers; do
    [[ -z $name || $name == \#* ]] && continue
    [[ $tiers == *$letter* ]] || continue
    [ "$gpu_secs" != - ] && gpu_present && secs=$gpu_secs
    chosen+=("$name:$secs")
done <"$TABLE"
CORES=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) # nproc answers OMP_NUM_THREADS where it is set
JOBS=$((CORES < 2 ? 1 : 2)) # suites build with make -j themselves; two at a time keep a big machine busy enough
# Each suite's share of the cores once they run side by side (below): the host engine's OpenMP threads,
# and (nproc answers it) the make -j of the suites' builds. Results are the same with any thread count;
# two suites of spinning threads on two cores ran 10x slower.
SHARE=$((CORES / JOBS))
# The estimate: the first two suites (data, builds) alone, the rest as the scheduler below runs them,
# each taken by the first free worker in table order.
estimate() {
    local e i first=0 free=() w best
    for ((w = 0; w < JOBS; w++)); do free+=(0); done
    for ((i = 0; i < ${#chosen[@]}; i++)); do
        e=${chosen[i]#*:}
        if [ "$i" -lt 2 ]; then first=$((first + e)); continue; fi
        best=0; for ((w = 1; w < JOBS; w++)); do [ "${free[w]}" -lt "${free[best]}" ] && best=$w; done
        free[best]=$((free[best] + e))
    done
    best=0; for ((w = 1; w < JOBS; w++)); do [ "${free[w]}" -gt "${free[best]}" ] && best=$w; done
    echo $((first + free[best]))
}
say_minutes() { local s=$1; [ "$s" -lt 90 ] && echo "about $s s" || echo "about $(((s + 30) / 60)) min"; }
if [ "$mode" = estimate ]; then
    echo "$(say_minutes "$(estimate)") on an idle 2-core machine$(gpu_present && echo ', with the GPU tests')"; exit 0
fi

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

# ---- the suites: each a function; tests/suites.txt gives each one's time and tiers

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
    for r in nesterov adamw plain noise widths distort; do
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
        [[ $r == widths || $r == distort ]] && recipe_resumes "$r" "$d"
        [[ $r == widths ]] && recipe_widths_refused "$d"
        if [[ $r == distort ]]; then # a dumped affine map changed: refused by name
            "$py" -c 'import struct, sys; b = bytearray(open(sys.argv[1], "rb").read()); at = 2 * 32 + 4 * 6 * 5
b[at:at + 4] = struct.pack("<f", struct.unpack("<f", b[at:at + 4])[0] * 1.001); open(sys.argv[1], "wb").write(b)' \
                "$d/dump/draws-1.bin" # step 1: 32 rows' dx, dy, then row 5's m00
            if out=$("$py" tools/torch_parity.py "$d/dump" --backend numpy --epochs 1 2>&1); then
                echo "not ok - recipe distort: a dumped affine map changed, and parity did not notice"
            elif [[ $out == *"step 1's affine maps differ"* ]]; then
                echo "ok - recipe distort: a changed float of the dumped affine maps is refused by name"
            else echo "not ok - recipe distort: a changed dumped map: $(tail -n 1 <<<"$out")"; fi
        fi
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
# A run resumed from its mid-run checkpoint ends with the straight run's bytes (mixed widths; the draws of
# distortions, functions of where they are made).
recipe_resumes() { # RECIPE DIR
    local r=$1 d=$2 a="--data data/mnist --max-steps 60"
    rm -f "$d/straight.st" "$d/resumed.st" "$d/ckpt.st"
    if "$d/app/mnist" $a --epochs 2 --save "$d/straight.st" >/dev/null 2>&1 &&
        "$d/app/mnist" $a --epochs 1 --checkpoint "$d/ckpt.st" >/dev/null 2>&1 &&
        "$d/app/mnist" $a --epochs 2 --resume "$d/ckpt.st" --save "$d/resumed.st" >/dev/null 2>&1 &&
        cmp -s "$d/straight.st" "$d/resumed.st"; then
        echo "ok - recipe $r: resumed from epoch 1's checkpoint, the straight run's bytes"
    else echo "not ok - recipe $r: the resumed run's file differs from the straight run's (or a run failed)"; fi
}
# The host board's build (784-256-10) refuses mixed widths' weights, naming both shapes.
recipe_widths_refused() { # DIR
    local d=$1 out
    if out=$("$H/app/mnist" --data data/mnist --load "$d/straight.st" --eval 2>&1); then
        echo "not ok - recipe widths: the 784-256-10 build loaded a 784-300-37-100-10 file"
    elif [[ $out == *"the file's is 784-300-37-100-10, this build's is 784-256-10"* ]]; then
        echo "ok - recipe widths: another shape's build refuses the file, naming both shapes"
    else echo "not ok - recipe widths: the refusal: $(tail -n 1 <<<"$out")"; fi
}
suite_gradcheck() { run "gradient check" "$S/tests/bin/host/test_gradcheck"; }
# Data parallelism's host parts: the gradients' buckets, the launchers' variables, the rendezvous, the ranks
# a run starts itself (arch/dp.c); and the configure-time prediction: a board that would not pay warns, one
# that pays does not.
suite_dp() {
    run "data-parallel processes" "$H/tests/bin/host/test_dp"
    local d=$SNN_TEST_OUT/dp-config out
    mkdir -p "$d" && printf '%s\n' CONFIG_TARGET_SM90=y CONFIG_NN_HIDDEN_WIDTH=128 CONFIG_STEP_LAYERED=y CONFIG_DP=y >"$d/small"
    if out=$(make --no-print-directory O="$d" defconfig DEFCONFIG="$d/small" 2>&1) &&
        [[ $out == *"data parallelism predicts at least "*"x on 2 GPUs"*"below 1.1x"* ]]; then
        echo "ok - dp: 784-128-10 on 2 GPUs warns at configure time: the all-reduce outweighs the step"
    else echo "not ok - dp: no configure-time warning for 784-128-10 on 2 GPUs: $(tail -n 1 <<<"$out")"; fi
    printf '%s\n' CONFIG_TARGET_SM90=y CONFIG_NN_HIDDEN_LAYERS=2 CONFIG_NN_HIDDEN_WIDTH=2048 CONFIG_TRAIN_BATCH_SIZE=8192 \
        CONFIG_DP=y CONFIG_DP_REDUCE_BF16=y >"$d/large"
    if out=$(make --no-print-directory O="$d" defconfig DEFCONFIG="$d/large" 2>&1) && [[ $out != *warning* ]]; then
        echo "ok - dp: 784-2048x2-10 at batch 8192 on 2 GPUs (BF16 gradients) predicts above 1.1x: no warning"
    else echo "not ok - dp: 784-2048x2-10 b8192 configured: $(tail -n 1 <<<"$out")"; fi
    if out=$(make --no-print-directory O="$d" h100_dp2_4096x4_b1024_defconfig 2>&1) &&
        [[ $out == *"predicts 0.84x on 2 GPUs (the 1071 us step make tune measured"* ]]; then
        echo "ok - dp: h100_dp2_4096x4_b1024's prediction starts from its tuned twin's measured step (0.84x, warned)"
    else echo "not ok - dp: h100_dp2_4096x4_b1024's prediction: $(tail -n 1 <<<"$out")"; fi
}
suite_pool() { run "pool allocator" "$H/tests/bin/host/test_pool"; }
suite_strategies() { run "memory strategies" tests/host/test_strategies.sh "$H" "$P"; }
suite_bench() { run "benchmark tables" tests/host/test_bench.py; }
suite_bench_mm() { run "memory benchmark tables" tests/host/test_bench_mm.py; }
suite_roofline() { run "roofline" tests/host/test_roofline.py; }
suite_idx() { run "idx reader" tests/host/test_idx.sh "$H/tests/bin/host/test_idx_load"; }
suite_safetensors() { run "safetensors reader" tests/host/test_safetensors.sh "$H/tests/bin/host/test_safetensors"; }
suite_images() { run "image files and digits" tests/host/test_images.sh "$H/tests/bin/host/test_image_load"; }
suite_fuzz() { # seconds of fuzzing per target, by tier
    local secs; case $tier in check) secs=5 ;; test) secs=20 ;; full) secs=300 ;; esac
    SNN_FUZZ_SECONDS=$secs run "fuzz" tests/host/test_fuzz.sh
}
suite_fetch() { run "fetch" tests/host/test_fetch.sh; }
suite_setup() { run "setup" tests/host/test_setup.sh; }
suite_docs() { run "documents against the code" "$(python_with kconfiglib)" tests/host/test_docs.py; }
suite_config() { run "config" tests/host/test_config.sh; }
suite_layers() { run "layers" tests/host/test_layers.sh; }
# tools/ holds together: the paths the tree names, the index, the Python tools' imports; and the GPU
# suite's plan, which a CPU can list
suite_tools() {
    run "tool paths" tests/host/test_tool_paths.py
    run "tool imports" tests/host/test_tool_imports.py
    run "gpu plan" tests/host/test_gpu_plan.sh
}
suite_gpu_pool() { run "runs spread over GPUs" tests/host/test_gpu_pool.py "$H/app/mnist" "$V/app/mnist"; }
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
suite_committee() { run "committee" "$(python_with numpy)" tests/host/test_committee.py "$H/app/mnist" "$V/app/mnist"; }
suite_plot() { run "plot" "$(python_with matplotlib)" tests/host/test_plot.py "$H/app/mnist"; }
suite_tune() { run "tune" "$(python_with kconfiglib)" tests/host/test_tune.py "$SNN_TEST_OUT/tune"; }

# The GPU boards compile warning-free (no GPU needed), and so does the device side of the other memory
# strategies; CI must have nvcc. make test compiles one board per code path (REPRESENTATIVES; the last:
# the A panel and the weight steps beside), make test-full every board. A CUDA build run where no GPU or
# driver is says so and names the host target.
REPRESENTATIVES="rtx2060 a100 h100 h100_8192x3_b32 h100_784x4_b64 h100_128x1_b64 h100_speedrun99
    h100_2048x3_b256_tuned"
# rtx2060: sm75 mma.sync m16n8k8, FP16 accumulation; a100: sm80 cp.async + m16n8k16, layered; h100: the
# fused step's grid-wide kernel and the wgmma GEMMs; 8192x3: wgmma, persistent, split-K; 784x4: the
# grid-resident kernel; 128x1: the cluster-resident kernel; speedrun99: AdamW, dropout and translation on
# the GPU's layered step.
suite_gpu_builds() {
    if [ -z "$NVCC" ]; then
        if [ "${CI:-}" = true ]; then echo "not ok - GPU boards: CI has no nvcc"
        else echo "skip - GPU boards: skipped: no nvcc"; fi
        return
    fi
    # Each board's time goes mostly to its GEMM roles' and fused kernels' units: two boards at a time,
    # each make -j2, keep two cores busy. Lines in board order.
    local f b d s boards=() order=()
    queue_build() { # NAME O CONFIG-GOAL...
        while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n; done
        build "$@" >"$2.verdict" 2>&1 &
        order+=("$2")
    }
    if [ "$tier" = full ]; then
        for f in $(grep -l '^CONFIG_TARGET_SM' configs/*_defconfig); do boards+=("$(basename "$f" _defconfig)"); done
    else boards=($REPRESENTATIVES); fi
    for b in "${boards[@]}"; do
        queue_build "${b}_defconfig (compile only)" "$SNN_TEST_OUT/board-$b" "${b}_defconfig"
    done
    # mixed hidden widths on the fused step: its grid-wide kernel at each layer's shape, the resident ones refused
    d=$SNN_TEST_OUT/board-widths-fused
    mkdir -p "$d" && printf '%s\n' CONFIG_TARGET_SM90=y CONFIG_STEP_FUSED=y CONFIG_NN_HIDDEN_LAYERS=3 \
        CONFIG_NN_HIDDEN_WIDTH_1=300 CONFIG_NN_HIDDEN_WIDTH_2=37 CONFIG_NN_HIDDEN_WIDTH_3=100 \
        CONFIG_TRAIN_BATCH_SIZE=17 'CONFIG_TRAIN_DROPOUT="0.25"' >"$d/def"
    queue_build "784-300-37-100-10 on sm90's fused step (compile only)" "$d" defconfig DEFCONFIG="$d/def"
    if [ "$tier" = full ]; then # the largest batch and widths: the resident kernels' sizes past 2^31, unlaunched
        d=$SNN_TEST_OUT/board-fused-b16384
        mkdir -p "$d" && printf '%s\n' CONFIG_TARGET_SM90=y CONFIG_STEP_FUSED=y CONFIG_NN_HIDDEN_LAYERS=2 \
            CONFIG_NN_HIDDEN_WIDTH=16384 CONFIG_TRAIN_BATCH_SIZE=16384 >"$d/def"
        queue_build "784-16384x2-10 b16384 on sm90's fused step (compile only)" "$d" defconfig DEFCONFIG="$d/def"
    fi
    # data parallelism: linked with NCCL (libnccl of the CUDA toolkit)
    queue_build "h100_dp2_4096x4_b1024_defconfig, NCCL (compile only)" "$SNN_TEST_OUT/board-dp2" h100_dp2_4096x4_b1024_defconfig
    for s in POOL CUDA_ASYNC; do
        d=$SNN_TEST_OUT/board-a100-mm-$s
        mkdir -p "$d" && { cat configs/a100_defconfig; echo "CONFIG_MM_$s=y"; } >"$d/def"
        queue_build "a100_defconfig with CONFIG_MM_$s (compile only)" "$d" defconfig DEFCONFIG="$d/def"
    done
    wait
    for d in "${order[@]}"; do cat "$d.verdict"; done
    run "CUDA build without a GPU" tests/host/test_no_gpu.sh "$SNN_TEST_OUT/board-rtx2060/app/mnist"
}

# SANITIZE=address,undefined: the host engine under ASan and UBSan, a short
# training run, the host kernel tests and the readers' tests (IDX, images,
# safetensors; a report exits non-zero).
suite_sanitize() {
    local d=$SNN_TEST_OUT/sanitize out
    SANITIZE=address,undefined build "host_defconfig SANITIZE=address,undefined" "$d" host_defconfig || return
    if out=$("$d/app/mnist" --data data/mnist --epochs 1 --max-steps 50 2>&1); then
        echo "ok - sanitized build: a short training run, no report"
    else echo "not ok - sanitized build: $(tail -n 5 <<<"$out" | tr '\n' ' ')"; fi
    run "sanitized host kernels" "$d/tests/bin/host/test_kernels" | sed 's/^\(ok\|not ok\|skip\) - /\1 - sanitized: /'
    run "sanitized idx reader" tests/host/test_idx.sh "$d/tests/bin/host/test_idx_load" |
        sed 's/^\(ok\|not ok\|skip\) - /\1 - sanitized: /'
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

# The tier's suites: data and builds first, alone (every other suite uses what they leave), then the
# others JOBS at a time. A suite's lines go to its own file and are printed whole, in table order, as
# soon as it and every suite before it have ended.
echo "# make $([ "$tier" = check ] && echo check || { [ "$tier" = full ] && echo test-full || echo test; }):" \
    "${#chosen[@]} suites, $(say_minutes "$(estimate)") on an idle 2-core machine$(gpu_present && echo ', with the GPU tests')"
mkdir -p "$SNN_TEST_OUT/suites"
run_suite() { # INDEX NAME: the suite's output and seconds into files
    local i=$1 name=$2 t0
    t0=$(date +%s)
    "suite_$name" >"$SNN_TEST_OUT/suites/$i.out" 2>&1
    echo $(($(date +%s) - t0)) >"$SNN_TEST_OUT/suites/$i.secs"
}
rm -f "$SNN_TEST_OUT"/suites/*
printed=0 measured=()
print_done() { # prints the ended suites in order, up to the first still running
    local name
    while [ $printed -lt ${#chosen[@]} ] && [ -f "$SNN_TEST_OUT/suites/$printed.secs" ]; do
        name=${chosen[printed]%:*}
        echo "# [$((printed + 1))/${#chosen[@]}] $name (about ${chosen[printed]#*:} s)"
        count <"$SNN_TEST_OUT/suites/$printed.out"
        measured+=("$name $(cat "$SNN_TEST_OUT/suites/$printed.secs")")
        echo "# $name: $(cat "$SNN_TEST_OUT/suites/$printed.secs") s"
        printed=$((printed + 1))
    done
}
for i in "${!chosen[@]}"; do
    if [ "$i" -lt 2 ]; then run_suite "$i" "${chosen[i]%:*}"; print_done; continue; fi
    export OMP_NUM_THREADS=$SHARE
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; print_done; done
    run_suite "$i" "${chosen[i]%:*}" &
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n; print_done; done
print_done

if [ "$mode" = record ]; then # the measured seconds into this tier's rows, the GPU column where a GPU is
    col=2; gpu_present && col=3
    for m in "${measured[@]}"; do
        awk -v n="${m% *}" -v s="${m#* }" -v c=$col -v l=$letter '
            /^#/ || NF == 0 { print; next }
            $1 == n && index($4, l) { $c = s }
            { printf "%-14s %5s %5s  %s\n", $1, $2, $3, $4 }' "$TABLE" >"$TABLE.new" && mv "$TABLE.new" "$TABLE"
    done
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
