#!/usr/bin/env bash
# GPU tests, run by tests/run.sh: where a CUDA GPU is present, the GPU variants of the tier
# (SNN_TEST_TIER, set by tests/run.sh, test when run alone: test, one per code path; full, every one) are
# planned (each a defconfig in its own directory), built side by side (the device machine's cores), then
# checked one after another on the GPU:
# the kernel tests, the training-step test, the fused step's op-by-op test, and where marked an epoch
# against the host engine, determinism, resume and PyTorch loading, compute-sanitizer (memcheck,
# racecheck, synccheck), the memory strategies against the static arena. Elsewhere: one "skip" line.
# SNN_GPU_PARTS picks parts of the tier (default all: boards others precisions wgmma strategies fused dp);
# SNN_GPU_ONLY, glob patterns, keeps the variants whose names match one (a part too long for one sitting,
# run in pieces; a check on another variant's build, as NAME-layered on NAME's, needs both named);
# tests/gpu/run.sh --list prints the tier's variants, part by part.
set -u
cd "$(dirname "$0")/../.."
. tools/lib/gpu.sh
OUT=${SNN_TEST_OUT:-build/test}
TIER=${SNN_TEST_TIER:-test}
PARTS=" ${SNN_GPU_PARTS:-boards others precisions wgmma strategies fused dp} "
part_wanted() { [[ $PARTS == *" $1 "* ]]; }
only_wanted() { # NAME
    local p pats
    [ -z "${SNN_GPU_ONLY:-}" ] && return 0
    read -ra pats <<<"$SNN_GPU_ONLY" # split, not matched against files
    # shellcheck disable=SC2053 # the right-hand side is a glob
    for p in "${pats[@]}"; do [[ $1 == $p ]] && return 0; done
    return 1
}
case $TIER in test | full) ;; *) echo "not ok - gpu tests: SNN_TEST_TIER=$TIER is neither test nor full"; exit 0 ;; esac
mkdir -p "$OUT" # run alone (SNN_GPU_PARTS=...), not under tests/run.sh
ACTION=${1:-check}
case $ACTION in check | --list | --build-only) ;; *) echo "usage: tests/gpu/run.sh [--list | --build-only]" >&2; exit 2 ;; esac
cc=$(gpu_cc)
# --list and --build-only (the variants compiled, nothing run: a CPU machine can check they build) for a
# card of SNN_GPU_CC's capability (default the card present, else an H100's)
[ "$ACTION" != check ] && cc=${SNN_GPU_CC:-${cc:-90}}
if [ -z "$cc" ]; then echo "skip - gpu tests: skipped: no GPU"; exit 0; fi
NVCC=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
if [ -z "$NVCC" ] && [ "$ACTION" != --list ]; then echo "not ok - gpu tests: no nvcc"; exit 0; fi
DATA=${SNN_DATA:-data/mnist}
HOST_APP=$OUT/host/app/mnist
TOL_POINTS=0.3
full() { [ "$TIER" = full ]; } # a variant only the full tier runs

prefixed() { # BOARD CMD...: CMD's verdict lines tagged with the board; a crash is a failure
    local board=$1; shift
    "$@" 2>&1 | sed "s/^\(ok\|not ok\|skip\) - /\1 - $board: /"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || echo "not ok - $board: $(basename "$1") exited with status $rc"
}

# The script runs its variants twice: MODE=plan writes each one's defconfig and lists its directory
# (nothing is built or run), then every listed variant is built side by side, then MODE=check runs the
# same calls again, each finding its build done and checking it on the GPU.
MODE=plan planned=() planned_parts=() part=
# planned NAME DIR: in the plan, lists DIR and answers false (the caller stops there); when checking, true;
# a variant SNN_GPU_ONLY leaves out answers false in both.
planned() {
    only_wanted "$1" || return 1
    [ "$MODE" = check ] && return 0
    [[ " ${planned[*]} " == *" $2 "* ]] || planned+=("$2") planned_parts+=("$part:$1") # a board two parts use: once
    return 1
}

# build_variant NAME DIR: DIR/def built for this card (its .log next to it), by the parallel phase.
build_variant() {
    local name=$1 d=$2
    if [ ! -f "$d.built" ]; then
        echo "not ok - gpu $name path: build for sm_$cc failed (see $d.log)"; tail -n 20 "$d.log"; return 1
    fi
    echo "ok - gpu $name path: built for sm_$cc ($(grep -o 'CONFIG_PRECISION_[A-Z0-9_]*=y' "$d/.config"))"
}
build_one() { # DIR: the program and the test programs, warning-free; DIR.built marks success
    local d=$1
    rm -f "$d.built"
    { make --no-print-directory O="$d" defconfig DEFCONFIG="$d/def" &&
        make --no-print-directory O="$d" -j2 EXTRA_WARN=-Werror test-programs; } >"$d.log" 2>&1 && touch "$d.built"
}

# check_variant NAME DIR: the kernel and training-step tests, and one epoch
# within TOL_POINTS of the host engine's validation accuracy
check_variant() {
    local name=$1 d=$2 acc
    prefixed "$name" "$d/tests/bin/gpu/test_kernels"
    prefixed "$name" "$d/tests/bin/gpu/test_step"
    [ -x "$d/tests/bin/gpu/test_fused" ] && prefixed "$name" "$d/tests/bin/gpu/test_fused"
    if "$d/app/mnist" --data "$DATA" --epochs 1 --log "$d/epoch.jsonl" >"$d/epoch.out" 2>&1; then
        acc=$(test_acc "$d/epoch.jsonl")
        if [ -n "$host_acc" ] && python3 -c "import sys; sys.exit(abs($acc - $host_acc) > $TOL_POINTS)"; then
            echo "ok - $name: one epoch reaches $acc% (host engine $host_acc%, within $TOL_POINTS points)"
        else echo "not ok - $name: one epoch reaches $acc%, host engine '$host_acc'% (tolerance $TOL_POINTS points)"; fi
    else echo "not ok - $name: the epoch run failed"; tail -n 5 "$d/epoch.out"; fi
}

# sanitize NAME DIR: compute-sanitizer memcheck, racecheck and synccheck over a short training run
sanitize() {
    local name=$1 d=$2 tool log rc
    if ! command -v compute-sanitizer >/dev/null; then
        echo "skip - $name: compute-sanitizer: skipped: not installed"; return
    fi
    for tool in memcheck racecheck synccheck; do
        log=$d/sanitizer-$tool.log
        compute-sanitizer --tool $tool --error-exitcode 3 "$d/app/mnist" --data "$DATA" --epochs 1 --max-steps 10 >"$log" 2>&1
        rc=$?
        if [ $rc -eq 0 ] && grep -q "ERROR SUMMARY: 0 errors\|RACECHECK SUMMARY: 0 hazards" "$log"; then
            echo "ok - $name: compute-sanitizer $tool over a short training run: 0 errors"
        else echo "not ok - $name: compute-sanitizer $tool (status $rc): $(grep -m1 'SUMMARY' "$log")"; fi
    done
}

# model_files BOARD DIR: on the device, 2 epochs + checkpoint + resume + 2
# epochs give the parameters of 4 epochs bit for bit; the saved weights load
# into PyTorch (safetensors.torch) and score what --eval scores (the host
# engine's for FP32, the device's for the board's precision).
model_files() {
    local board=$1 d=$2 run=("$2/app/mnist" --data "$DATA" --max-steps 300) acc host
    rm -f "$d"/full4.st "$d"/c2.st "$d"/resumed4.st
    if "${run[@]}" --epochs 4 --save "$d/full4.st" >"$d/resume.out" 2>&1 &&
        "${run[@]}" --epochs 2 --checkpoint "$d/c2.st" >>"$d/resume.out" 2>&1 &&
        "${run[@]}" --epochs 4 --resume "$d/c2.st" --save "$d/resumed4.st" >>"$d/resume.out" 2>&1 &&
        cmp -s "$d/full4.st" "$d/resumed4.st"; then
        echo "ok - $board: 2 epochs + checkpoint + resume + 2 epochs = 4 epochs, bit for bit, on the device"
    else echo "not ok - $board: resume identity on the device: $(tail -n 2 "$d/resume.out" | tr '\n' ' ')"; fi
    acc=$(eval_acc "$d/app/mnist" "$d/full4.st") host=$(eval_acc "$HOST_APP" "$d/full4.st")
    if [ -z "$acc" ] || [ -z "$host" ]; then echo "not ok - $board: --load --eval printed no accuracy"; return; fi
    python3 tests/gpu/test_torch_load.py "$d/full4.st" "$DATA" "$host" "$acc" 2>&1 |
        sed "s/^\(ok\|not ok\|skip\) - /\1 - $board: /"
}
# resume_mid_epoch BOARD DIR: a SIGINT inside an epoch (a board whose steps
# take a millisecond, so the signal lands between steps), then --resume from
# its checkpoint: the uninterrupted run's parameters, bit for bit; then a
# SIGINT before the first step (while --log, a FIFO, waits for its reader).
resume_mid_epoch() {
    local board=$1 d=$2 run=("$2/app/mnist" --data "$DATA" --max-steps 600 --epochs 2) pid rc at
    rm -f "$d"/mid-*.st "$d/log.fifo"
    "${run[@]}" --save "$d/mid-full.st" >/dev/null 2>&1
    "${run[@]}" --checkpoint "$d/mid-c.st" >"$d/mid.out" 2>&1 &
    pid=$!
    for _ in $(seq 500); do grep -q '^epoch ' "$d/mid.out" && break; sleep 0.02; done
    sleep 0.3; kill -INT $pid; wait $pid; rc=$?
    at=$(sed -n 's/.*interrupted by SIGINT in \(epoch [0-9]* after step [0-9]*\).*/\1/p' "$d/mid.out")
    if [ $rc -eq 130 ] && "${run[@]}" --resume "$d/mid-c.st" --save "$d/mid-resumed.st" >>"$d/mid.out" 2>&1 &&
        cmp -s "$d/mid-full.st" "$d/mid-resumed.st"; then
        echo "ok - $board: SIGINT in $at, then --resume: the uninterrupted run's parameters, bit for bit"
    else echo "not ok - $board: resume after SIGINT (status $rc, $at): $(tail -n 2 "$d/mid.out" | tr '\n' ' ')"; fi
    mkfifo "$d/log.fifo"
    "${run[@]}" --checkpoint "$d/mid-c0.st" --log "$d/log.fifo" >"$d/mid0.out" 2>&1 &
    pid=$!
    sleep 0.5; kill -INT $pid; cat "$d/log.fifo" >/dev/null; wait $pid; rc=$?
    if [ $rc -eq 130 ] && grep -q "in epoch 1 after step 0 of" "$d/mid0.out" &&
        "${run[@]}" --resume "$d/mid-c0.st" --save "$d/mid-resumed0.st" >>"$d/mid0.out" 2>&1 &&
        cmp -s "$d/mid-full.st" "$d/mid-resumed0.st"; then
        echo "ok - $board: SIGINT before the first step, then --resume: bit for bit"
    else echo "not ok - $board: resume from epoch 1 step 0 (status $rc): $(tail -n 2 "$d/mid0.out" | tr '\n' ' ')"; fi
}

eval_acc() { # APP FILE: the test accuracy APP's --eval of FILE prints
    "$1" --data "$DATA" --load "$2" --eval 2>&1 | sed -n 's/^test set: .*accuracy \([0-9.]*\)%.*/\1/p'
}

# build_board BOARD: BOARD's defconfig built for this card in $OUT/gpu-BOARD; a skip line and status 2
# where this card cannot run its code path; in the plan, status 1 once its def is written
build_board() {
    local board=$1 want d=$OUT/gpu-$1
    want=$(sed -n 's/^CONFIG_TARGET_SM\([0-9]*\)=y/\1/p' "configs/${board}_defconfig")
    if ! usable "$cc" "$want"; then
        echo "skip - gpu $board path: skipped: needs compute capability $want, this GPU is $cc"; return 2
    fi
    mkdir -p "$d"
    { cat "configs/${board}_defconfig"; echo "CONFIG_CUDA_ARCH_OVERRIDE=$cc"; } >"$d/def"
    planned "$board" "$d" || return
    build_variant "$board" "$d"
}

# The card's own board in full (its epoch against the host engine, determinism, model files, the three
# sanitizers); the other targets' boards on this card too, their epoch checked (make test) or in full.
check_board() { # BOARD
    local board=$1 d=$OUT/gpu-$1
    build_board "$board" || return
    mm_board=$board
    check_variant "$board" "$d"
    [ "$board" = "$own_board" ] || full || return 0

    rm -f "$d/a.bin" "$d/b.bin" # never compare files an earlier run left
    if "$d/app/mnist" --data "$DATA" --epochs 2 --max-steps 300 --save "$d/a.bin" >/dev/null 2>&1 &&
        "$d/app/mnist" --data "$DATA" --epochs 2 --max-steps 300 --save "$d/b.bin" >/dev/null 2>&1 &&
        cmp -s "$d/a.bin" "$d/b.bin"; then echo "ok - $board: two runs with one seed give identical parameters"
    else echo "not ok - $board: two runs with one seed differ"; fi

    model_files "$board" "$d"
    sanitize "$board" "$d"
    runs_over_gpus "$board" "$d"
}

# Independent runs over the host's GPUs (tools/lib/gpu_pool.py): two seeds of time_to_acc.py side by side,
# each on a GPU of its own; skipped with one GPU.
runs_over_gpus() { # BOARD DIR
    local board=$1 d=$2 n
    n=$(python3 -c 'import sys; sys.path.insert(0, "tools/lib"); import gpu_pool; print(len(gpu_pool.host_gpus()))')
    if [ "$n" -lt 2 ]; then echo "skip - $board: runs over GPUs: skipped: this host shows $n GPU"; return; fi
    if python3 tools/time_to_acc.py "$d/app/mnist" --target 90 --seeds 2 --gpus 2 --json "$d/tta.json" \
        -- --data "$DATA" --epochs 1 --max-steps 300 >"$d/tta.out" 2>&1 &&
        python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["rows"]
sys.exit(not (len({x["gpu"] for x in r}) == 2 and all(x["reached"] for x in r)))' "$d/tta.json"; then
        echo "ok - $board: two seeds side by side on two GPUs, each reaching 90 %"
    else echo "not ok - $board: two seeds on two GPUs: $(tail -n 2 "$d/tta.out" | tr '\n' ' ')"; fi
}
case $cc in 75) own_board=rtx2060 ;; 8*) own_board=a100 ;; *) own_board=h100 ;; esac

# Data parallelism (CONFIG_DP) where the host shows 2 or more GPUs: a small FP32 model with translation
# and dropout on 2 (and 4) GPUs, its first layer's gradients in two buckets, against its one-GPU twin at the
# same global batch: per-step losses within
# 1e-5 relative over 50 steps; two runs bitwise identical; a resumed run the straight run's bytes; under
# mpirun, the self-started run's bytes, and a launch of another world size refused. The same model in BF16
# with BF16 all-reduces (the weight gradients written in BF16 by the GEMM): the kernel tests, two runs
# bitwise identical, and the per-step losses near its one-GPU twin's (each gradient rounded to BF16 before
# the sum: within 1e-2 relative).
DP_MODEL="CONFIG_NN_HIDDEN_LAYERS=2 CONFIG_NN_HIDDEN_WIDTH=512 CONFIG_TRAIN_BATCH_SIZE=128
CONFIG_TRAIN_AUGMENT_SHIFT=2 CONFIG_TRAIN_DROPOUT=\"0.1\" CONFIG_TRAIN_LOG_EVERY=1"
host_gpu_count() { python3 -c 'import sys; sys.path.insert(0, "tools/lib"); import gpu_pool; print(len(gpu_pool.host_gpus()))'; }
dp_variant() { # NAME WORLD [LINE...]: DP_MODEL on WORLD GPUs (1: the one-GPU twin), for this card; FP32 unless
    local name=$1 world=$2 d=$OUT/gpu-$1 # a LINE picks another precision
    shift 2
    mkdir -p "$d"
    { printf '%s\n' "CONFIG_TARGET_SM80=y" "CONFIG_CUDA_ARCH_OVERRIDE=$cc" $DP_MODEL
      [[ " $* " == *PRECISION* ]] || echo CONFIG_PRECISION_FP32=y
      [ $# -gt 0 ] && printf '%s\n' "$@"
      [ "$world" -gt 1 ] && printf '%s\n' CONFIG_STEP_LAYERED=y CONFIG_DP=y "CONFIG_DP_WORLD_SIZE=$world" \
          CONFIG_DP_BUCKET_MB=1; } >"$d/def" # 1 MiB: layer 0's gradients in two buckets (320 + 192 rows)
    planned "$name" "$d" || return 1
    build_variant "$name" "$d"
}
dp_losses_agree() { # NAME ONE.jsonl N.jsonl BOUND: per-step losses within BOUND relative
    local out
    if out=$(python3 - "$2" "$3" "$4" <<'PY'
import json, sys
def steps(path): return [e["loss"] for e in map(json.loads, open(path)) if e.get("event") == "step"]
one, many = steps(sys.argv[1]), steps(sys.argv[2])
rel = max((abs(a - b) / abs(a) for a, b in zip(one, many)), default=1.0)
print(f"{len(many)} steps, max rel diff {rel:.2e}")
sys.exit(not (len(one) == len(many) == 50 and rel <= float(sys.argv[3])))
PY
    ); then echo "ok - gpu $1: per-step loss against one GPU at the same batch, $out (at most $4)"
    else echo "not ok - gpu $1: per-step loss against one GPU: $out"; fi
}
# dp_runs ONE N BOUND: variant N's multi-GPU run of 50 steps (saved to its a.st) against variant ONE's
# one-GPU run, per-step losses within BOUND relative, and a second run bitwise; returns 1 where N's run failed.
dp_runs() {
    local one=$OUT/gpu-$1 d=$OUT/gpu-$2 a="--data $DATA --epochs 1 --max-steps 50 --seed 3"
    "$one/app/mnist" $a --log "$one/one.jsonl" >/dev/null 2>&1 || echo "not ok - gpu $1: the one-GPU run failed"
    if ! "$d/app/mnist" $a --log "$d/a.jsonl" --save "$d/a.st" >"$d/a.out" 2>&1; then
        echo "not ok - gpu $2: the 2-GPU run failed: $(tail -n 2 "$d/a.out" | tr '\n' ' ')"; return 1
    fi
    dp_losses_agree "$2" "$one/one.jsonl" "$d/a.jsonl" "$3"
    "$d/app/mnist" $a --save "$d/b.st" >/dev/null 2>&1 && cmp -s "$d/a.st" "$d/b.st" &&
        echo "ok - gpu $2: two 2-GPU runs bitwise identical" || echo "not ok - gpu $2: two 2-GPU runs differ"
}
check_dp_bf16() { # the BF16 pair, built
    prefixed dp2-bf16 "$OUT/gpu-dp2-bf16/tests/bin/gpu/test_kernels"
    dp_runs dp-one-bf16 dp2-bf16 1e-2
}
check_dp() {
    local n d1=$OUT/gpu-dp-one d2=$OUT/gpu-dp2 a rv out
    n=$(host_gpu_count)
    [ "$ACTION" != check ] && n=4 # --list, --build-only: every variant, as on a host of 4
    if [ "$n" -lt 2 ]; then echo "skip - gpu data parallel: skipped: this host shows $n GPU"; return; fi
    if ! usable "$cc" 80; then echo "skip - gpu data parallel: skipped: needs compute capability 80, this GPU is $cc"; return; fi
    local built=1 four=0 bf16=1
    dp_variant dp-one 1 || built=0
    dp_variant dp2 2 || built=0
    dp_variant dp-one-bf16 1 CONFIG_PRECISION_BF16=y || bf16=0
    dp_variant dp2-bf16 2 CONFIG_PRECISION_BF16=y CONFIG_DP_REDUCE_BF16=y || bf16=0
    [ "$n" -ge 4 ] && dp_variant dp4 4 && four=1
    [ "$bf16" = 1 ] && check_dp_bf16
    [ "$built" = 1 ] || return
    dp_runs dp-one dp2 1e-5 || return
    a="--data $DATA --max-steps 50"
    rm -f "$d2/c.st"
    if "$d2/app/mnist" $a --seed 3 --epochs 2 --save "$d2/s.st" >/dev/null 2>&1 &&
        "$d2/app/mnist" $a --seed 3 --epochs 1 --checkpoint "$d2/c.st" >/dev/null 2>&1 &&
        "$d2/app/mnist" $a --epochs 2 --resume "$d2/c.st" --save "$d2/r.st" >/dev/null 2>&1 && cmp -s "$d2/s.st" "$d2/r.st"; then
        echo "ok - gpu dp2: resumed from epoch 1's checkpoint, the straight run's bytes"
    else echo "not ok - gpu dp2: the resumed 2-GPU run differs from the straight one (or a run failed)"; fi
    if ! command -v mpirun >/dev/null; then echo "skip - gpu dp2: mpirun: skipped: no mpirun"
    else
        rv=$d2/rendezvous
        rm -f "$rv" "$d2/m.st"
        a="--data $DATA --epochs 1 --max-steps 50 --seed 3"
        if mpirun --allow-run-as-root -np 2 -x SNN_DP_RENDEZVOUS="$rv" "$d2/app/mnist" $a --save "$d2/m.st" >"$d2/m.out" 2>&1 &&
            cmp -s "$d2/a.st" "$d2/m.st" && [ ! -e "$rv" ]; then
            echo "ok - gpu dp2: under mpirun -np 2, the self-started run's bytes; the rendezvous file removed"
        else echo "not ok - gpu dp2: under mpirun: $(tail -n 2 "$d2/m.out" | tr '\n' ' ')"; fi
        out=$(timeout 60 mpirun --allow-run-as-root -np 3 -x SNN_DP_RENDEZVOUS="$rv.3" "$d2/app/mnist" $a 2>&1)
        [[ $out == *"mpirun started 3 processes, but this build trains on 2 GPUs"* ]] &&
            echo "ok - gpu dp2: mpirun -np 3 refused, naming both world sizes" ||
            echo "not ok - gpu dp2: mpirun -np 3: $(tail -n 1 <<<"$out")"
    fi
    if [ "$n" -lt 4 ]; then echo "skip - gpu dp4: skipped: this host shows $n GPUs"; return; fi
    [ "$four" = 1 ] || return
    if "$OUT/gpu-dp4/app/mnist" --data "$DATA" --epochs 1 --max-steps 50 --seed 3 --log "$OUT/gpu-dp4/a.jsonl" \
        >"$OUT/gpu-dp4/a.out" 2>&1; then dp_losses_agree dp4 "$d1/one.jsonl" "$OUT/gpu-dp4/a.jsonl" 1e-5
    else echo "not ok - gpu dp4: the 4-GPU run failed: $(tail -n 2 "$OUT/gpu-dp4/a.out" | tr '\n' ' ')"; fi
}

# The other boards (deeper, wider, other batches): their kernel and
# training-step tests; their nets differ from the host engine's, so no epoch.
# make test: one board per code path the boards above do not take (wgmma persistent with split-K, the
# grid-resident and the cluster-resident kernels, AdamW with dropout and translation, the weight gradient's
# A panel with the weight steps beside the rest of the backward pass); make test-full: every board.
OTHER_REPRESENTATIVES="h100_8192x3_b32 h100_784x4_b64 h100_128x1_b64 h100_speedrun99 h100_2048x3_b256_tuned"
check_other() { # BOARD
    local board=$1
    build_board "$board" || return
    prefixed "$board" "$OUT/gpu-$board/tests/bin/gpu/test_kernels"
    prefixed "$board" "$OUT/gpu-$board/tests/bin/gpu/test_step"
    [ -x "$OUT/gpu-$board/tests/bin/gpu/test_fused" ] && prefixed "$board" "$OUT/gpu-$board/tests/bin/gpu/test_fused"
    [ "$board" = h100_8192x3_b32 ] && resume_mid_epoch "$board" "$OUT/gpu-$board"
    # its kernels on two streams (the sanitizers see each kernel; the streams' order is bits_without's)
    [ "$board" = h100_2048x3_b256_tuned ] && sanitize "$board" "$OUT/gpu-$board"
    return 0
}

# STEP_BESIDE_SMS at 255, more SMs than any GPU here has, on BOARD: ./app/mnist refuses it at start-up, one
# message naming the setting, exit status 1.
beside_refused() { # BOARD
    local board=$1 d=$OUT/gpu-$1-beside-255 out rc
    build_board "$board" >/dev/null
    rc=$?
    [ $rc -eq 2 ] && return # another card's board: check_other says so
    [ $rc -eq 0 ] || [ "$MODE" = plan ] || return
    mkdir -p "$d"
    { grep -v '^CONFIG_STEP_BESIDE_SMS=' "$OUT/gpu-$board/def"; echo CONFIG_STEP_BESIDE_SMS=255; } >"$d/def"
    planned "$board-beside-255" "$d" || return
    build_variant "$board with STEP_BESIDE_SMS=255" "$d" || return
    out=$("$d/app/mnist" --data "$DATA" --epochs 1 --max-steps 1 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && [ "$(grep -c 'STEP_BESIDE_SMS is 255' <<<"$out")" = 1 ] &&
        ! grep -qi 'internal error\|segmentation\|cuda error' <<<"$out"; then
        echo "ok - $board: STEP_BESIDE_SMS=255 is refused at start-up with one message"
    else echo "not ok - $board: STEP_BESIDE_SMS=255: status $rc: $(tail -n 3 <<<"$out" | tr '\n' ' ')"; fi
}

# NAME BOARD LINE...: BOARD's defconfig with LINEs, built with STEP_BESIDE and without: 40 steps of each
# give the same parameters bit for bit. The board's bits_without covers it as tuned; these, the paths it
# does not take: 5 hidden layers (a gradient buffer written again while the step is on two streams), AdamW,
# the update pass and the output step's bias sums, dropout; the output layer's weight step on the second
# stream (without CUDA_OUTPUT_STEP).
bits_beside() {
    local name=$1 board=$2 d=$OUT/gpu-beside-$1 want v p=0 a
    shift 2
    want=$(sed -n 's/^CONFIG_TARGET_SM\([0-9]*\)=y/\1/p' "configs/${board}_defconfig")
    if ! usable "$cc" "$want"; then echo "skip - gpu beside-$name: skipped: needs compute capability $want"; return; fi
    for v in on off; do
        mkdir -p "$d-$v"
        { grep -v '^CONFIG_STEP_BESIDE' "configs/${board}_defconfig"; printf '%s\n' "$@"
            echo "CONFIG_CUDA_ARCH_OVERRIDE=$cc"
            if [ $v = on ]; then echo CONFIG_STEP_BESIDE=y; else echo "# CONFIG_STEP_BESIDE is not set"; fi; } >"$d-$v/def"
        planned "beside-$name-$v" "$d-$v" || p=1
    done
    [ $p -eq 0 ] || return
    build_variant "$name, STEP_BESIDE on" "$d-on" && build_variant "$name, STEP_BESIDE off" "$d-off" || return
    same_bits STEP_BESIDE "$d-on" "$d-off" "$name: the weight steps beside the backward pass"
}

# SYMBOL ON OFF WHAT: SYMBOL on in build ON and off in build OFF, and 40 steps of each give the same
# parameters bit for bit.
same_bits() {
    local sym=$1 on=$2 off=$3 what=$4 a="--data $DATA --epochs 1 --max-steps 40 --seed 3"
    rm -f "$off/on.st" "$off/off.st"
    if grep -q "^CONFIG_$sym=y" "$on/.config" && ! grep -q "^CONFIG_$sym=y" "$off/.config" &&
        "$on/app/mnist" $a --save "$off/on.st" >/dev/null 2>&1 &&
        "$off/app/mnist" $a --save "$off/off.st" >/dev/null 2>&1 && cmp -s "$off/on.st" "$off/off.st"; then
        echo "ok - $what, on and off, give the same parameters, bit for bit"
    else echo "not ok - $what, on and off, differ (or $sym is not on in the first build, or on in the second)"; fi
}

# A symbol on by default in BOARD against the same board without it: 40 steps of each, the same parameters
# bit for bit. The update pass (STEP_UPDATE_PASS) against the GEMM epilogue's update (kernels/optim.h pins
# the arithmetic); programmatic dependent launch (CUDA_PDL) against launches that wait for the grid before;
# the weight steps on a stream and SMs of their own (STEP_BESIDE) against all on one.
bits_without() { # BOARD SYMBOL WHAT
    local board=$1 sym=$2 what=$3 d=$OUT/gpu-$1-no-$2
    build_board "$board" >/dev/null
    local rc=$?
    [ $rc -eq 2 ] && return # another card's board: check_other says so
    [ $rc -eq 0 ] || [ "$MODE" = plan ] || return # in the plan, its def is there
    mkdir -p "$d"
    { grep -v "^CONFIG_$sym=" "$OUT/gpu-$board/def"; echo "# CONFIG_$sym is not set"; } >"$d/def"
    planned "$board-no-$sym" "$d" || return
    build_variant "$board without $sym" "$d" || return
    same_bits "$sym" "$OUT/gpu-$board" "$d" "$board: $what"
}

# The precisions the boards' defconfigs do not select: the h100 board's
# shapes on the Ampere path (sm80: cp.async, m16n8k16 / m16n8k8 tf32), the
# a100 board in FP32 (the SIMT kernel; BF16 is its default) and the rtx2060
# board with FP32 accumulation, each under the sanitizer too.
precision_variant() { # NAME BOARD SM PRECISION: BOARD's defconfig (its tiles) on target SM with CONFIG_PRECISION_<PRECISION>
    local name=$1 board=$2 sm=$3 prec=$4 d=$OUT/gpu-$1
    if ! usable "$cc" "$sm"; then echo "skip - gpu $name path: skipped: needs compute capability $sm, this GPU is $cc"; return; fi
    mkdir -p "$d"
    if ! board_def_retarget "$board" "$d/board" >"$d/def"; then echo "not ok - gpu $name path: ${board}_defconfig failed"; return; fi
    { echo "CONFIG_TARGET_SM$sm=y"; echo "CONFIG_PRECISION_$prec=y"; echo "CONFIG_CUDA_ARCH_OVERRIDE=$cc"; } >>"$d/def"
    planned "$name" "$d" || return
    build_variant "$name" "$d" && check_variant "$name" "$d" && { full || [ "$name" = h100-sm80-tf32 ]; } &&
        sanitize "$name" "$d"
}

# The Hopper path with every GEMM it can read on wgmma (thresholds 0), so the
# kernel and step tests exercise it in each role, in BF16 and FP16; in TF32
# (the forward role only, on the FP32 tensors). BF16 (every role, the SGD
# update's epilogue too) and TF32 under the sanitizer as well; and BF16 with
# the weight gradient on its own ping-pong block, its inputs copied ahead.
wgmma_variant() { # NAME PRECISION sanitize|- [CONFIG_LINE...]
    local name=$1 prec=$2 san=$3 d=$OUT/gpu-$1
    shift 3
    if ! usable "$cc" 90; then echo "skip - gpu $name path: skipped: needs compute capability 90, this GPU is $cc"; return; fi
    mkdir -p "$d"
    { grep -v '^CONFIG_PRECISION_' configs/h100_defconfig; echo "CONFIG_PRECISION_$prec=y"
      echo "CONFIG_GEMM_WGMMA_MIN_K=1"; echo "CONFIG_GEMM_WGMMA_MIN_MFLOP=0"; printf '%s\n' "$@"; } >"$d/def"
    planned "$name" "$d" || return
    build_variant "$name" "$d" && check_variant "$name" "$d" && prefixed "$name" "$d/tests/bin/gpu/test_wgmma" &&
        if [ "$san" = sanitize ]; then sanitize "$name" "$d"; fi
}

# The memory strategies, on the last board built (h100 on a Hopper card): the
# static arena with the CUDA graph and without, our pool and cudaMallocAsync
# (both without the graph, by Kconfig dependency) must train to identical
# parameters, as the kernels are deterministic; each reports its figures.
# All four without the 16-bit twins (and so without wgmma), which need the
# static arena, and on the layered step, which the fused one needs too: the
# same kernels everywhere.
mm_variant() { # VARIANT: the def line it appends to the board's config
    case $1 in
    static-nograph) echo "# CONFIG_CUDA_GRAPH is not set" ;;
    pool) echo "CONFIG_MM_POOL=y" ;;
    cuda-async) echo "CONFIG_MM_CUDA_ASYNC=y" ;;
    esac
}
check_strategies() {
    mm_board=$own_board
    build_board "$mm_board" >/dev/null
    [ $? -eq 0 ] || [ "$MODE" = plan ] || return # in the plan, its def is there
    for v in static-nograph static-graph pool cuda-async; do
        d=$OUT/gpu-$mm_board-mm-$v
        mkdir -p "$d"
        { cat "$OUT/gpu-$mm_board/def"; echo "# CONFIG_GEMM_TWINS is not set"; echo "CONFIG_STEP_LAYERED=y"
          mm_variant $v; } >"$d/def"
        planned "$mm_board-mm-$v" "$d" || continue
        build_variant "$mm_board memory strategy $v" "$d" || continue
        graph=$(grep -c '^#define CONFIG_CUDA_GRAPH 1' "$d/include/generated/config.h")
        if [ "$graph" -ne "$([ $v = static-graph ] && echo 1 || echo 0)" ]; then
            echo "not ok - $mm_board memory strategy $v: CONFIG_CUDA_GRAPH is $graph"; continue
        fi
        rm -f "$d/params.bin" # never compare with a file an earlier run left
        if ! "$d/app/mnist" --data "$DATA" --epochs 1 --max-steps 300 --save "$d/params.bin" --log "$d/run.jsonl" \
            >"$d/run.out" 2>&1; then
            echo "not ok - $mm_board memory strategy $v: the run failed"; tail -n 3 "$d/run.out"; continue
        fi
        if [ $v != static-nograph ] && ! only_wanted "$mm_board-mm-static-nograph"; then
            echo "skip - $mm_board memory strategy $v: against the static arena:" \
                "$mm_board-mm-static-nograph is not among SNN_GPU_ONLY's variants"
        elif [ $v != static-nograph ]; then
            if cmp -s "$OUT/gpu-$mm_board-mm-static-nograph/params.bin" "$d/params.bin"; then
                echo "ok - $mm_board memory strategy $v: parameters identical to the static arena's (graph off)"
            else echo "not ok - $mm_board memory strategy $v: parameters differ from the static arena's (graph off)"; fi
        fi
        python3 - "$d/run.jsonl" "$mm_board memory strategy $v" <<'PY' || echo "not ok - $mm_board memory strategy $v: no memory figures in its log"
import json, sys
m = [json.loads(l) for l in open(sys.argv[1]) if '"memory"' in l][0]
per_step = m["strategy"] != "static"
ok = (m["startup_alloc_calls"] == 1 and (m["training_alloc_calls"] > 0) == per_step
      and (m["tensors"] > 0) == per_step and m["arena_bytes"] <= m["peak_in_use_bytes"] <= m["reserved_bytes"]
      and (m["strategy"] != "cuda-async" or m["training_alloc_calls"] == m["tensors"]))
print(f"{'ok' if ok else 'not ok'} - {sys.argv[2]}: memory figures {'consistent' if ok else 'inconsistent'}: "
      f"{m['startup_alloc_calls']} + {m['training_alloc_calls']} device allocation calls, {m['tensors']} tensors, "
      f"{m['reserved_bytes']} B reserved, {m['peak_in_use_bytes']} B peak in use")
PY
        if [ $v = pool ] || [ $v = cuda-async ]; then
            if command -v compute-sanitizer >/dev/null; then
                log=$d/sanitizer-memcheck.log
                compute-sanitizer --tool memcheck --error-exitcode 3 "$d/app/mnist" --data "$DATA" --epochs 1 \
                    --max-steps 10 >"$log" 2>&1
                rc=$?
                if [ $rc -eq 0 ] && grep -q "ERROR SUMMARY: 0 errors" "$log"; then
                    echo "ok - $mm_board memory strategy $v: compute-sanitizer memcheck: 0 errors"
                else echo "not ok - $mm_board memory strategy $v: compute-sanitizer memcheck (status $rc): $(grep -m1 'SUMMARY' "$log")"; fi
            else echo "skip - $mm_board memory strategy $v: compute-sanitizer: skipped: not installed"; fi
        fi
    done
}

# Mixed hidden widths (NN_HIDDEN_WIDTH_k): 784-300-37-100-10, narrowing then widening, at batch 17, and
# 784-40-1-7-1-64-3-200-9-10, 8 hidden layers with width 1 twice, at batch 1. The kernel and training-step
# tests against the host engine, on the layered step in each precision and on the fused step (the grid-wide
# kernel: the resident ones need one width); where asked, the sanitizers and the saved weights in PyTorch,
# scoring as the host engine's --eval of them (a host build of the first shape, widths_host).
WIDTHS_A="300 37 100" WIDTHS_DEEP="40 1 7 1 64 3 200 9"
widths_host() {
    local d=$OUT/gpu-widths-host
    mkdir -p "$d"
    cp tests/configs/recipe_widths_defconfig "$d/def"
    planned widths-host "$d" || return
    build_variant widths-host "$d" | grep -v "^ok"
}
widths_variant() { # NAME SM PRECISION LAYERED|FUSED BATCH sanitize|- WIDTH...
    local name=widths-$1 d=$OUT/gpu-widths-$1 sm=$2 prec=$3 step=$4 batch=$5 san=$6 k=0 w
    shift 6
    if ! usable "$cc" "$sm"; then echo "skip - gpu $name path: skipped: needs compute capability $sm, this GPU is $cc"; return; fi
    mkdir -p "$d"
    { printf 'CONFIG_TARGET_SM%s=y\nCONFIG_PRECISION_%s=y\nCONFIG_STEP_%s=y\nCONFIG_NN_HIDDEN_LAYERS=%s\n' \
        "$sm" "$prec" "$step" $#
      printf 'CONFIG_TRAIN_BATCH_SIZE=%s\nCONFIG_CUDA_ARCH_OVERRIDE=%s\n' "$batch" "$cc"
      for w; do k=$((k + 1)); echo "CONFIG_NN_HIDDEN_WIDTH_$k=$w"; done; } >"$d/def"
    planned "$name" "$d" || return
    build_variant "$name" "$d" || return
    prefixed "$name" "$d/tests/bin/gpu/test_kernels"
    prefixed "$name" "$d/tests/bin/gpu/test_step"
    [ -x "$d/tests/bin/gpu/test_fused" ] && prefixed "$name" "$d/tests/bin/gpu/test_fused"
    [ "$san" = sanitize ] || return 0
    sanitize "$name" "$d"
    local acc host
    if ! only_wanted widths-host; then
        echo "skip - $name: --eval against the host: widths-host is not among SNN_GPU_ONLY's variants"; return
    fi
    rm -f "$d/w.st"
    if ! "$d/app/mnist" --data "$DATA" --epochs 1 --max-steps 300 --save "$d/w.st" >"$d/w.out" 2>&1; then
        echo "not ok - $name: the run that saves its weights failed: $(tail -n 1 "$d/w.out")"; return
    fi
    acc=$(eval_acc "$d/app/mnist" "$d/w.st") host=$(eval_acc "$OUT/gpu-widths-host/app/mnist" "$d/w.st")
    if [ -z "$acc" ] || [ -z "$host" ]; then echo "not ok - $name: --load --eval printed no accuracy"; return; fi
    python3 tests/gpu/test_torch_load.py "$d/w.st" "$DATA" "$host" "$acc" 2>&1 | sed "s/^\(ok\|not ok\|skip\) - /\1 - $name: /"
}

# Distortions (TRAIN_AUGMENT_AFFINE and _ELASTIC, after a translation of up to a pixel) on the layered step:
# test_kernels holds the gather's distorted batch to the host's, bit for bit; the training-step tests; where
# asked, the sanitizers.
distort_variant() { # NAME SM PRECISION sanitize|-
    local name=distort-$1 d=$OUT/gpu-distort-$1 sm=$2 prec=$3 san=$4
    if ! usable "$cc" "$sm"; then echo "skip - gpu $name path: skipped: needs compute capability $sm, this GPU is $cc"; return; fi
    mkdir -p "$d"
    printf '%s\n' "CONFIG_TARGET_SM$sm=y" "CONFIG_PRECISION_$prec=y" CONFIG_STEP_LAYERED=y CONFIG_NN_HIDDEN_WIDTH=128 \
        CONFIG_TRAIN_BATCH_SIZE=33 CONFIG_TRAIN_AUGMENT_SHIFT=1 CONFIG_TRAIN_AUGMENT_AFFINE=y \
        CONFIG_TRAIN_AUGMENT_ELASTIC=y "CONFIG_CUDA_ARCH_OVERRIDE=$cc" >"$d/def"
    planned "$name" "$d" || return
    build_variant "$name" "$d" || return
    prefixed "$name" "$d/tests/bin/gpu/test_kernels"
    prefixed "$name" "$d/tests/bin/gpu/test_step"
    [ "$san" = sanitize ] && sanitize "$name" "$d"
    return 0
}

# The fused step (CONFIG_STEP_FUSED) on awkward shapes, each on its target's
# path: widths not multiples of 16 (or of 4), batch 1 and odd batches, 0 and
# 8 hidden layers, every precision; test_fused checks it op by op against
# the host engine, free-running, for determinism and its evaluation against
# the layered one; two of them under compute-sanitizer. Then the h100 board's
# epoch on the fused step against the same board on the layered one.
fused_variant() { # NAME SM PRECISION LAYERS WIDTH BATCH [sanitize] [CONFIG_LINE...]
    local name=fused-$1 d=$OUT/gpu-fused-$1 sm=$2 prec=$3 layers=$4 width=$5 batch=$6 san=${7:-}
    shift $(($# < 7 ? $# : 7))
    if ! usable "$cc" "$sm"; then echo "skip - gpu $name path: skipped: needs compute capability $sm, this GPU is $cc"; return; fi
    mkdir -p "$d"
    printf 'CONFIG_TARGET_SM%s=y\nCONFIG_PRECISION_%s=y\nCONFIG_NN_HIDDEN_LAYERS=%s\nCONFIG_NN_HIDDEN_WIDTH=%s\nCONFIG_TRAIN_BATCH_SIZE=%s\nCONFIG_STEP_FUSED=y\nCONFIG_CUDA_ARCH_OVERRIDE=%s\n' \
        "$sm" "$prec" "$layers" "$width" "$batch" "$cc" >"$d/def"
    [ $# -eq 0 ] || printf '%s\n' "$@" >>"$d/def"
    planned "$name" "$d" || return
    build_variant "$name" "$d" || return
    prefixed "$name" "$d/tests/bin/gpu/test_fused"
    if [ "$san" = sanitize ]; then sanitize "$name" "$d"; fi
}
# fused_staged NAME yes|no: whether a one-step run of fused variant NAME launches the grid-resident kernel
# with the batch staged in shared memory, which the launch chooses where the GPU then holds the whole grid
# (kernels/cuda/fused/grid_resident.cu, fits); the GPU's SM count decides, so another kernel is a skip.
fused_staged() {
    local name=fused-$1 d=$OUT/gpu-fused-$1 want=$2 launch got
    [ "$MODE" = check ] && only_wanted "$name" && [ -f "$d.built" ] || return 0
    launch=$("$d/app/mnist" --data "$DATA" --max-steps 1 2>&1 | grep -m1 '^training step')
    case $launch in
    *"grid-resident kernel"*"staged a step ahead"*) got=yes ;;
    *"grid-resident kernel"*) got=no ;;
    *) echo "skip - gpu $name: staging: this GPU does not launch the grid-resident kernel: $launch"; return ;;
    esac
    if [ "$got" = "$want" ]; then
        echo "ok - gpu $name: the grid-resident kernel $([ "$want" = yes ] || echo un)staged, as this GPU holds it"
    else
        echo "not ok - gpu $name: the grid-resident kernel staged: $got, expected $want: $launch"
    fi
}
# One epoch of BOARD on its fused step (the resident or the grid-wide kernel, as it builds) against the same
# board on the layered step, seeds 1-5 each: their mean test accuracies within 0.1 point (issue 45's "over
# seeds"), or within two standard errors of the five pairs' differences where those spread wider, but never
# more than 0.5; and no pair more than 1.5 apart. One pair differs by up to 0.9 point, what two roundings of
# one run differ by (docs/PERF.md v18, v22, v41); a step that trains wrongly differs by far more.
SEEDS_AGAINST_LAYERED="1 2 3 4 5"
fused_against_layered() { # BOARD
    local b=$1 d=$OUT/gpu-$1-layered seed step ran=1
    build_board "$b" >/dev/null
    local rc=$?
    [ $rc -eq 2 ] && return
    [ $rc -eq 0 ] || [ "$MODE" = plan ] || return # in the plan, its def is there
    mkdir -p "$d"
    # one member of the choice, and no fused kernel's settings (hidden on the layered step), as tools/bench.py
    { grep -v '^CONFIG_STEP_\|^CONFIG_FUSED_' "$OUT/gpu-$b/def"; echo "CONFIG_STEP_LAYERED=y"; } >"$d/def"
    planned "$b-layered" "$d" || return
    build_variant "$b-layered" "$d" >/dev/null || ran=0
    for seed in $SEEDS_AGAINST_LAYERED; do
        for step in fused layered; do
            local app=$d/app/mnist
            [ $step = fused ] && app=$OUT/gpu-$b/app/mnist
            [ $ran = 1 ] && "$app" --data "$DATA" --epochs 1 --seed $seed --log "$d/$step-$seed.jsonl" >/dev/null 2>&1 ||
                ran=0
        done
    done
    if [ $ran = 0 ]; then echo "not ok - $b: the fused and layered epochs did not all run"; return; fi
    python3 - "$b" "$d" $SEEDS_AGAINST_LAYERED <<'PY'
import json, statistics, sys
board, d, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
acc = {step: [100 * [json.loads(l) for l in open(f"{d}/{step}-{s}.jsonl") if '"test_acc"' in l][-1]["test_acc"]
              for s in seeds] for step in ("fused", "layered")}
pairs = [f - l for f, l in zip(acc["fused"], acc["layered"])]
diff, se = statistics.mean(pairs), statistics.stdev(pairs) / len(pairs) ** 0.5
bound = min(max(0.1, 2 * se), 0.5)
what = (f"{board}: one epoch, seeds {seeds[0]}-{seeds[-1]}: the fused step's mean test accuracy "
        f"{statistics.mean(acc['fused']):.2f}%, the layered {statistics.mean(acc['layered']):.2f}% ({diff:+.2f} point, "
        f"pairs {min(pairs):+.2f} to {max(pairs):+.2f}; within {bound:.2f}: 0.1 or two standard errors of the pairs, "
        "at most 0.5; no pair beyond 1.5)")
print(("ok - " if abs(diff) <= bound and max(map(abs, pairs)) <= 1.5 else "not ok - ") + what)
PY
}

check_fused() {
    # make test: one variant per kernel and target (marked below: the others only in make test-full).
    # sm90 BF16/FP16 models that fit one cluster train on the cluster kernel (fused/cluster.cu), those whose
    # share of 8 units a block fits one block on the grid-resident one (fused/grid_resident.cu, also sm80, TF32
    # and FP32), the rest on the grid-wide one (fused/grid_wide.cu): every kind below, each checked as the others
    fused_variant sm90-bf16-100x3-b33 90 BF16 3 100 33 sanitize
    full && fused_variant sm90-fp16-0-b1 90 FP16 0 256 1
    full && fused_variant sm90-bf16-10x8-b7 90 BF16 8 10 7
    full && fused_variant sm90-bf16-24x1-b1 90 BF16 1 24 1
    # the draws, and a validation split (the epoch's order over the images left, the held-out ones scored)
    fused_variant sm90-fp16-36x2-b17-noise 90 FP16 2 36 17 sanitize CONFIG_TRAIN_OPTIMIZER_ADAMW=y \
        'CONFIG_TRAIN_LR="1e-3"' 'CONFIG_TRAIN_DROPOUT="0.2"' CONFIG_TRAIN_AUGMENT_SHIFT=2 \
        'CONFIG_TRAIN_LABEL_SMOOTHING="0.1"' CONFIG_TRAIN_VALIDATION_SIZE=5000
    fused_variant sm90-bf16-10x8-b7-grid 90 BF16 8 10 7 - CONFIG_FUSED_CLUSTER=n CONFIG_FUSED_GRID_RESIDENT=n
    # the grid-resident kernel: padding units (100 = 12.5 blocks of 8), batch 1, 8 hidden layers, dropout
    fused_variant sm90-bf16-100x3-b13-gridres 90 BF16 3 100 13 sanitize CONFIG_FUSED_CLUSTER=n \
        CONFIG_TRAIN_NESTEROV=y 'CONFIG_TRAIN_WEIGHT_DECAY="0.0005"'
    full && fused_variant sm90-fp16-36x2-b17-gridres 90 FP16 2 36 17 sanitize CONFIG_FUSED_CLUSTER=n \
        'CONFIG_TRAIN_DROPOUT="0.2"' 'CONFIG_TRAIN_LABEL_SMOOTHING="0.1"'
    full && fused_variant sm90-bf16-24x1-b1-gridres 90 BF16 1 24 1 - CONFIG_FUSED_CLUSTER=n
    full && fused_variant sm90-bf16-10x8-b7-gridres 90 BF16 8 10 7 - CONFIG_FUSED_CLUSTER=n
    # its units shared by blocks, a slice of layer 0's inputs each: the speedrun98 board's shape with AdamW;
    # padding units and slices of 17, 17 and 15 k16 steps with dropout; an empty slice (49 steps over 8 slices
    # of 7), batch 1
    fused_variant sm90-bf16-256x1-b256-split4 90 BF16 1 256 256 sanitize CONFIG_FUSED_CLUSTER=n \
        CONFIG_FUSED_GRID_RESIDENT_SPLIT=4 CONFIG_TRAIN_OPTIMIZER_ADAMW=y 'CONFIG_TRAIN_LR="6e-3"'
    fused_staged sm90-bf16-256x1-b256-split4 yes
    # twice the units, 256 blocks of 256 threads: staged, one block an SM would hold 132 of them; unstaged,
    # two an SM (at 512 threads their registers would not fit twice)
    fused_variant sm90-bf16-512x1-b256-split4-t256 90 BF16 1 512 256 - CONFIG_FUSED_CLUSTER=n \
        CONFIG_FUSED_GRID_RESIDENT_SPLIT=4 CONFIG_FUSED_GRID_RESIDENT_THREADS=256 CONFIG_TRAIN_OPTIMIZER_ADAMW=y
    fused_staged sm90-bf16-512x1-b256-split4-t256 no
    fused_variant sm90-fp16-100x1-b13-split3 90 FP16 1 100 13 sanitize CONFIG_FUSED_CLUSTER=n \
        CONFIG_FUSED_GRID_RESIDENT_SPLIT=3 'CONFIG_TRAIN_DROPOUT="0.2"' 'CONFIG_TRAIN_LABEL_SMOOTHING="0.1"'
    full && fused_variant sm90-bf16-24x1-b1-split8 90 BF16 1 24 1 - CONFIG_FUSED_CLUSTER=n \
        CONFIG_FUSED_GRID_RESIDENT_SPLIT=8
    # its least and most threads a block (the GEMMs' k slices and tile pairs, the softmax's rows a warp)
    full && fused_variant sm90-bf16-100x3-b13-gridres-t256 90 BF16 3 100 13 - CONFIG_FUSED_CLUSTER=n \
        CONFIG_FUSED_GRID_RESIDENT_THREADS=256
    full && fused_variant sm90-fp16-36x2-b17-gridres-t1024 90 FP16 2 36 17 - CONFIG_FUSED_CLUSTER=n \
        CONFIG_FUSED_GRID_RESIDENT_THREADS=1024 'CONFIG_TRAIN_DROPOUT="0.2"'
    # the resident kernel's least and most threads a block (its softmax lanes a row, its GEMMs' k slices), and
    # 384, 784-128-10 b64's, where a model without a middle layer keeps a placeholder of one
    full && fused_variant sm90-bf16-128-b64-t128 90 BF16 1 128 64 - CONFIG_FUSED_CLUSTER_THREADS=128
    full && fused_variant sm90-bf16-128x3-b32-t1024 90 BF16 3 128 32 - CONFIG_FUSED_CLUSTER_THREADS=1024
    fused_variant sm90-fp16-40x1-b13-t384 90 FP16 1 40 13 "$(full && echo sanitize)" CONFIG_FUSED_CLUSTER_THREADS=384 \
        CONFIG_TRAIN_OPTIMIZER_ADAMW=y 'CONFIG_TRAIN_LR="1e-3"' 'CONFIG_TRAIN_DROPOUT="0.1"' CONFIG_TRAIN_AUGMENT_SHIFT=2
    # four hidden layers on the cluster kernel: its all-gathers' three buffers in turn, three layers' rows
    # copied and refreshed, padding units (100 = 12.5 blocks of 8), FP16 with dropout and translation
    fused_variant sm90-fp16-100x4-b20 90 FP16 4 100 20 sanitize \
        'CONFIG_TRAIN_DROPOUT="0.1"' CONFIG_TRAIN_AUGMENT_SHIFT=1
    # TF32 on the grid-resident kernel (32-bit operands, m16n8k8; padding units: 130 = 16.25 blocks of 8), on
    # its split, on sm80; and on the grid-wide kernel
    fused_variant sm90-tf32-130x2-b64 90 TF32 2 130 64 sanitize
    full && fused_variant sm90-tf32-100x1-b13-split3 90 TF32 1 100 13 sanitize \
        CONFIG_FUSED_GRID_RESIDENT_SPLIT=3 'CONFIG_TRAIN_DROPOUT="0.2"'
    full && fused_variant sm80-tf32-100x3-b13 80 TF32 3 100 13 - CONFIG_TRAIN_OPTIMIZER_ADAMW=y 'CONFIG_TRAIN_LR="1e-3"'
    fused_variant sm90-tf32-130x2-b64-grid 90 TF32 2 130 64 - CONFIG_FUSED_GRID_RESIDENT=n
    # FP32 on the grid-resident kernel (its products on the CUDA cores, mma16), on its split; and on the
    # grid-wide kernel
    fused_variant sm80-fp32-36x2-b17 80 FP32 2 36 17 sanitize
    full && fused_variant sm90-fp32-256x1-b256-split4 90 FP32 1 256 256 sanitize CONFIG_FUSED_GRID_RESIDENT_SPLIT=4 \
        CONFIG_TRAIN_OPTIMIZER_ADAMW=y
    fused_variant sm80-fp32-36x2-b17-grid 80 FP32 2 36 17 - CONFIG_FUSED_GRID_RESIDENT=n
    fused_variant sm80-bf16-1024x3-b32 80 BF16 3 1024 32
    fused_variant sm75-fp16acc16-50x1-b5 75 FP16_ACC16 1 50 5
    full && fused_variant sm75-fp32-128x3-b32 75 FP32 3 128 32
    # a 48 KB ring beside the kernel's static shared memory (make tune found it refused to launch)
    full && fused_variant sm90-bf16-128-b64-tile64x64x16 90 BF16 1 128 64 - CONFIG_FUSED_CLUSTER=n CONFIG_FUSED_GRID_RESIDENT=n \
        CONFIG_GEMM_FUSED_BLOCK_M=64 CONFIG_GEMM_FUSED_BLOCK_N=64 CONFIG_GEMM_FUSED_BLOCK_K=16 \
        CONFIG_GEMM_FUSED_WARP_M=32 CONFIG_GEMM_FUSED_WARP_N=32 CONFIG_GEMM_FUSED_WARP_K=16
    widths_host
    widths_variant fused-sm90-bf16 90 BF16 FUSED 17 sanitize $WIDTHS_A
    full && widths_variant fused-sm80-fp32-deep-b1 80 FP32 FUSED 1 - $WIDTHS_DEEP
    full && fused_against_layered h100
    fused_against_layered h100_128x1_b64
    fused_against_layered h100_784x4_b64
    full && fused_against_layered h100_1024x3_b32
}

# The tier's variants, part by part.
run_all() {
    local b
    part=boards
    if part_wanted boards; then
        for b in rtx2060 a100 h100; do check_board "$b"; done
    fi
    part=others
    if part_wanted others; then
        if full; then
            for f in configs/*_defconfig; do
                b=$(basename "$f" _defconfig)
                case $b in host | rtx2060 | a100 | h100) continue ;; esac
                check_other "$b"
            done
        else for b in $OTHER_REPRESENTATIVES; do check_other "$b"; done; fi
        bits_without h100_speedrun99 STEP_UPDATE_PASS "the update pass (against the GEMM epilogue's update)"
        bits_without h100_speedrun99 CUDA_PDL "programmatic dependent launch"
        bits_without h100_2048x3_b256_tuned STEP_BESIDE "the weight steps beside the rest of the backward pass"
        beside_refused h100_2048x3_b256_tuned
        bits_beside record-dropout h100_record 'CONFIG_TRAIN_DROPOUT="0.2"'
        bits_beside 2048x3-no-output-step h100_2048x3_b256_tuned "# CONFIG_CUDA_OUTPUT_STEP is not set"
    fi
    # The precisions the boards' defconfigs do not select: the h100 board's shapes on the Ampere path
    # (sm80: cp.async, m16n8k16 / m16n8k8 tf32), the a100 board in FP32 (the SIMT kernel; BF16 is its
    # default) and the rtx2060 board with FP32 accumulation.
    part=precisions
    if part_wanted precisions; then
        precision_variant h100-sm80-tf32 h100 80 TF32
        full && precision_variant h100-sm80-fp16 h100 80 FP16
        precision_variant a100-fp32 a100 80 FP32
        precision_variant rtx2060-fp16 rtx2060 75 FP16
        widths_host
        widths_variant sm90-bf16 90 BF16 LAYERED 17 sanitize $WIDTHS_A
        widths_variant sm80-tf32 80 TF32 LAYERED 17 - $WIDTHS_A
        full && widths_variant sm80-fp32 80 FP32 LAYERED 17 - $WIDTHS_A
        full && widths_variant sm75-fp16 75 FP16 LAYERED 17 - $WIDTHS_A
        widths_variant sm90-bf16-deep-b1 90 BF16 LAYERED 1 - $WIDTHS_DEEP
        full && widths_variant sm90-bf16-b16384 90 BF16 LAYERED 16384 - 300 100 # the largest batch
        distort_variant sm90-bf16 90 BF16 sanitize
        full && distort_variant sm80-fp32 80 FP32 -
    fi
    # The Hopper path with every GEMM it can read on wgmma (thresholds 0), so the kernel and step tests
    # exercise it in each role, in BF16 and FP16; in TF32 (the forward role only, on the FP32 tensors);
    # and BF16 with the weight gradient on its own ping-pong block, its inputs copied ahead.
    part=wgmma
    if part_wanted wgmma; then
        wgmma_variant h100-wgmma-all-bf16 BF16 sanitize
        full && wgmma_variant h100-wgmma-all-fp16 FP16 -
        wgmma_variant h100-wgmma-all-tf32 TF32 "$(full && echo sanitize)"
        wgmma_variant h100-wgmma-wgrad-pingpong-bf16 BF16 "$(full && echo sanitize)" \
            CONFIG_GEMM_WGMMA_WGRAD_PINGPONG=y CONFIG_GEMM_WGMMA_EPI_STAGES=2
    fi
    part=strategies
    part_wanted strategies && check_strategies
    part=fused
    part_wanted fused && check_fused
    part=dp
    part_wanted dp && check_dp
    return 0
}

MODE=plan
run_all >/dev/null
if [ -n "${SNN_GPU_ONLY:-}" ] && [ ${#planned[@]} -eq 0 ]; then
    echo "not ok - gpu tests: SNN_GPU_ONLY='$SNN_GPU_ONLY' names no variant of the $TIER tier's parts (--list names them)"
    [ "$ACTION" = check ] && exit 0
    exit 2
fi
if [ "$ACTION" = --list ]; then
    echo "# GPU variants of the $TIER tier on a card of compute capability $cc (SNN_GPU_PARTS picks parts, SNN_GPU_ONLY variants):"
    printf '%s\n' "${planned_parts[@]}" | awk -F: '$1 != last { printf "%s%s:", (NR > 1 ? "\n" : ""), $1; last = $1 }
        { printf " %s", $2 } END { print "" }'
    exit 0
fi

# Every variant built side by side: half the cores' worth of builds at a time, each make -j2.
jobs_max=$(($(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) / 2)); [ "$jobs_max" -ge 1 ] || jobs_max=1
t0=$(date +%s)
for d in "${planned[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
    build_one "$d" &
done
wait
echo "# gpu: ${#planned[@]} variants built in $(($(date +%s) - t0)) s, $jobs_max at a time"
if [ "$ACTION" = --build-only ]; then
    for i in "${!planned[@]}"; do build_variant "${planned_parts[i]#*:}" "${planned[i]}"; done
    exit 0
fi

# The epochs' reference: the host engine that tests/run.sh builds, or built here.
if [ ! -x "$HOST_APP" ] && ! { make --no-print-directory O="$OUT/host" host_defconfig &&
    make --no-print-directory O="$OUT/host" -j"$(nproc)"; } >"$OUT/host.log" 2>&1; then
    echo "not ok - gpu tests: the host engine, the epochs' reference, did not build (see $OUT/host.log)"
fi
host_acc=
if [ -x "$HOST_APP" ] && "$HOST_APP" --data "$DATA" --epochs 1 --log "$OUT/gpu-host-epoch.jsonl" >/dev/null 2>&1; then
    host_acc=$(test_acc "$OUT/gpu-host-epoch.jsonl")
fi

MODE=check
run_all
