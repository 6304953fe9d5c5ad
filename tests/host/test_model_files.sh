#!/usr/bin/env bash
# Model files as a user meets them: --save, --load, --eval, --checkpoint and
# --resume. Resuming gives the parameters of a run never stopped, bit for
# bit, at an epoch's end and after a signal mid-epoch; a file for another
# build is refused naming what differs; a saved file read by an independent
# reader (Python struct + json + numpy) scores what --eval says.
# usage: test_model_files.sh PATH/TO/mnist   (built from configs/host_defconfig)
set -u
cd "$(dirname "$0")/../.."
APP=$1
DATA=${SNN_DATA:-data/mnist}
T=$(mktemp -d "${TMPDIR:-/tmp}/snn-model.XXXXXX")
trap 'rm -rf "$T"' EXIT
PY=$(for p in python3 /usr/bin/python3; do "$p" -c 'import numpy' 2>/dev/null && command -v "$p" && break; done)
S=150 # steps per epoch: short epochs, several of them

source tests/host/lib.sh # verdict, expect_refusal, meta
# edit IN OUT PYTHON: OUT is IN with its header (h) and data (d) changed by PYTHON
edit() { python3 - "$1" "$2" "$3" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
h, d = json.loads(b[8:8 + n]), bytearray(b[8 + n:])
exec(sys.argv[3])
t = json.dumps(h).encode(); t += b" " * (-len(t) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(t)) + t + bytes(d))
PY
}

expect_refusal "--eval without --load" "--eval needs --load FILE" "$APP" --eval
expect_refusal "--predict without images" "--predict needs at least one image" "$APP" --load x --predict
expect_refusal "--eval with --save" "--eval trains nothing: --save does not go with it" "$APP" --load x --eval --save y
expect_refusal "--resume with --load" "--load does not go with it" "$APP" --resume x --load y
expect_refusal "--resume with --dump" "does not go with --resume" "$APP" --resume x --dump y
expect_refusal "--save and --checkpoint to one file" "--save and --checkpoint name the same file" \
    "$APP" --save "$T/a.st" --checkpoint "$T/../$(basename "$T")/./a.st"
expect_refusal "--checkpoint-every without --checkpoint" "--checkpoint-every needs --checkpoint" "$APP" --checkpoint-every 2
expect_refusal "--load of a missing file" "$T/none.st: cannot open" "$APP" --data "$DATA" --load "$T/none.st" --eval
# A FIFO with no writer; under timeout with a SIGKILL a second after its
# SIGTERM, which the program's handler only notes.
mkfifo "$T/nowriter"
expect_refusal "--load of a FIFO with no writer: refused as empty, not waited on (5 s budget)" \
    "$T/nowriter: 0 bytes (a FIFO or pipe with no writer?)" timeout -k 1 5 "$APP" --data "$DATA" --load "$T/nowriter" --eval

# 2 epochs, a checkpoint, 2 more from it: the parameters of 4 epochs in one go.
run() { "$APP" --data "$DATA" --max-steps $S "$@" >"$T/out" 2>&1 || { echo "not ok - run $*: $(tail -n 2 "$T/out")"; return 1; }; }
run --epochs 4 --save "$T/full4.st" --log "$T/full4.jsonl"
run --epochs 2 --checkpoint "$T/c2.st" --checkpoint-every 2
run --epochs 4 --resume "$T/c2.st" --save "$T/resumed4.st" --log "$T/resumed4.jsonl"
verdict "2 epochs + checkpoint + resume + 2 epochs = 4 epochs, bit for bit" 'cmp -s "$T/full4.st" "$T/resumed4.st"'
verdict "the resumed run trains epochs 3 and 4 only, and logs where it came from" \
    '[ "$(grep -c "\"event\":\"epoch\"" "$T/resumed4.jsonl")" -eq 2 ] && grep -q "\"resumed_epoch\":2" "$T/resumed4.jsonl" &&
     diff <(grep "\"epoch\":4," "$T/full4.jsonl" | grep -o "\"test_acc\":[0-9.]*") <(grep "\"epoch\":4," "$T/resumed4.jsonl" | grep -o "\"test_acc\":[0-9.]*")'
verdict "a checkpoint says where it is (epoch 2, step $S of $S)" \
    '[ "$(meta "$T/c2.st" kind)/$(meta "$T/c2.st" epoch)/$(meta "$T/c2.st" step)/$(meta "$T/c2.st" steps_per_epoch)" = "checkpoint/2/$S/$S" ]'
run --epochs 5 --checkpoint "$T/c5.st" --checkpoint-every 2 --log "$T/c5.jsonl"
verdict "--checkpoint-every 2 over 5 epochs writes after epochs 2, 4 and 5 (the log says), the last one in place" \
    '[ "$(python3 -c "import json, sys; print(*[e[\"epoch\"] for e in map(json.loads, open(sys.argv[1])) if e[\"event\"] == \"checkpoint\"])" "$T/c5.jsonl")" = "2 4 5" ] &&
     [ "$(meta "$T/c5.st" epoch)" = 5 ]'

# A signal mid-epoch: the checkpoint holds the step reached; resuming from it
# gives the uninterrupted run's parameters, wherever the signal fell.
run --epochs 3 --max-steps 900 --save "$T/full3.st"
interrupted=0
for delay in 0.3 0.6 0.1; do
    "$APP" --data "$DATA" --epochs 3 --max-steps 900 --checkpoint "$T/ci.st" --log "$T/ci.jsonl" >"$T/ci.out" 2>"$T/ci.err" &
    pid=$!
    for _ in $(seq 300); do grep -q '^epoch ' "$T/ci.out" && break; sleep 0.02; done
    sleep $delay
    kill -INT $pid; wait $pid; rc=$?
    [ $rc -eq 130 ] && { interrupted=1; break; }
done
if [ $interrupted = 1 ]; then
    at="epoch $(meta "$T/ci.st" epoch) step $(meta "$T/ci.st" step)"
    verdict "SIGINT mid-run writes the checkpoint ($at) and says so" \
        'grep -q "the checkpoint written to $T/ci.st" "$T/ci.err" && tail -n 1 "$T/ci.jsonl" | grep -q interrupted'
    "$APP" --data "$DATA" --epochs 3 --max-steps 900 --resume "$T/ci.st" --save "$T/ri.st" >"$T/ri.out" 2>&1
    verdict "resumed from the signal's checkpoint ($at): the uninterrupted run's parameters, bit for bit" \
        'cmp -s "$T/full3.st" "$T/ri.st"' "$(tail -n 2 "$T/ri.out")"
else echo "not ok - SIGINT mid-run: the run was never caught mid-epoch (status $rc)"; fi

# A stop before the first step (here: SIGINT while opening --log, a FIFO no
# one reads yet): the checkpoint holds epoch 1 at step 0 with its order
# drawn, and resuming from it trains what the full run trains.
run --epochs 2 --save "$T/full2.st"
mkfifo "$T/log.fifo"
"$APP" --data "$DATA" --max-steps $S --epochs 2 --checkpoint "$T/c0.st" --log "$T/log.fifo" >"$T/c0.out" 2>&1 &
pid=$!
sleep 0.3; kill -INT $pid
cat "$T/log.fifo" >"$T/c0.jsonl"
wait $pid; rc=$?
verdict "SIGINT before the first step writes a checkpoint at epoch 1 step 0" \
    '[ $rc -eq 130 ] && [ "$(meta "$T/c0.st" epoch)/$(meta "$T/c0.st" step)" = 1/0 ]' "status $rc: $(tail -n 1 "$T/c0.out")"
run --epochs 2 --resume "$T/c0.st" --save "$T/r0.st"
verdict "resumed from epoch 1 step 0: the full run's parameters, bit for bit" 'cmp -s "$T/full2.st" "$T/r0.st"'

# resume_refused NAME FRAGMENT EDIT: the 2-epoch checkpoint changed by EDIT
# (edit's Python) is refused by --resume with FRAGMENT
resume_refused() {
    edit "$T/c2.st" "$T/edited.st" "$3"
    expect_refusal "$1" "$2" "$APP" --data "$DATA" --max-steps $S --resume "$T/edited.st"
}
# Files for another build, each refused by what differs.
resume_refused "a checkpoint of another shape" \
    "the model shape differs: the file's is 784-128-10, this build's is 784-256-10" \
    'h["__metadata__"]["shape"] = "784-128-10"'
resume_refused "a checkpoint of another dataset" "the dataset differs: the file's is Fashion-MNIST, this build's is MNIST" \
    'h["__metadata__"]["dataset"] = "Fashion-MNIST"'
resume_refused "a checkpoint of another optimizer" \
    "the optimizer differs: the file's is SGD lr 0.05 momentum 0, this build's is SGD lr 0.02 momentum 0.9" \
    'h["__metadata__"]["optimizer"] = "SGD lr 0.05 momentum 0"'
resume_refused "a checkpoint of another batch size" "the batch size differs: the file's is 32" \
    'h["__metadata__"]["batch"] = "32"'
resume_refused "a checkpoint of another validation split" \
    "the validation split (images held out) differs: the file's is 5000, this build's is 0" \
    'h["__metadata__"]["validation_size"] = "5000"'
expect_refusal "a checkpoint resumed with other --max-steps" "its epochs have $S steps, this run's 100" \
    "$APP" --data "$DATA" --max-steps 100 --resume "$T/c2.st"
expect_refusal "a checkpoint with nothing left to train" "--epochs 2 leaves nothing to train" \
    "$APP" --data "$DATA" --max-steps $S --epochs 2 --resume "$T/c2.st"
resume_refused "a checkpoint whose order indexes past the training set" \
    "tensor 'epoch.order' is not a permutation of the 60000 training samples (element 1539 is 1000000000)" '
o = h["epoch.order"]["data_offsets"][0] + 4 * 1539; d[o:o + 4] = struct.pack("<i", 1000000000)'
resume_refused "a checkpoint with an impossible correct count" "tensor 'epoch.correct' holds -5 at step 7, outside [0, 64]" '
o = h["epoch.correct"]["data_offsets"][0] + 4 * 7; d[o:o + 4] = struct.pack("<i", -5)'
resume_refused "a checkpoint without its optimizer" "its metadata has no 'optimizer'" 'del h["__metadata__"]["optimizer"]'
edit "$T/c2.st" "$T/cextra.st" '
h["momentum.9.weight"] = {"dtype": "U8", "shape": [0], "data_offsets": [len(d), len(d)]}'
expect_refusal "a checkpoint with a tensor of no layer, given to --load" "tensor 'momentum.9.weight' is not one of this model's" \
    "$APP" --data "$DATA" --load "$T/cextra.st" --eval
expect_refusal "a directory given to --load" "cannot read: Is a directory" "$APP" --data "$DATA" --load "$T" --eval
expect_refusal "a weights file given to --resume" "not a checkpoint (its metadata's kind is weights)" \
    "$APP" --data "$DATA" --max-steps $S --resume "$T/full4.st"
edit "$T/full4.st" "$T/bare.st" '
del h["__metadata__"]
h["0.weight"]["shape"] = [784, 256]'
expect_refusal "weights of another shape (no metadata)" "tensor '0.weight' has shape [784, 256], not [256, 784]" \
    "$APP" --data "$DATA" --load "$T/bare.st" --eval
edit "$T/full4.st" "$T/dtype.st" 'h["2.bias"]["dtype"] = "I32"'
expect_refusal "weights of another dtype" "tensor '2.bias' is I32, not F32" "$APP" --data "$DATA" --load "$T/dtype.st" --eval
edit "$T/full4.st" "$T/extra.st" '
h["extra"] = {"dtype": "U8", "shape": [0], "data_offsets": [len(d), len(d)]}'
expect_refusal "weights with a tensor of no layer" "tensor 'extra' is not one of this model's" \
    "$APP" --data "$DATA" --load "$T/extra.st" --eval
edit "$T/full4.st" "$T/nan.st" '
o = h["2.bias"]["data_offsets"][0]; d[o:o + 4] = struct.pack("<f", float("nan"))'
expect_refusal "weights holding a NaN" "tensor '2.bias' holds a non-finite value at element 0" \
    "$APP" --data "$DATA" --load "$T/nan.st" --eval
# A digit width that is no width (--digit-width: 0, as read, to 28): refused by --eval, by a committee and by
# --resume, one line each.
for w in x -1 29 "14 " " 14" +14 1e1; do
    edit "$T/full4.st" "$T/width.st" "h['__metadata__']['digit_width'] = '$w'"
    edit "$T/c2.st" "$T/cwidth.st" "h['__metadata__']['digit_width'] = '$w'"
    want="its metadata's digit_width is '$w', not a whole number in [0, 28]"
    expect_refusal "weights whose digit_width is '$w', given to --eval" "$want" "$APP" --data "$DATA" --load "$T/width.st" --eval
    expect_refusal "a committee member whose digit_width is '$w'" "$want" \
        "$APP" --data "$DATA" --load "$T/full4.st" --load "$T/width.st" --eval
    expect_refusal "a checkpoint whose digit_width is '$w', given to --resume" "$want" \
        "$APP" --data "$DATA" --max-steps $S --epochs 4 --resume "$T/cwidth.st"
done
head -c 5000 "$T/full4.st" >"$T/cut.st"
expect_refusal "a truncated weights file" "run past the data's" "$APP" --data "$DATA" --load "$T/cut.st" --eval

# --eval: the figures of the final epoch, a confusion matrix that adds up.
"$APP" --data "$DATA" --load "$T/full4.st" --eval --log "$T/eval.jsonl" >"$T/eval.out" 2>&1
eval_acc=$(sed -n 's/^test set: .*accuracy \([0-9.]*\)%.*/\1/p' "$T/eval.out")
train_acc=$(python3 -c 'import json, sys; print("%.2f" % (100 * [json.loads(l) for l in open(sys.argv[1]) if "\"epoch\"" in l][-1]["test_acc"]))' "$T/full4.jsonl")
verdict "--load --eval reproduces the trained run's test accuracy ($eval_acc% = $train_acc%)" '[ -n "$eval_acc" ] && [ "$eval_acc" = "$train_acc" ]' "$(tail -n 3 "$T/eval.out")"
verdict "--eval prints per-class accuracy and a 10x10 confusion matrix, logs it the same" "python3 - '$T/eval.out' '$T/eval.jsonl' '$DATA' <<'PY'
import gzip, json, os, re, sys
out, log, data = sys.argv[1:4]
rows = [list(map(int, l.split('|')[1].split())) for l in open(out) if re.match(r'^ +[0-9] +[0-9.]+% \|', l)]
e = [json.loads(l) for l in open(log)][-1]
p = os.path.join(data, 't10k-labels-idx1-ubyte')
labels = (open(p, 'rb').read() if os.path.exists(p) else gzip.open(p + '.gz').read())[8:]
counts = [labels.count(c) for c in range(10)]
assert len(rows) == 10 and all(len(r) == 10 for r in rows), rows
assert [sum(r) for r in rows] == counts, ([sum(r) for r in rows], counts)
assert e['event'] == 'evaluation' and e['confusion'] == rows
assert abs(sum(rows[c][c] for c in range(10)) / 10000 - e['accuracy']) < 1e-9
assert all(abs(e['per_class_accuracy'][c] - rows[c][c] / counts[c]) < 1e-6 for c in range(10))
PY"

# An independent reader: the names, shapes and metadata a PyTorch user is
# told to expect, and a numpy forward pass that scores what --eval scores.
if [ -n "$PY" ]; then
    ind=$("$PY" - "$T/full4.st" "$DATA" <<'PY' 2>&1
import gzip, json, os, struct, sys
import numpy as np
path, data = sys.argv[1:3]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); meta = h.pop("__metadata__")
assert (8 + n) % 8 == 0, "data not 8-byte aligned"
assert list(h) == ["0.weight", "0.bias", "2.weight", "2.bias"], list(h)
assert meta["module"] == "torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))", meta["module"]
assert meta["kind"] == "weights" and meta["dataset"] == "MNIST" and meta["shape"] == "784-256-10"
t = {k: np.frombuffer(raw, "<f4", int(np.prod(v["shape"])), 8 + n + v["data_offsets"][0]).reshape(v["shape"])
     for k, v in h.items() if v["dtype"] == "F32"}
assert t["0.weight"].shape == (256, 784) and t["2.bias"].shape == (10,)
def idx(name):
    p = os.path.join(data, name)
    return open(p, "rb").read() if os.path.exists(p) else gzip.open(p + ".gz").read()
x = np.frombuffer(idx("t10k-images-idx3-ubyte"), np.uint8, offset=16).reshape(-1, 784).astype(np.float32)
y = np.frombuffer(idx("t10k-labels-idx1-ubyte"), np.uint8, offset=8)
x = (x / 255 - float(meta["pixel_mean"])) / float(meta["pixel_std"])
hid = np.maximum(x @ t["0.weight"].T + t["0.bias"], 0)
print("%.2f" % (100 * np.mean(np.argmax(hid @ t["2.weight"].T + t["2.bias"], 1) == y)))
PY
)
    verdict "an independent reader (struct, json, numpy) loads the weights as documented and scores $ind% (--eval $eval_acc%)" \
        '[ -n "$eval_acc" ] && python3 -c "import sys; sys.exit(abs(float(\"$ind\") - float(\"$eval_acc\")) > 0.011)"' "$ind"
else echo "skip - independent reader: skipped: no python3 with numpy"; fi

# --predict: real test digits drawn as users' files (PNG at 28x28, 4x larger
# on a light background in colour, PGM), a uniform image, a truncated PNG
# and a text file: each readable one classified, each bad one one error line.
if [ -n "$PY" ]; then
    mkdir -p "$T/img"
    if "$PY" - "$T/img" "$DATA" <<'PY'
import gzip, os, sys
sys.path.insert(0, "tests/host")
import numpy as np
from imagefiles import png, pnm, RGB
out, data = sys.argv[1:3]
def idx(name, offset):
    p = os.path.join(data, name)
    raw = open(p, "rb").read() if os.path.exists(p) else gzip.open(p + ".gz").read()
    return np.frombuffer(raw, np.uint8, offset=offset)
images = idx("t10k-images-idx3-ubyte", 16).reshape(-1, 28, 28)
labels = idx("t10k-labels-idx1-ubyte", 8)
for i in range(20):
    d, big = images[i], np.kron(images[i], np.ones((4, 4), np.uint8))
    light = 255 - big
    open(f"{out}/d{i:02d}-label{labels[i]}.png", "wb").write(png(d))
    open(f"{out}/b{i:02d}-label{labels[i]}.png", "wb").write(png(big))
    open(f"{out}/c{i:02d}-label{labels[i]}.png", "wb").write(png(np.stack([light] * 3, axis=2), RGB))
open(f"{out}/d00.pgm", "wb").write(pnm(images[0]))
open(f"{out}/uniform.png", "wb").write(png(np.full((40, 30), 200, np.uint8)))
raw = png(images[1])
open(f"{out}/truncated.png", "wb").write(raw[: len(raw) // 2])
open(f"{out}/notes.txt", "w").write("not an image\n")
PY
    then
        "$APP" --load "$T/full4.st" --predict "$T"/img/[dbc]*.png "$T/img/d00.pgm" >"$T/pred.out" 2>"$T/pred.err"; rc=$?
        verdict "--predict classifies 61 images, one line each, exit 0"             '[ $rc -eq 0 ] && [ "$(grep -c "^$T/img/.*: [0-9] ([0-9.]*%), then [0-9] ([0-9.]*%)$" "$T/pred.out")" -eq 61 ] && [ ! -s "$T/pred.err" ]'             "status $rc: $(head -n 2 "$T/pred.err")"
        verdict "--predict: the 28x28 test digits as PNG get their labels (at least 18 of 20)"             '[ "$(grep -cE "/d[0-9]+-label([0-9])\.png: \1 " "$T/pred.out")" -ge 18 ]' "$(grep /d "$T/pred.out" | head -n 3)"
        verdict "--predict: 4x larger on a light background, in colour, they get the same line as 4x dark grey (inverted exactly)"             'diff <(grep /b "$T/pred.out" | sed "s|.*/b||") <(grep /c "$T/pred.out" | sed "s|.*/c||")'
        verdict "--predict: 4x larger and made MNIST-like again, at least 17 of 20 get their labels"             '[ "$(grep -cE "/b[0-9]+-label([0-9])\.png: \1 " "$T/pred.out")" -ge 17 ]' "$(grep /b "$T/pred.out" | head -n 3)"
        verdict "--predict: the same digit as PGM and as PNG, the same line"             '[ "$(grep "/d00.pgm:" "$T/pred.out" | cut -d: -f2)" = "$(grep "/d00-label" "$T/pred.out" | cut -d: -f2)" ]'
        "$APP" --load "$T/full4.st" --predict "$T/img/d03-label0.png" "$T/img/truncated.png" "$T/img/notes.txt"             "$T/img/uniform.png" "$T/img/none.png" >"$T/bad.out" 2>"$T/bad.err"; rc=$?
        verdict "--predict: bad files get one error line each, the good one is still classified, exit 1"             '[ $rc -eq 1 ] && [ "$(wc -l <"$T/bad.err")" -eq 4 ] && [ "$(grep -c "error:" "$T/bad.err")" -eq 4 ] &&
             grep -q "truncated.png: " "$T/bad.err" && grep -q "notes.txt: not a PNG, PGM or PPM image" "$T/bad.err" &&
             grep -q "uniform.png: no digit found" "$T/bad.err" && grep -q "none.png: " "$T/bad.err" &&
             [ "$(grep -c "^$T/img/" "$T/bad.out")" -eq 1 ] && grep -q "d03-label0.png: " "$T/bad.out"' "status $rc: $(cat "$T/bad.err")"
        timeout -k 1 5 "$APP" --load "$T/full4.st" --predict "$T/nowriter" <(cat "$T/img/d03-label0.png") \
            >"$T/fifo.out" 2>"$T/fifo.err"; rc=$?
        verdict "--predict: a FIFO with no writer refused as empty, not waited on (5 s budget); an image through a pipe classified" \
            '[ $rc -eq 1 ] && [ "$(cat "$T/fifo.err")" = "mnist: error: $T/nowriter: empty file (a FIFO or pipe with no writer?)" ] &&
             [ "$(grep "^/dev/fd/" "$T/fifo.out" | cut -d: -f2-)" = "$(grep "d03-label0.png: " "$T/bad.out" | cut -d: -f2-)" ]' \
            "status $rc: $(cat "$T/fifo.err")"
        # A FIFO whose writer sends nothing: SIGTERM ends the wait for its data (it once took a second).
        mkfifo "$T/silent" && { sleep 30 >"$T/silent" & }
        writer=$!
        "$APP" --load "$T/full4.st" --predict "$T/silent" >"$T/silent.out" 2>"$T/silent.err" &
        pid=$! # the program itself: timeout(1) would answer the signal for it, before it has ended
        sleep 0.5; kill -TERM $pid 2>/dev/null
        for _ in $(seq 50); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
        kill -KILL $pid 2>/dev/null # still waiting after 5 s: ended here, and the verdict fails
        wait $pid; rc=$?; kill $writer 2>/dev/null
        verdict "--predict: SIGTERM ends the wait for a silent writer's data, exit 143" \
            '[ $rc -eq 143 ] && grep -q "silent: .*Interrupted system call" "$T/silent.err" &&
             grep -q "interrupted by SIGTERM" "$T/silent.err"' "status $rc: $(cat "$T/silent.err")"
    else echo "not ok - --predict: writing the test images failed"; fi
else echo "skip - --predict: skipped: no python3 with numpy"; fi

ck_acc=$("$APP" --data "$DATA" --load "$T/c2.st" --eval 2>&1 | sed -n 's/^test set: .*accuracy \([0-9.]*\)%.*/\1/p')
verdict "--load of a checkpoint takes its weights ($ck_acc%)" '[ -n "$ck_acc" ]'

# --load then training: starts from the file's weights.
run --epochs 1 --load "$T/full4.st" --log "$T/ft.jsonl"
verdict "--load then train starts from the file's weights" \
    'grep -q "starting from the weights of" "$T/out" && python3 -c "import json,sys; sys.exit(not [json.loads(l) for l in open(sys.argv[1]) if \"\\\"epoch\\\"\" in l][-1][\"test_acc\"] > 0.95)" "$T/ft.jsonl"'
exit 0
