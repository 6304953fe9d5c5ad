#!/usr/bin/env bash
# The configuration contract: refusals with the right message, stale and
# missing configs, the generated header rewritten only on change, exact rebuilds.
set -u
cd "$(dirname "$0")/../.."
T=$(mktemp -d "${TMPDIR:-/tmp}/snn-config.XXXXXX")
trap 'rm -rf "$T"' EXIT
M="make --no-print-directory"

# expect_refusal NAME FRAGMENT CMD...: CMD must fail and print FRAGMENT
expect_refusal() {
    local name=$1 want=$2; shift 2
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ $rc -eq 0 ]; then echo "not ok - $name: accepted (exit 0)"
    elif ! grep -qF -- "$want" <<<"$out"; then echo "not ok - $name: message lacks '$want': $(tail -n 3 <<<"$out" | tr '\n' ' ')"
    else echo "ok - $name"; fi
}

# with NAME LINE...: a config dir whose def is host_defconfig with LINEs set
with() {
    local d=$T/$1 l; shift
    mkdir -p "$d"
    cp configs/host_defconfig "$d/def"
    for l in "$@"; do sed -i "/^${l%%=*}=/d" "$d/def"; echo "$l" >>"$d/def"; done
    echo "$d"
}

# refused NAME FRAGMENT LINE...: make defconfig of host_defconfig with LINEs set fails, printing FRAGMENT
refusals=0
refused() {
    local name=$1 want=$2 d; shift 2
    refusals=$((refusals + 1))
    d=$(with "refused-$refusals" "$@")
    expect_refusal "$name" "$want" $M O="$d" defconfig DEFCONFIG="$d/def"
}

refused "learning rate abc refused" 'CONFIG_TRAIN_LR="abc" is not a decimal number' 'CONFIG_TRAIN_LR="abc"'
refused "hidden width 0 refused" 'CONFIG_NN_HIDDEN_WIDTH=0 is outside its range 1..16384' 'CONFIG_NN_HIDDEN_WIDTH=0'
refused "momentum 1.5 refused" 'CONFIG_TRAIN_MOMENTUM=1.5 is outside [0, 1)' 'CONFIG_TRAIN_MOMENTUM="1.5"'
# the training recipe's symbols (nn/Kconfig): ranges, the decimals' intervals, dependencies
refused "Nesterov without momentum refused" 'CONFIG_TRAIN_NESTEROV needs CONFIG_TRAIN_MOMENTUM above 0' \
    'CONFIG_TRAIN_MOMENTUM="0"' 'CONFIG_TRAIN_NESTEROV=y'
refused "label smoothing 1 refused" 'CONFIG_TRAIN_LABEL_SMOOTHING=1 is outside [0, 1)' \
    'CONFIG_TRAIN_LABEL_SMOOTHING="1"'
refused "negative weight decay refused" 'CONFIG_TRAIN_WEIGHT_DECAY=-1e-4 is outside [0, inf)' \
    'CONFIG_TRAIN_WEIGHT_DECAY="-1e-4"'
refused "step decay gamma 0 refused" 'CONFIG_TRAIN_LR_GAMMA=0 is outside (0, 1]' \
    'CONFIG_TRAIN_LR_STEP=y' 'CONFIG_TRAIN_LR_GAMMA="0"'
refused "final learning rate 1.5 refused" 'CONFIG_TRAIN_LR_FINAL=1.5 is outside [0, 1]' \
    'CONFIG_TRAIN_LR_COSINE=y' 'CONFIG_TRAIN_LR_FINAL="1.5"'
refused "AdamW beta2 1 refused" 'CONFIG_TRAIN_ADAM_BETA2=1 is outside [0, 1)' \
    'CONFIG_TRAIN_OPTIMIZER_ADAMW=y' 'CONFIG_TRAIN_ADAM_BETA2="1"'
refused "AdamW epsilon 0 refused" 'CONFIG_TRAIN_ADAM_EPS=0 is outside (0, inf)' \
    'CONFIG_TRAIN_OPTIMIZER_ADAMW=y' 'CONFIG_TRAIN_ADAM_EPS="0"'
refused "zero warm-up steps refused" 'CONFIG_TRAIN_LR_WARMUP_STEPS=0 is outside its range 1..10000000' \
    'CONFIG_TRAIN_LR_WARMUP_COSINE=y' 'CONFIG_TRAIN_LR_WARMUP_STEPS=0'
refused "AdamW's beta1 with SGD chosen refused" \
    'CONFIG_TRAIN_ADAM_BETA1=0.8 cannot be set (it depends on TRAIN_OPTIMIZER_ADAMW' 'CONFIG_TRAIN_ADAM_BETA1="0.8"'
# the validation split: a multiple of the evaluation batch, at most 50000, leaving a batch to train on
refused "a validation split of 1234 refused" \
    'CONFIG_TRAIN_VALIDATION_SIZE=1234 is not a multiple of CONFIG_EVAL_BATCH_SIZE=1000' 'CONFIG_TRAIN_VALIDATION_SIZE=1234'
refused "a validation split of 60000 refused" 'CONFIG_TRAIN_VALIDATION_SIZE=60000 is outside its range 0..50000' \
    'CONFIG_TRAIN_VALIDATION_SIZE=60000'
refused "evaluating every 0 steps refused" 'CONFIG_TRAIN_EVAL_EVERY=0 is outside its range 1..100000' \
    'CONFIG_TRAIN_EVAL_EVERY=0'
# the training step's draws (kernels/noise.h)
refused "dropout 1 refused" 'CONFIG_TRAIN_DROPOUT=1 is outside [0, 1)' 'CONFIG_TRAIN_DROPOUT="1"'
refused "dropout without a hidden layer refused" \
    'CONFIG_TRAIN_DROPOUT=0.2 cannot be set (it depends on NN_HIDDEN_LAYERS > 0' \
    'CONFIG_NN_HIDDEN_LAYERS=0' 'CONFIG_TRAIN_DROPOUT="0.2"'
refused "a translation of 9 pixels refused" 'CONFIG_TRAIN_AUGMENT_SHIFT=9 is outside its range 0..8' \
    'CONFIG_TRAIN_AUGMENT_SHIFT=9'
refused "unknown symbol refused" 'CONFIG_NO_SUCH_THING is not a symbol of this Kconfig' 'CONFIG_NO_SUCH_THING=y'
refused "a value whose dependency is unmet refused" \
    'CONFIG_MM_CUDA_ASYNC=y cannot be set (it depends on TARGET_CUDA' 'CONFIG_MM_CUDA_ASYNC=y'

# Decimals are checked as the floats the engine computes with: 1e-50 is 0 there, 0.999999999 is 1.
refused "a learning rate that is 0 as a float refused" \
    "CONFIG_TRAIN_LR=1e-50 is below single precision's least normal number" 'CONFIG_TRAIN_LR="1e-50"'
refused "a learning rate beyond a float's range refused" 'CONFIG_TRAIN_LR=1e39 is too large for single precision' \
    'CONFIG_TRAIN_LR="1e39"'
refused "an AdamW epsilon that is 0 as a float refused" \
    "CONFIG_TRAIN_ADAM_EPS=1e-46 is below single precision's least normal number" \
    'CONFIG_TRAIN_OPTIMIZER_ADAMW=y' 'CONFIG_TRAIN_ADAM_EPS="1e-46"'
refused "a momentum that is 1 as a float refused" \
    'CONFIG_TRAIN_MOMENTUM=0.999999999 is 1.0 in single precision, the engine'"'"'s, outside [0, 1)' \
    'CONFIG_TRAIN_MOMENTUM="0.999999999"'
refused "an AdamW beta2 that is 1 as a float refused" 'CONFIG_TRAIN_ADAM_BETA2=0.99999999999 is 1.0 in single' \
    'CONFIG_TRAIN_OPTIMIZER_ADAMW=y' 'CONFIG_TRAIN_ADAM_BETA2="0.99999999999"'
refused "a dropout that is 1 as a float refused" 'CONFIG_TRAIN_DROPOUT=0.999999999 is 1.0 in single precision' \
    'CONFIG_TRAIN_DROPOUT="0.999999999"'
refused "a label smoothing that is 1 as a float refused" \
    'CONFIG_TRAIN_LABEL_SMOOTHING=0.9999999999 is 1.0 in single precision' 'CONFIG_TRAIN_LABEL_SMOOTHING="0.9999999999"'
refused "an empty data root refused" 'CONFIG_DATA_ROOT is empty' 'CONFIG_DATA_ROOT=""'

# Configured text is data, never a format or shell code: every string symbol set to hostile text is
# refused by name or reaches the generated header as exactly that text (test_config_strings.py); one
# build with printf conversions, quotes and shell syntax in its data root prints it as given (--help, a
# missing and a wrong dataset) and make data passes it to the fetch script as one argument.
python3 tests/host/test_config_strings.py
v='x/%s%s%s%n "q'"'"' $(id);`id`'
d=$(with format "CONFIG_DATA_ROOT=\"x/%s%s%s%n \\\"q' \$(id);\`id\`\"")
if $M O="$d" defconfig DEFCONFIG="$d/def" >"$d/log" 2>&1 && $M O="$d" -j"$(nproc)" EXTRA_WARN=-Werror "$d/app/mnist" >>"$d/log" 2>&1; then
    help=$("$d/app/mnist" --help 2>&1); hrc=$?
    miss=$("$d/app/mnist" --epochs 1 2>&1); mrc=$?
    other=$("$d/app/mnist" --data "${SNN_FASHION_DATA:-/usr/share/datasets/fashion-mnist}" --epochs 1 --max-steps 1 2>&1); orc=$?
    if [ $hrc -eq 0 ] && grep -qF "(default: $PWD/$v/mnist)" <<<"$help" && [ $mrc -eq 1 ] &&
        grep -qF "no data directory $PWD/$v/mnist" <<<"$miss" && { [ $orc -eq 1 ] && grep -qF "into $PWD/$v/mnist" <<<"$other" ||
        [ ! -d /usr/share/datasets/fashion-mnist ]; }; then
        echo "ok - a data root of printf conversions, quotes and shell syntax is printed as given (--help, missing and other dataset)"
    else echo "not ok - a data root of printf conversions: --help $hrc, missing data $mrc, other dataset $orc: $(tail -n 2 <<<"$help$miss$other" | tr '\n' ' ')"; fi
else echo "not ok - a data root of printf conversions does not build warning-free: $(tail -n 3 "$d/log" | tr '\n' ' ')"; fi
mkdir -p "$T/stub" && printf '#!/bin/bash\nprintf "%%s\\n" "$@"\n' >"$T/stub/fetch" && chmod +x "$T/stub/fetch"
if out=$($M O="$d" data FETCH="$T/stub/fetch" 2>&1) && grep -qxF -- "$v/mnist" <<<"$out"; then
    echo "ok - make data passes that data root to the fetch script as one argument, unparsed"
else echo "not ok - make data with a hostile data root: $(tail -n 2 <<<"$out" | tr '\n' ' ')"; fi

if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    d=$(with override 'CONFIG_TARGET_SM80=y' 'CONFIG_CUDA_ARCH_OVERRIDE=75')
    $M O="$d" defconfig DEFCONFIG="$d/def" >/dev/null 2>&1
    expect_refusal "an override older than the target refused" \
        'CONFIG_CUDA_ARCH_OVERRIDE=75 is older than the target (80)' $M O="$d"
    d=$(with override90 'CONFIG_TARGET_SM90=y' 'CONFIG_CUDA_ARCH_OVERRIDE=100')
    $M O="$d" defconfig DEFCONFIG="$d/def" >/dev/null 2>&1
    expect_refusal "an override of the Hopper target other than 90 refused" \
        'CONFIG_CUDA_ARCH_OVERRIDE=100 with the Hopper target' $M O="$d"
else echo "skip - CUDA_ARCH_OVERRIDE checks: skipped: no nvcc"; fi

mkdir -p "$T/none"
expect_refusal "missing .config stops the build" "run 'make host_defconfig'" $M O="$T/none"
expect_refusal "missing kconfiglib stops the build" "kconfiglib not found: run 'apt-get install python3-kconfiglib'" \
    $M O="$T/none" PYTHON= host_defconfig

# Stale: a .config written before a symbol existed.
d=$T/stale; mkdir -p "$d"
$M O="$d" host_defconfig >/dev/null
grep -v '^CONFIG_TRAIN_SEED=' "$d/.config" >"$d/.config.new" && mv "$d/.config.new" "$d/.config"
expect_refusal "stale .config stops the build" "does not set CONFIG_TRAIN_SEED; run 'make olddefconfig'" $M O="$d"
if $M O="$d" olddefconfig >/dev/null 2>&1 && grep -q '^CONFIG_TRAIN_SEED=1$' "$d/.config"; then
    echo "ok - olddefconfig fills in the new symbol"
else echo "not ok - olddefconfig did not set CONFIG_TRAIN_SEED"; fi

# The training step: fused by default on sm90 up to FUSED_DEFAULT_WIDTH
# hidden units with the static arena, layered above it, off sm90 or with a
# per-step strategy; either forced; fused refused without the static arena.
choice_of() { sed -n "s/^CONFIG_$1_\\([A-Z0-9_]*\\)=y\$/\\1/p" "$2/.config"; } # CHOICE DIR: the member set
step_of() { choice_of STEP "$1"; }
prec_of() { choice_of PRECISION "$1"; }
board_choice() { # CHOICE BOARD WANT: configs/BOARD_defconfig selects CONFIG_<CHOICE>_<WANT>
    local d=$T/$1-$2
    if $M O="$d" "$2_defconfig" >/dev/null 2>&1 && [ "$(choice_of "$1" "$d")" = "$3" ]; then
        echo "ok - the $2 board's $1 is $3"
    else echo "not ok - the $2 board's $1: '$(choice_of "$1" "$d")', want $3"; fi
}
for c in "h100 FUSED" "h100_128x3_b32 FUSED" "h100_784x4_b64 FUSED" "h100_1024x3_b32 FUSED" "h100_8192x3_b32 LAYERED" \
    "a100 LAYERED" "rtx2060 LAYERED"; do
    board_choice STEP $c
done
# The GEMM precision: BF16 where the target has it (sm80, sm90), FP32 elsewhere; the rtx2060 board states its own.
for c in "a100 BF16" "h100 BF16" "rtx2060 FP16_ACC16" "host FP32"; do
    board_choice PRECISION $c
done
d=$(with prec-sm75 'CONFIG_TARGET_SM75=y')
if $M O="$d" defconfig DEFCONFIG="$d/def" >/dev/null 2>&1 && [ "$(prec_of "$d")" = FP32 ]; then
    echo "ok - sm75 without a precision: FP32 (no BF16 on Turing)"
else echo "not ok - sm75 default precision: '$(prec_of "$d")', want FP32"; fi

for c in "forced-fused CONFIG_STEP_FUSED=y CONFIG_NN_HIDDEN_WIDTH=4096 FUSED" \
    "forced-layered CONFIG_STEP_LAYERED=y CONFIG_NN_HIDDEN_WIDTH=64 LAYERED" \
    "pool-default CONFIG_MM_POOL=y CONFIG_NN_HIDDEN_WIDTH=64 LAYERED"; do
    set -- $c
    d=$(with "$1" 'CONFIG_TARGET_SM90=y' "$2" "$3")
    if $M O="$d" defconfig DEFCONFIG="$d/def" >/dev/null 2>&1 && [ "$(step_of "$d")" = "$4" ]; then
        echo "ok - $2 with $3: the ${4,,} step"
    else echo "not ok - $2 with $3: step '$(step_of "$d")', want $4"; fi
done
# A GPU board's width edited by hand in .config: the header follows (the step's default is a Kconfig
# expression, not a stored symbol that the edit would leave stale).
d=$T/hand-h100
if $M O="$d" h100_defconfig >/dev/null 2>&1 && sed -i 's/^CONFIG_NN_HIDDEN_WIDTH=.*/CONFIG_NN_HIDDEN_WIDTH=4096/' "$d/.config" &&
    out=$($M O="$d" "$d/include/generated/config.h" 2>&1) &&
    grep -qx '#define CONFIG_NN_HIDDEN_WIDTH 4096' "$d/include/generated/config.h"; then
    echo "ok - the h100 board's hidden width edited by hand in .config: the header follows"
else echo "not ok - the h100 board's hidden width edited by hand: $(tail -n 2 <<<"${out:-}" | tr '\n' ' ')"; fi
# Per-layer widths (NN_HIDDEN_WIDTH_k, 0: NN_HIDDEN_WIDTH): the header gives each; a layer the model lacks, or
# a width out of range, is refused; the step's default follows the widest layer.
d=$(with widths 'CONFIG_NN_HIDDEN_LAYERS=3' 'CONFIG_NN_HIDDEN_WIDTH_1=300' 'CONFIG_NN_HIDDEN_WIDTH_3=100')
h=$d/include/generated/config.h
if $M O="$d" defconfig DEFCONFIG="$d/def" >/dev/null 2>&1 && $M O="$d" "$d/include/generated/config.h" >/dev/null 2>&1 &&
    grep -qx '#define CONFIG_NN_HIDDEN_WIDTH_1 300' "$h" && grep -qx '#define CONFIG_NN_HIDDEN_WIDTH_2 0' "$h" &&
    grep -qx '#define CONFIG_NN_HIDDEN_WIDTH_3 100' "$h" && ! grep -q 'CONFIG_NN_HIDDEN_WIDTH_4' "$h"; then
    echo "ok - per-layer widths: layers 1 and 3 set, layer 2 at 0 (NN_HIDDEN_WIDTH), no layer 4"
else echo "not ok - per-layer widths: the header: $(grep 'NN_HIDDEN_WIDTH' "$h" 2>/dev/null | tr '\n' ' ')"; fi
refused "a width for a layer the model lacks refused" 'CONFIG_NN_HIDDEN_WIDTH_3=64 cannot be set (it depends on' \
    'CONFIG_NN_HIDDEN_LAYERS=2' 'CONFIG_NN_HIDDEN_WIDTH_3=64'
refused "a layer's width 16385 refused" 'CONFIG_NN_HIDDEN_WIDTH_2=16385 is outside its range 0..16384' \
    'CONFIG_NN_HIDDEN_LAYERS=2' 'CONFIG_NN_HIDDEN_WIDTH_2=16385'
# The largest batch at the largest width: 2^28 elements a tensor, which snn_config.h's assertion allows.
d=$(with batch-16384 'CONFIG_TRAIN_BATCH_SIZE=16384' 'CONFIG_NN_HIDDEN_WIDTH=16384')
if $M O="$d" defconfig DEFCONFIG="$d/def" >/dev/null 2>&1 && $M O="$d" "$d/include/generated/config.h" >/dev/null 2>&1 &&
    echo '#include "snn_config.h"' | ${CC:-cc} -fsyntax-only -I"$d/include" -Iinclude -x c - 2>"$d/cc.log"; then
    echo "ok - a batch of 16384 at width 16384 configures and passes snn_config.h's assertions"
else echo "not ok - a batch of 16384 at width 16384: $(tail -n 2 "$d/cc.log" 2>/dev/null | tr '\n' ' ')"; fi
refused "a batch larger than the images the validation split leaves refused" \
    'CONFIG_TRAIN_BATCH_SIZE=16384 exceeds the 10000 training images that CONFIG_TRAIN_VALIDATION_SIZE=50000 leaves' \
    'CONFIG_TRAIN_BATCH_SIZE=16384' 'CONFIG_TRAIN_VALIDATION_SIZE=50000'
refused "a batch of 16385 refused" 'CONFIG_TRAIN_BATCH_SIZE=16385 is outside its range 1..16384' \
    'CONFIG_TRAIN_BATCH_SIZE=16385'
for c in "narrow 64 200 FUSED" "one-wide 64 300 LAYERED" "default-wide 300 64 LAYERED"; do
    set -- $c # a 2-layer sm90 model: NN_HIDDEN_WIDTH, layer 1's own width; layer 2 takes NN_HIDDEN_WIDTH
    d=$(with "widths-step-$1" 'CONFIG_TARGET_SM90=y' 'CONFIG_NN_HIDDEN_LAYERS=2' "CONFIG_NN_HIDDEN_WIDTH=$2" \
        "CONFIG_NN_HIDDEN_WIDTH_1=$3")
    if $M O="$d" defconfig DEFCONFIG="$d/def" >/dev/null 2>&1 && [ "$(step_of "$d")" = "$4" ]; then
        echo "ok - widths $3 and $2 on sm90: the ${4,,} step by default (its widest layer against FUSED_DEFAULT_WIDTH)"
    else echo "not ok - widths $3 and $2 on sm90: step '$(step_of "$d")', want $4"; fi
done
# Distortions (TRAIN_AUGMENT_AFFINE, _ELASTIC): the layered step's gather only; their decimals in range.
refused "distortions on the fused step refused" 'CONFIG_TRAIN_AUGMENT_ELASTIC=y cannot be set (it depends on !STEP_FUSED' \
    'CONFIG_TARGET_SM90=y' 'CONFIG_STEP_FUSED=y' 'CONFIG_TRAIN_AUGMENT_ELASTIC=y'
refused "an elastic sigma of 7 refused" 'CONFIG_TRAIN_ELASTIC_SIGMA=7 is outside [0.5, 6.5]' \
    'CONFIG_TRAIN_AUGMENT_ELASTIC=y' 'CONFIG_TRAIN_ELASTIC_SIGMA="7"'
refused "a rotation of 91 degrees refused" 'CONFIG_TRAIN_AFFINE_ROTATE=91 is outside [0, 90]' \
    'CONFIG_TRAIN_AUGMENT_AFFINE=y' 'CONFIG_TRAIN_AFFINE_ROTATE="91"'
# The resident fused step (FUSED_CLUSTER): on by default with the fused step on sm90 in BF16 or FP16 with
# hidden layers; never in TF32 (its GEMMs are m16n8k16 on 16-bit operands).
d=$T/STEP-h100_128x1_b64
if $M O="$d" h100_128x1_b64_defconfig >/dev/null 2>&1 && grep -qx 'CONFIG_FUSED_CLUSTER=y' "$d/.config"; then
    echo "ok - the h100_128x1_b64 board trains on the resident fused step"
else echo "not ok - the h100_128x1_b64 board: CONFIG_FUSED_CLUSTER not set"; fi
d=$(with cluster-tf32 'CONFIG_TARGET_SM90=y' 'CONFIG_STEP_FUSED=y' 'CONFIG_PRECISION_TF32=y')
if $M O="$d" defconfig DEFCONFIG="$d/def" >/dev/null 2>&1 && [ "$(step_of "$d")" = FUSED ] &&
    ! grep -q '^CONFIG_FUSED_CLUSTER=y' "$d/.config"; then
    echo "ok - a TF32 fused build has no cluster kernel"
else echo "not ok - a TF32 fused build: CONFIG_FUSED_CLUSTER set, or not fused"; fi
# The grid-resident fused step (FUSED_GRID_RESIDENT): the wide boards' kernel; on sm80 too, in TF32 and FP32
# too, never on sm75.
d=$T/STEP-h100_784x4_b64
if $M O="$d" h100_784x4_b64_defconfig >/dev/null 2>&1 && grep -qx 'CONFIG_FUSED_GRID_RESIDENT=y' "$d/.config"; then
    echo "ok - the h100_784x4_b64 board has the grid-resident fused step"
else echo "not ok - the h100_784x4_b64 board: CONFIG_FUSED_GRID_RESIDENT not set"; fi
d=$(with gridres-sm80 'CONFIG_TARGET_SM80=y' 'CONFIG_STEP_FUSED=y')
if $M O="$d" defconfig DEFCONFIG="$d/def" >/dev/null 2>&1 && grep -qx 'CONFIG_FUSED_GRID_RESIDENT=y' "$d/.config"; then
    echo "ok - an sm80 fused build has the grid-resident fused step"
else echo "not ok - an sm80 fused build: CONFIG_FUSED_GRID_RESIDENT not set"; fi
for p in TF32 FP32; do
    d=$(with gridres-$p 'CONFIG_TARGET_SM90=y' 'CONFIG_STEP_FUSED=y' "CONFIG_PRECISION_$p=y")
    if $M O="$d" defconfig DEFCONFIG="$d/def" >/dev/null 2>&1 && grep -qx 'CONFIG_FUSED_GRID_RESIDENT=y' "$d/.config"; then
        echo "ok - a $p fused build has the grid-resident fused step"
    else echo "not ok - a $p fused build: CONFIG_FUSED_GRID_RESIDENT not set"; fi
done
refused "the grid-resident step on sm75 refused" 'CONFIG_FUSED_GRID_RESIDENT=y cannot be set (it depends on' \
    'CONFIG_TARGET_SM75=y' 'CONFIG_STEP_FUSED=y' 'CONFIG_FUSED_GRID_RESIDENT=y'
refused "the fused step without the static arena refused" 'CONFIG_STEP_FUSED=y cannot be set (it depends on' \
    'CONFIG_TARGET_SM90=y' 'CONFIG_MM_POOL=y' 'CONFIG_STEP_FUSED=y'
refused "fused step blocks above 264 refused" 'CONFIG_FUSED_BLOCKS=300 is outside its range 0..264' \
    'CONFIG_TARGET_SM90=y' 'CONFIG_STEP_FUSED=y' 'CONFIG_FUSED_BLOCKS=300'
refused "fused step slices of 0 k tiles refused" 'CONFIG_FUSED_SLICE_KTILES=0 is outside its range 1..1024' \
    'CONFIG_TARGET_SM90=y' 'CONFIG_STEP_FUSED=y' 'CONFIG_FUSED_SLICE_KTILES=0'
refused "the fused step on the host target refused" 'CONFIG_STEP_FUSED=y cannot be set' 'CONFIG_STEP_FUSED=y'
refused "resident step threads above 1024 refused" 'CONFIG_FUSED_CLUSTER_THREADS=2048 is outside its range 128..1024' \
    'CONFIG_TARGET_SM90=y' 'CONFIG_STEP_FUSED=y' 'CONFIG_FUSED_CLUSTER_THREADS=2048'
refused "resident step threads not whole warps refused" 'CONFIG_FUSED_CLUSTER_THREADS=200 is not a multiple of 32' \
    'CONFIG_TARGET_SM90=y' 'CONFIG_STEP_FUSED=y' 'CONFIG_FUSED_CLUSTER_THREADS=200'
refused "grid-resident threads not whole warps refused" 'CONFIG_FUSED_GRID_RESIDENT_THREADS=200 is not a multiple of 32' \
    'CONFIG_TARGET_SM90=y' 'CONFIG_STEP_FUSED=y' 'CONFIG_FUSED_GRID_RESIDENT_THREADS=200'

# A check only the compiler can make, named by symbol.
d=$(with eval 'CONFIG_EVAL_BATCH_SIZE=300')
$M O="$d" defconfig DEFCONFIG="$d/def" >/dev/null 2>&1
expect_refusal "eval batch not dividing 10000 refused at compile time" \
    'CONFIG_EVAL_BATCH_SIZE must divide the 10000 test images' $M O="$d" "$d/build/nn/model.o"

# A precision the target has no instruction for; a warp tile the instruction does not divide.
refused "BF16 on Turing refused" 'CONFIG_PRECISION_BF16=y cannot be set (it depends on' \
    'CONFIG_TARGET_SM75=y' 'CONFIG_PRECISION_BF16=y'
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
    d=$(with warpk 'CONFIG_TARGET_SM80=y' 'CONFIG_PRECISION_FP16=y' 'CONFIG_GEMM_DGRAD_WARP_K=8' 'CONFIG_GEMM_DGRAD_BLOCK_K=16')
    $M O="$d" defconfig DEFCONFIG="$d/def" >/dev/null 2>&1
    expect_refusal "FP16 warp K of 8 refused at compile time" \
        'CONFIG_GEMM_DGRAD_WARP_K must be a multiple of the tensor-core fragment step' $M O="$d" \
        "$d/build/kernels/cuda/gemm/backward_input.o"
else echo "skip - FP16 warp K of 8 refused at compile time: skipped: no nvcc"; fi

# The header is rewritten only when it changes; objects rebuild exactly then.
d=$T/regen; mkdir -p "$d"
$M O="$d" host_defconfig >/dev/null
$M O="$d" "$d/build/nn/model.o" "$d/build/arch/check.o" >/dev/null 2>&1
h=$d/include/generated/config.h
before=$(stat -c %Y.%y "$h")
sleep 1.1; touch "$d/.config"
out=$($M O="$d" "$d/build/nn/model.o" 2>&1)
if [ "$(stat -c %Y.%y "$h")" = "$before" ] && ! grep -q ' CC ' <<<"$out"; then
    echo "ok - unchanged config: header kept, nothing recompiled"
else echo "not ok - touching .config rewrote the header or recompiled: $out"; fi
sed -i 's/^CONFIG_NN_HIDDEN_WIDTH=.*/CONFIG_NN_HIDDEN_WIDTH=100/' "$d/.config"
out=$($M O="$d" "$d/build/nn/model.o" 2>&1)
if grep -q 'CONFIG_NN_HIDDEN_WIDTH 100' "$h" && grep -q 'CC      nn/model.c' <<<"$out"; then
    echo "ok - changed config: header regenerated, dependent object rebuilt"
# Each object depends on the symbols its sources name (tools/make/fixdep.c): the step-loss period is
# read by the program's options and training loop alone, so changing it rebuilds those and no kernel.
$M O="$d" -j"$(nproc)" >/dev/null 2>&1
sed -i 's/^CONFIG_TRAIN_LOG_EVERY=.*/CONFIG_TRAIN_LOG_EVERY=37/' "$d/.config"
out=$($M O="$d" -j"$(nproc)" 2>&1)
rebuilt=$(grep -o ' CC      [^ ]*' <<<"$out" | awk '{print $2}' | sort | tr '\n' ' ')
if grep -q 'app/mnist.c' <<<"$rebuilt" && ! grep -q 'kernels/' <<<"$rebuilt" && [ "$(wc -w <<<"$rebuilt")" -le 4 ]; then
    echo "ok - a symbol's change rebuilds the objects that name it: $rebuilt"
else echo "not ok - CONFIG_TRAIN_LOG_EVERY's change rebuilt: $rebuilt"; fi
else echo "not ok - width change not propagated: $out"; fi

# savedefconfig writes back the minimal config; the alias works.
d=$T/save; mkdir -p "$d"
if $M O="$d" defconfig_host >/dev/null 2>&1 && $M O="$d" savedefconfig >/dev/null 2>&1 &&
    diff <(grep -v '^#' configs/host_defconfig) <(grep -v '^#' "$d/defconfig") >/dev/null; then
    echo "ok - defconfig_host then savedefconfig round-trips configs/host_defconfig"
else echo "not ok - savedefconfig differs from configs/host_defconfig"; fi

for f in configs/*_defconfig; do
    b=$(basename "$f" _defconfig); d=$T/board-$b; mkdir -p "$d"
    if out=$($M O="$d" "${b}_defconfig" 2>&1) && $M O="$d" savedefconfig >/dev/null 2>&1 &&
        diff <(grep -v '^#' "$f") <(grep -v '^#' "$d/defconfig") >/dev/null; then
        echo "ok - $b defconfig is valid and minimal"
    else echo "not ok - $b defconfig is invalid or not minimal (compare make savedefconfig): $out"; fi
done

# make tune writes a tuned board only where its choice changes the board: none is a copy of its board.
for f in configs/*_tuned_defconfig; do
    b=$(basename "$f" _tuned_defconfig)
    if [ ! -f "configs/${b}_defconfig" ]; then echo "not ok - ${b}_tuned defconfig: no board ${b}_defconfig"
    elif diff -q <(grep -v '^#' "$f") <(grep -v '^#' "configs/${b}_defconfig") >/dev/null; then
        echo "not ok - ${b}_tuned defconfig is a copy of ${b}_defconfig (a kept board has no tuned file)"
    else echo "ok - ${b}_tuned defconfig differs from ${b}_defconfig"; fi
done

# A renamed board's old name configures the new board, with one note, for one
# release; it is no board of its own in 'make help'.
d=$T/alias; mkdir -p "$d/new"
if out=$($M O="$d" defconfig_h100_h8192_b32 2>&1) && [ "$(grep -c '^note: ' <<<"$out")" -eq 1 ] &&
    grep -qF 'renamed to h100_8192x3_b32' <<<"$out" && $M O="$d/new" h100_8192x3_b32_defconfig >/dev/null 2>&1 &&
    cmp -s "$d/.config" "$d/new/.config"; then
    echo "ok - the old board name h100_h8192_b32 configures h100_8192x3_b32, with a note"
else echo "not ok - the old board name h100_h8192_b32: $out"; fi
if $M help | grep '^  boards:' | grep -qw 'h100_h8192_b32'; then echo "not ok - make help lists the old name h100_h8192_b32 as a board"
else echo "ok - make help lists no old board name as a board"; fi

# A config error is one line: no "No rule to make target" after it.
d=$T/oneline; mkdir -p "$d"
$M O="$d" host_defconfig >/dev/null
sed -i 's/^CONFIG_NN_HIDDEN_WIDTH=.*/CONFIG_NN_HIDDEN_WIDTH=99999/' "$d/.config"
out=$($M O="$d" 2>&1)
if [ "$(grep -c . <<<"$out")" -eq 1 ] && grep -q 'CONFIG_NN_HIDDEN_WIDTH=99999 is outside its range 1..16384' <<<"$out"; then
    echo "ok - a refused .config stops the build with one line"
else echo "not ok - a refused .config printed: $out"; fi
expect_refusal "olddefconfig refuses an out-of-range value instead of resetting it" \
    'CONFIG_NN_HIDDEN_WIDTH=99999 is outside its range 1..16384' $M O="$d" olddefconfig
if grep -q '^CONFIG_NN_HIDDEN_WIDTH=99999$' "$d/.config"; then echo "ok - the refused value is left for the user to fix"
else echo "not ok - olddefconfig changed the refused value: $(grep HIDDEN_WIDTH "$d/.config")"; fi

# tools/make/kconfig.py runs by itself, and under a python3 without kconfiglib
# finds Debian's (/usr/bin/python3).
if [ -x tools/make/kconfig.py ]; then echo "ok - tools/make/kconfig.py is executable"; else echo "not ok - tools/make/kconfig.py is not executable"; fi
mkdir -p "$T/bare"
printf '#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n' >"$T/bare/python3" && chmod +x "$T/bare/python3"
if /usr/bin/python3 -c 'import kconfiglib' 2>/dev/null; then
    out=$(KCONFIG_CONFIG=$T/bare/.config "$T/bare/python3" tools/make/kconfig.py defconfig configs/host_defconfig 2>&1)
    if [ -f "$T/bare/.config" ]; then echo "ok - kconfig.py under a python3 without kconfiglib uses /usr/bin/python3's"
    else echo "not ok - kconfig.py under a bare python3: $out"; fi
else echo "skip - kconfig.py re-exec: skipped: /usr/bin/python3 has no kconfiglib"; fi

# An in-tree build must not leak into an O= build: the generated header of the
# tree beside include/snn_config.h is never the one an O= build includes. In a
# copy of the sources: an in-tree CUDA config of width 128, then an O= host
# build of width 256 that must link and report 784-256-10.
src=$T/tree; mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$src"
sed 's/^CONFIG_NN_HIDDEN_WIDTH=.*//' configs/rtx2060_defconfig >"$src/intree_def" && echo CONFIG_NN_HIDDEN_WIDTH=128 >>"$src/intree_def"
(cd "$src" && $M defconfig DEFCONFIG=intree_def && $M build/arch/check.o) >/dev/null 2>&1
if grep -q 'CONFIG_NN_HIDDEN_WIDTH 128' "$src/include/generated/config.h" 2>/dev/null; then
    (cd "$src" && $M O=out host_defconfig && $M O=out -j"$(nproc)" out/app/mnist) >"$T/leak.log" 2>&1
    shape=$("$src/out/app/mnist" --help 2>/dev/null | sed -n 's/.*MLP \([0-9-]*\).*/\1/p')
    if [ "$shape" = 784-256-10 ]; then echo "ok - an in-tree CUDA build does not leak into an O= host build"
    else echo "not ok - O= host build after an in-tree one: shape '$shape' (see $(tail -n 3 "$T/leak.log" | tr '\n' ' '))"; fi
else echo "not ok - leak check: the in-tree config was not generated"; fi

# The first in-tree build after make test (build/test there, so make has
# listed build/ before the build writes its files in it) and with an empty
# include/generated: both files written while the makefile is read are seen.
rm -rf "$src/include/generated" "$src/include/config" "$src/build" "$src/.config"
mkdir -p "$src/include/generated" "$src/build/test"
if (cd "$src" && $M host_defconfig && $M -j"$(nproc)" app/mnist) >"$T/empty-gen.log" 2>&1; then
    echo "ok - the first in-tree build after make test builds"
else echo "not ok - the first in-tree build after make test: $(tail -n 2 "$T/empty-gen.log" | tr '\n' ' ')"; fi

# Each dataset reads and fetches its own directory; switching keeps nothing
# of the other's (the .config as menuconfig saves it after the switch).
d=$T/fashion; mkdir -p "$d"
$M O="$d" host_defconfig >/dev/null
sed -i 's/^CONFIG_DATASET_MNIST=y/# CONFIG_DATASET_MNIST is not set/; s/^# CONFIG_DATASET_FASHION_MNIST is not set/CONFIG_DATASET_FASHION_MNIST=y/' "$d/.config"
if $M O="$d" olddefconfig >/dev/null 2>&1 && $M O="$d" "$d/include/generated/config.h" >/dev/null 2>&1 &&
    grep -q '^#define CONFIG_DATASET_FASHION_MNIST 1' "$d/include/generated/config.h" &&
    $M O="$d" FETCH="$T/stub/fetch" data | tr '\n' ' ' | grep -q -- '--dataset fashion-mnist --dest data/fashion-mnist $' &&
    $M O="$T/oneline" FETCH="$T/stub/fetch" DATASET=mnist data | tr '\n' ' ' | grep -q -- '--dataset mnist --dest data/mnist $'; then
    echo "ok - switching to Fashion-MNIST switches the data directory of the build and of make data"
else echo "not ok - the Fashion-MNIST config still uses another directory: $($M O="$d" FETCH="$T/stub/fetch" data 2>&1)"; fi

# Hidden widths that are not a multiple of 8 keep a layered 16-bit build's GEMMs off wgmma and the twins:
# configuring one says so and names the widths that would not; the fused step and TF32 are not concerned.
d=$T/widths; mkdir -p "$d"
out=$($M O="$d/record" h100_record_defconfig 2>&1)
if [[ $out == *"hidden widths not a multiple of 8 (2500, 1500, 500)"*"500 -> 504, 1500 -> 1504, 2500 -> 2504 would not"* ]] &&
    [[ $($M O="$d/record" "$d/record/include/generated/config.h" 2>&1) == *"warning: "*"not a multiple of 8"* ]] &&
    [[ $(cat "$d/record/include/generated/width_warning.txt") == *"(2500, 1500, 500)"* ]]; then
    echo "ok - widths: h100_record's 2500, 1500 and 500 warned by defconfig and by make's genconfig, with the widths that would not"
else echo "not ok - widths: h100_record configured without the warning: $(tail -n 1 <<<"$out")"; fi
printf '%s\n' CONFIG_TARGET_SM90=y CONFIG_STEP_FUSED=y CONFIG_NN_HIDDEN_WIDTH=100 >"$d/fused"
printf '%s\n' CONFIG_TARGET_SM90=y CONFIG_STEP_LAYERED=y CONFIG_PRECISION_TF32=y CONFIG_NN_HIDDEN_WIDTH=100 >"$d/tf32"
quiet=0
for b in fused tf32; do
    [[ $($M O="$d/$b" defconfig DEFCONFIG="$d/$b" 2>&1) != *warning* ]] && quiet=$((quiet + 1))
done
[[ $($M O="$d/s99" h100_speedrun99_defconfig 2>&1) != *warning* ]] && quiet=$((quiet + 1))
if [ $quiet -eq 3 ]; then echo "ok - widths: no warning for width 100 on the fused step or in TF32, nor for h100_speedrun99"
else echo "not ok - widths: $((3 - quiet)) of the fused, TF32 and h100_speedrun99 configs warned"; fi
