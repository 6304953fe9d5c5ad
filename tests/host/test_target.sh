#!/usr/bin/env bash
# Choosing without the test set and stopping at a mark: --seed (and
# --digit-width, the other option that makes another model of one build), the
# validation split held out of the training images, --target-acc, and
# tools/time_to_acc.py over seeds. The
# watched set's scores are checked against --eval of the saved model, and the
# validation figures against --eval of a test set made of the held-out images.
# usage: test_target.sh HOST/mnist VALIDATION/mnist
#   (configs/host_defconfig; tests/configs/validation_defconfig)
set -u
cd "$(dirname "$0")/../.."
APP=$1 VAPP=$2
DATA=${SNN_DATA:-data/mnist}
T=$(mktemp -d "${TMPDIR:-/tmp}/snn-target.XXXXXX")
trap 'rm -rf "$T"' EXIT
PY=$(for p in python3 /usr/bin/python3; do "$p" -c 'import numpy' 2>/dev/null && command -v "$p" && break; done)

source tests/host/lib.sh # verdict, expect_refusal, meta
# event LOG NAME KEY: KEY of the last NAME event in the JSON-lines LOG
event() { python3 -c 'import json, sys
e = [x for x in map(json.loads, open(sys.argv[1])) if x["event"] == sys.argv[2]]
print(e[-1].get(sys.argv[3], "") if e else "")' "$@"; }

expect_refusal "--seed -1 refused" "--seed wants a whole number in [0, 2147483647], not '-1'" "$APP" --seed -1
expect_refusal "--seed 2147483648 refused" "not '2147483648'" "$APP" --seed 2147483648
expect_refusal "--target-acc 0 refused" "--target-acc wants a percentage above 0 and at most 100, like 98 or 99.2, not '0'" \
    "$APP" --target-acc 0
expect_refusal "--target-acc 100.5 refused" "not '100.5'" "$APP" --target-acc 100.5
expect_refusal "--target-acc 98% refused" "not '98%'" "$APP" --target-acc 98%
expect_refusal "--target-acc with --dump refused" "--target-acc does not go with it" \
    "$APP" --target-acc 98 --dump "$T/dump"
expect_refusal "--seed with --resume refused" "--seed does not go with it" "$APP" --seed 3 --resume "$T/none.st"
for w in 0 29 x 1.5; do
    expect_refusal "--digit-width $w refused" "--digit-width wants a whole number of pixels in [1, 28], not '$w'" \
        "$APP" --digit-width $w
done
expect_refusal "--digit-width with --resume refused" \
    "--resume goes on at its checkpoint's digit width: --digit-width does not go with it" \
    "$APP" --digit-width 14 --resume "$T/none.st"
expect_refusal "--digit-width with --eval refused" "--eval trains nothing: --digit-width does not go with it" \
    "$APP" --load "$T/none.st" --eval --digit-width 14
expect_refusal "--target-acc with --eval refused" "--eval trains nothing: --target-acc does not go with it" \
    "$APP" --load "$T/none.st" --eval --target-acc 98
if ! "$APP" --help | grep -q -- "--target-acc P .*test set"; then echo "not ok - --help names the set --target-acc watches"
else echo "ok - --help names the set --target-acc watches (test, without a validation split)"; fi

if [ ! -f "$DATA/train-images-idx3-ubyte" ] && [ ! -f "$DATA/train-images-idx3-ubyte.gz" ]; then
    echo "not ok - target runs: no dataset in $DATA (make data)"; exit 0
fi

# --seed: another seed is another run, the same seed the same one, and the
# files say which; a checkpoint keeps its run's seed.
"$APP" --data "$DATA" --max-steps 40 --epochs 1 --save "$T/s1.st" >/dev/null 2>&1
"$APP" --data "$DATA" --max-steps 40 --epochs 1 --seed 7 --save "$T/s7.st" >"$T/s7.out" 2>&1
"$APP" --data "$DATA" --max-steps 40 --epochs 1 --seed 7 --save "$T/s7b.st" >/dev/null 2>&1
verdict "--seed 7 gives other parameters than the configured seed" '[ -s "$T/s7.st" ] && ! cmp -s "$T/s1.st" "$T/s7.st"'
verdict "--seed 7 twice gives identical parameters" 'cmp -s "$T/s7.st" "$T/s7b.st"'
verdict "--seed 7 is printed and saved in the file's metadata" \
    'grep -q ", seed 7$" "$T/s7.out" && [ "$(meta "$T/s7.st" seed)" = 7 ] && meta "$T/s7.st" config | grep -x CONFIG_TRAIN_SEED=7 >/dev/null'
"$APP" --data "$DATA" --max-steps 40 --epochs 2 --seed 7 --save "$T/full.st" >/dev/null 2>&1
"$APP" --data "$DATA" --max-steps 40 --epochs 1 --seed 7 --checkpoint "$T/c1.st" >/dev/null 2>&1
"$APP" --data "$DATA" --max-steps 40 --epochs 2 --resume "$T/c1.st" --save "$T/resumed.st" >/dev/null 2>&1
verdict "a --seed 7 run resumed from its checkpoint: the uninterrupted run's parameters, its seed kept" \
    'cmp -s "$T/full.st" "$T/resumed.st" && [ "$(meta "$T/resumed.st" seed)" = 7 ]'

# --digit-width: the train and test digits scaled (data/digit.h); the files
# say so, the training run's last test score is --eval's (which scales the
# test set by the file), and a checkpoint goes on at its width.
"$APP" --data "$DATA" --max-steps 40 --epochs 1 --digit-width 14 --save "$T/w14.st" --log "$T/w14.jsonl" >"$T/w14.out" 2>&1
# tensors A B: whether two safetensors files hold different tensor bytes (their metadata aside)
tensors_differ() { python3 -c 'import struct, sys
body = [open(f, "rb").read() for f in sys.argv[1:]]
body = [b[8 + struct.unpack("<Q", b[:8])[0]:] for b in body]
sys.exit(body[0] == body[1])' "$1" "$2"; }
verdict "--digit-width 14 trains other parameters, is printed, and saved in the file's metadata" \
    '[ -s "$T/w14.st" ] && tensors_differ "$T/s1.st" "$T/w14.st" && grep -q "scaled to 14 pixels wide (--digit-width)" "$T/w14.out" &&
     [ "$(meta "$T/w14.st" digit_width)" = 14 ] && [ "$(meta "$T/s1.st" digit_width)" = 0 ] &&
     [ "$(event "$T/w14.jsonl" config digit_width)" = 14 ]'
eval14=$("$APP" --data "$DATA" --load "$T/w14.st" --eval 2>&1)
verdict "--eval of a width-14 model scales the test set as its training did: the run's last test accuracy" \
    '[ "$(grep -o "^test set: loss [0-9.]*, accuracy [0-9.]*" <<<"$eval14" | grep -o "accuracy .*" | tr -dc 0-9)" = \
       "$(event "$T/w14.jsonl" epoch test_acc | python3 -c "print(\"%.2f\" % (100 * float(input())))" | tr -dc 0-9)" ] &&
     grep -q "its digits scaled to 14 pixels wide" <<<"$eval14"' "$(grep "^test set" <<<"$eval14")"
"$APP" --data "$DATA" --max-steps 40 --epochs 2 --digit-width 14 --save "$T/wfull.st" >/dev/null 2>&1
"$APP" --data "$DATA" --max-steps 40 --epochs 1 --digit-width 14 --checkpoint "$T/w1.st" >/dev/null 2>&1
"$APP" --data "$DATA" --max-steps 40 --epochs 2 --resume "$T/w1.st" --save "$T/wresumed.st" >"$T/wresumed.out" 2>&1
verdict "a --digit-width 14 run resumed from its checkpoint: the uninterrupted run's parameters, its width kept" \
    'cmp -s "$T/wfull.st" "$T/wresumed.st" && [ "$(meta "$T/wresumed.st" digit_width)" = 14 ] &&
     grep -q "scaled to 14 pixels wide, as the checkpoint" "$T/wresumed.out"'
out=$("$APP" --data "$DATA" --max-steps 10 --epochs 1 --load "$T/w14.st" 2>&1)
verdict "training from a width-14 model's weights at the dataset's width says so" \
    'grep -q "note: $T/w14.st was trained at digit width 14; this run trains at 0" <<<"$out"' "$out"

# --target-acc on the test set (no validation split in this build): it stops
# at the first score every 100 steps (CONFIG_TRAIN_EVAL_EVERY) that reaches
# the mark, and that score is the saved model's --eval.
out=$("$APP" --data "$DATA" --max-steps 300 --epochs 3 --target-acc 92 --log "$T/t.jsonl" --save "$T/t.st" 2>&1)
rc=$?
verdict "--target-acc 92: exit 0, the mark's line printed" \
    '[ $rc -eq 0 ] && grep -q "^target: 92.00% test accuracy reached ([0-9.]*%) at epoch 1 step [0-9]*, [0-9]* steps: [0-9.]* s of training, [0-9.]* s wall$" <<<"$out"' \
    "$(tail -n 3 <<<"$out" | tr '\n' ' ')"
verdict "--target-acc: the log's target_score events every 100 steps up to the mark, then one target event" 'python3 - "$T/t.jsonl" <<"PY"
import json, sys
log = [json.loads(l) for l in open(sys.argv[1])]
evals = [e for e in log if e["event"] == "target_score"]
target = [e for e in log if e["event"] == "target"]
epochs = [e for e in log if e["event"] == "epoch"]
assert len(target) == 1 and target[0]["reached"] and target[0]["set"] == "test", target
t = target[0]
assert [e["step"] for e in evals] == list(range(100, t["step"] + 1, 100)), evals
assert all(e["acc"] < 0.92 for e in evals[:-1]) and evals[-1]["acc"] == t["acc"] >= 0.92, evals
assert 0 < t["train_s"] <= t["wall_s"], t
assert len(epochs) == 1 and epochs[0]["steps"] == t["step"] < 300 and epochs[0]["test_acc"] == t["acc"], epochs
assert log[0]["target_acc"] == 0.92 and log[0]["target_set"] == "test" and log[0]["eval_every"] == 100, log[0]
PY'
acc=$(event "$T/t.jsonl" target acc)
ev=$("$APP" --data "$DATA" --load "$T/t.st" --eval 2>&1 | grep -o "accuracy [0-9.]*%" | head -n 1)
verdict "--target-acc: the saved model is the one that reached the mark (--eval: $ev)" \
    '[ -n "$acc" ] && python3 -c "import sys; sys.exit(abs(float(sys.argv[1]) * 100 - float(sys.argv[2].split()[1][:-1])) > 0.005)" "$acc" "$ev"'
out=$("$APP" --data "$DATA" --max-steps 300 --epochs 2 --target-acc 90 --keep-going --log "$T/kg.jsonl" 2>&1)
verdict "--target-acc --keep-going: the mark recorded in epoch 1, both epochs trained" \
    '[ "$(event "$T/kg.jsonl" target epoch)" = 1 ] && [ "$(event "$T/kg.jsonl" target keep_going)" = True ] &&
     [ "$(grep -c "\"event\": *\"epoch\"" "$T/kg.jsonl")" = 2 ] && ! grep -q "stopped at the target" <<<"$out"' \
    "$(tail -n 3 <<<"$out" | tr '\n' ' ')"
out=$("$APP" --data "$DATA" --keep-going 2>&1)
verdict "--keep-going without --target-acc: refused in one line" \
    '[ "$(grep -c . <<<"$out")" = 1 ] && grep -q "^mnist: error: --keep-going trains past --target-acc" <<<"$out"' "$out"
out=$("$APP" --data "$DATA" --max-steps 50 --epochs 2 --target-acc 99.9 --log "$T/miss.jsonl" 2>&1)
rc=$?
verdict "--target-acc 99.9 missed: exit 0, a line with the best score, a target event not reached" \
    '[ $rc -eq 0 ] && grep -q "^target: 99.90% test accuracy not reached; the best was [0-9.]*% at epoch [12] step 50" <<<"$out" &&
     [ "$(event "$T/miss.jsonl" target reached)" = False ] && [ "$(grep -c "\"event\":\"epoch\"" "$T/miss.jsonl")" = 2 ]'

# The validation split: the last 5000 training images are held out. The
# order never reaches them, --target-acc watches them, and their figures
# equal --eval on a test set made of them (twice over: 10000 images).
out=$("$VAPP" --data "$DATA" --max-steps 120 --epochs 1 --dump "$T/vdump" --save "$T/v.st" --log "$T/v.jsonl" 2>&1)
verdict "validation build: the summary and the table name the held-out set" \
    'grep -q "55000 train (the last 5000 held out for validation), 10000 test" <<<"$out" &&
     grep -q "^epoch  train loss  train acc  valid loss  valid acc  test loss  test acc" <<<"$out"' \
    "$(tail -n 3 <<<"$out" | tr '\n' ' ')"
# numpy reads the dumped order and builds the held-out test set
if [ -n "$PY" ]; then
    verdict "validation build: the epoch's order is a permutation of the 55000 trained on" '"$PY" - "$T/vdump/order-1.bin" <<"PY"
import sys, numpy as np
o = np.fromfile(sys.argv[1], dtype="<i4")
assert o.size == 55000 and np.array_equal(np.sort(o), np.arange(55000)), (o.size, o.max())
PY'
    "$PY" - "$DATA" "$T/vdata" <<'PY'
import gzip, os, sys
import numpy as np
src, dst = sys.argv[1:]
os.makedirs(dst)
def raw(name):
    p = os.path.join(src, name)
    return open(p, "rb").read() if os.path.exists(p) else gzip.open(p + ".gz").read()
images, labels = raw("train-images-idx3-ubyte"), raw("train-labels-idx1-ubyte")
for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"):
    open(os.path.join(dst, name), "wb").write(raw(name))
held = np.frombuffer(images[16:], np.uint8).reshape(60000, 784)[55000:]
held_labels = np.frombuffer(labels[8:], np.uint8)[55000:]
open(os.path.join(dst, "t10k-images-idx3-ubyte"), "wb").write(images[:4] + (10000).to_bytes(4, "big") + images[8:16] +
                                                              np.concatenate([held, held]).tobytes())
open(os.path.join(dst, "t10k-labels-idx1-ubyte"), "wb").write(labels[:4] + (10000).to_bytes(4, "big") +
                                                              np.concatenate([held_labels, held_labels]).tobytes())
PY
    ev=$("$VAPP" --data "$T/vdata" --load "$T/v.st" --eval 2>&1)
    vacc=$(event "$T/v.jsonl" epoch valid_acc) vloss=$(event "$T/v.jsonl" epoch valid_loss)
    # --eval scores the split first (the same held-out images) and then the test set made of them: both lines
    verdict "validation build: the validation figures are --eval's on the held-out images ($vacc, $vloss), as a test set and as the split" \
        'python3 -c "import sys, re
acc, loss, text = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
for tag in (\"test set\", \"validation set\"):
    m = re.search(rf\"^{tag}: loss ([0-9.]+), accuracy ([0-9.]+)%\", text, re.M)
    if not m or abs(100 * acc - float(m.group(2))) >= 0.005 or abs(loss - float(m.group(1))) >= 5e-4:
        sys.exit(1)" "$vacc" "$vloss" "$ev"' "$(grep "^test set\|^validation set" <<<"$ev" | tr '\n' ' ')"
else
    echo "skip - validation build: the order and the held-out images: skipped: no python3 with numpy"
fi
out=$("$VAPP" --data "$DATA" --max-steps 200 --epochs 2 --target-acc 90 --log "$T/vt.jsonl" 2>&1)
verdict "validation build: --target-acc watches the validation set, every 50 steps" \
    'grep -q "^target: 90.00% validation accuracy reached" <<<"$out" && [ "$(event "$T/vt.jsonl" target set)" = validation ] &&
     [ $(( $(event "$T/vt.jsonl" target step) % 50 )) -eq 0 ]' "$(tail -n 3 <<<"$out" | tr '\n' ' ')"
verdict "validation build: the checkpoint metadata records the split" \
    '[ "$(meta "$T/v.st" validation_size)" = 5000 ] && meta "$T/v.st" config | grep -x CONFIG_TRAIN_VALIDATION_SIZE=5000 >/dev/null'

# tools/time_to_acc.py: a row per seed and the summary of those that reached
# the mark, beside the fixed-length result (each run trains on past the mark:
# --keep-going); a seed that misses is a result; a run that fails is an error.
if out=$(python3 tools/time_to_acc.py "$APP" --target 92 --seeds 2 --json "$T/tta.json" -- --data "$DATA" --max-steps 300 --epochs 2 2>&1) &&
    python3 - "$T/tta.json" <<'PY'
import json, statistics, sys
r = json.load(open(sys.argv[1]))
rows, s = r["rows"], r["summary"]
assert [x["seed"] for x in rows] == [1, 2] and all(x["reached"] and x["acc"] >= 0.92 for x in rows), rows
assert s["reached"] == 2 and s["worst_train_s"] == max(x["train_s"] for x in rows) >= s["mean_train_s"] > 0, s
assert s["worst_wall_s"] >= s["worst_train_s"] and r["config"]["shape"] == "784-256-10", r
ends = [x["end_test_acc"] for x in rows]
assert all(x["end_epoch"] == 2 and x["epoch"] == 1 for x in rows), rows  # crossed in epoch 1, trained on to 2
f = s["fixed"]
assert f["epochs"] == 2 and f["mean_test_acc"] == statistics.mean(ends) and f["worst_test_acc"] == min(ends), f
assert f["at_target"] == 2 and f["sd_test_acc"] == statistics.stdev(ends), f
PY
then echo "ok - time_to_acc.py: 2 seeds, the first crossings (mean, worst) and the fixed-length test accuracies in the table and the JSON"
else echo "not ok - time_to_acc.py: $(tail -n 3 <<<"$out" | tr '\n' ' ')"; fi
out=$(python3 tools/time_to_acc.py "$APP" --target 92 --seeds 1 --stop-at-target --json "$T/tta-stop.json" --logs "$T/stop" -- --data "$DATA" --max-steps 300 --epochs 2 2>&1)
verdict "time_to_acc.py --stop-at-target: the run ends at the mark (one epoch, cut short), no fixed-length result" \
    'python3 -c "import json, sys; r = json.load(open(sys.argv[1])); x = r[\"rows\"][0]
sys.exit(not (x[\"end_test_acc\"] is None and \"fixed\" not in r[\"summary\"] and x[\"reached\"]))" "$T/tta-stop.json" &&
     [ "$(event "$T/stop/seed-1.jsonl" target keep_going)" = False ] &&
     [ "$(grep -c "\"event\": *\"epoch\"" "$T/stop/seed-1.jsonl")" = 1 ] && [ -n "$(event "$T/stop/seed-1.jsonl" epoch steps)" ] &&
     grep -q "^first crossing: target 92 % on the test set" <<<"$out" && grep -q "^no fixed-length result: the runs ended at the mark" <<<"$out"' \
    "$(tail -n 2 <<<"$out" | tr '\n' ' ')"
out=$(python3 tools/time_to_acc.py "$APP" --target 99.9 --seeds 2 -- --data "$DATA" --max-steps 30 --epochs 1 2>&1)
rc=$?
verdict "time_to_acc.py: seeds that miss the mark are counted, exit 0" \
    '[ $rc -eq 0 ] && grep -q "^reached by 0 of 2 seeds$" <<<"$out"' "$(tail -n 2 <<<"$out" | tr '\n' ' ')"
out=$(python3 tools/time_to_acc.py "$APP" --target 98 --seeds 1 -- --data "$T/nothing" 2>&1)
rc=$?
verdict "time_to_acc.py: a run that fails is one error line, exit 1" \
    '[ $rc -eq 1 ] && [ "$(grep -c "time_to_acc: error: .*run .make data. or pass --data DIR" <<<"$out")" -eq 1 ]' "$out"
