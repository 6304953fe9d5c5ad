#!/usr/bin/env bash
# A run that cannot learn stops with a message that names the cause and the
# symbol to change: a NaN loss at the first loss check after it (not at the
# epoch's end), a loss that ends the epoch above a uniform guess's ln 10.
# usage: test_guards.sh DIVERGE_APP COLLAPSE_APP
#   (built from tests/configs/diverge_defconfig and collapse_defconfig)
set -u
cd "$(dirname "$0")/../.."
DIVERGE=$1 COLLAPSE=$2
DATA=${SNN_DATA:-data/mnist}
T=$(mktemp -d "${TMPDIR:-/tmp}/snn-guard.XXXXXX")
trap 'rm -rf "$T"' EXIT

check_every=$(sed -n 's/^CONFIG_TRAIN_CHECK_EVERY=//p' "$(dirname "$DIVERGE")/../.config")
out=$("$DIVERGE" --data "$DATA" --log "$T/d.jsonl" --save "$T/d.bin" 2>&1); rc=$?
if [ $rc -eq 1 ] && grep -q "training diverged: the loss is NaN at epoch 1 step [0-9]* (seen at the check after step $check_every); lower CONFIG_TRAIN_LR (now 1000)" <<<"$out" &&
    ! grep -q '^ *1 ' <<<"$out"; then
    echo "ok - a NaN loss stops the run at the check after step $check_every, naming CONFIG_TRAIN_LR"
else echo "not ok - divergence: status $rc: $(tail -n 2 <<<"$out" | tr '\n' ' ')"; fi
if tail -n 1 "$T/d.jsonl" | grep -q '"event":"error","message":"training diverged' && [ ! -e "$T/d.bin" ] &&
    ! ls "$T" | grep -q '\.tmp\.'; then
    echo "ok - a diverged run's log ends with the error; nothing saved, no temporary left"
else echo "not ok - diverged run's files: $(ls "$T")"; fi

out=$("$COLLAPSE" --data "$DATA" --max-steps 12000 2>&1); rc=$?
if [ $rc -eq 1 ] && grep -q "training collapsed: the mean loss of epoch 1's last 10000 steps is [0-9.]*, above ln 10 = 2.303" <<<"$out" &&
    grep -q "too high for batch 1: lower CONFIG_TRAIN_LR (now 0.02) or raise CONFIG_TRAIN_BATCH_SIZE" <<<"$out"; then
    echo "ok - a run that ends the epoch above ln 10 stops as collapsed, naming the symbols"
else echo "not ok - collapse: status $rc: $(tail -n 2 <<<"$out" | tr '\n' ' ')"; fi
