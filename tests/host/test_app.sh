#!/usr/bin/env bash
# The program as a user meets it: options, errors, logs, determinism, and an
# end-to-end run that must reach the stated accuracy.
# usage: test_app.sh PATH/TO/mnist   (built from configs/host_defconfig)
set -u
cd "$(dirname "$0")/../.."
APP=$1
DATA=${SNN_DATA:-data/mnist}
MIN_ACC=97.0
T=$(mktemp -d "${TMPDIR:-/tmp}/snn-app.XXXXXX")
trap 'rm -rf "$T"' EXIT

expect_refusal() { # NAME FRAGMENT CMD...
    local name=$1 want=$2; shift 2
    local out rc
    out=$("$@" 2>&1); rc=$?
    if [ $rc -eq 0 ]; then echo "not ok - $name: exit 0"
    elif [ $rc -gt 128 ]; then echo "not ok - $name: crashed (status $rc)"
    elif ! grep -qF -- "$want" <<<"$out"; then echo "not ok - $name: message lacks '$want': $(tail -n 2 <<<"$out" | tr '\n' ' ')"
    elif [ "$(grep -c 'error:' <<<"$out")" -ne 1 ]; then echo "not ok - $name: more than one error line"
    else echo "ok - $name"; fi
}

if "$APP" --help | grep -q -- '--data DIR'; then echo "ok - --help prints the options"; else echo "not ok - --help"; fi
expect_refusal "unknown option refused" "unknown or incomplete option '--bogus'" "$APP" --bogus
expect_refusal "--max-steps abc refused" "--max-steps wants a positive whole number, not 'abc'" "$APP" --max-steps abc
expect_refusal "missing data directory" "run 'make data' or pass --data DIR" "$APP" --data "$T/nothing"
out=$("$APP" --data "$T/nothing" --epochs 1 2>&1)
if [ "$(wc -l <<<"$out")" -eq 1 ]; then echo "ok - missing data is said first, before the plan is printed"
else echo "not ok - missing data: the plan came first: $(head -n 2 <<<"$out" | tr '\n' ' ')"; fi
if "$APP" --help | grep -q "SIGINT, SIGTERM or SIGHUP stops the run"; then echo "ok - --help names the three stop signals"
else echo "not ok - --help does not name SIGHUP"; fi

if [ ! -f "$DATA/train-images-idx3-ubyte" ] && [ ! -f "$DATA/train-images-idx3-ubyte.gz" ]; then
    echo "not ok - program runs: no dataset in $DATA (make data)"; exit 0
fi
mkdir -p "$T/trunc"
for f in "$DATA"/*; do cp "$f" "$T/trunc/"; done
img=$(ls "$T"/trunc/t10k-images*)
if [[ $img == *.gz ]]; then gzip -dc "$img" | head -c 5000000 | gzip >"$img.x"; else head -c 5000000 "$img" >"$img.x"; fi
mv "$img.x" "$img"
expect_refusal "truncated test images refused" "t10k-images" "$APP" --data "$T/trunc"

# From another directory the default data directory is the source tree's, where make data fetches;
# one epoch is "1 epoch"; a --save says where it went; --predict's summary has no evaluation batch.
if [ "$DATA" = data/mnist ]; then
    out=$(cd "$T" && "$(realpath "$OLDPWD/$APP")" --epochs 1 --max-steps 2 --save w.st 2>&1); rc=$?
    if [ $rc -eq 0 ] && grep -q "^  data $PWD/data/mnist: " <<<"$out" && grep -q ", batch [0-9]*, 1 epoch$" <<<"$out" &&
        grep -q "^weights written to w.st$" <<<"$out"; then
        echo "ok - run from another directory: the source tree's data/mnist, '1 epoch', 'weights written to'"
    else echo "not ok - run from another directory: status $rc: $(head -n 4 <<<"$out" | tr '\n' ' ')"; fi
    out=$("$APP" --load "$T/w.st" --predict tests/fuzz/corpus_image/gray8.png 2>&1)
    if grep -q "^staticnn: .*parameters)$" <<<"$out"; then echo "ok - --predict's summary names no evaluation batch"
    else echo "not ok - --predict's summary: $(head -n 1 <<<"$out")"; fi
else echo "skip - the source tree's default data directory: skipped: SNN_DATA is set"; fi

# Same config and seed: bitwise-identical parameters; the log is whole JSON.
"$APP" --data "$DATA" --max-steps 250 --save "$T/a.bin" --log "$T/a.jsonl" >"$T/a.out" 2>&1
"$APP" --data "$DATA" --max-steps 250 --save "$T/b.bin" >/dev/null 2>&1
if [ -s "$T/a.bin" ] && cmp -s "$T/a.bin" "$T/b.bin"; then echo "ok - two runs with one seed give identical parameters"
else echo "not ok - two runs with one seed differ"; fi
if python3 - "$T/a.jsonl" <<'PY'
import json, sys
events = [json.loads(l)["event"] for l in open(sys.argv[1])]
assert events[0] == "config" and "step" in events and events[-2:] == ["epoch", "memory"], events
PY
then echo "ok - --log writes JSON lines (config, steps, epochs, memory)"; else echo "not ok - --log output is not valid JSON lines"; fi
if ls "$T" | grep -q '\.tmp\.'; then echo "not ok - a temporary file was left behind"; else echo "ok - output files written through a temporary name"; fi
if grep -q "alignment padding" "$T/a.out" && grep -q "total .* B" "$T/a.out"; then echo "ok - the memory plan is printed"
else echo "not ok - no memory plan in the output"; fi

# A progress bar on a terminal (script(1) gives the program a pty), plain lines otherwise.
if command -v script >/dev/null; then
    tty_out=$(script -qec "$APP --data $DATA --epochs 1 --max-steps 300" /dev/null 2>&1)
    if grep -q $'epoch 1 \\[=\\+ *\\] *[0-9]*%' <<<"$tty_out"; then echo "ok - a progress bar runs on a terminal"
    else echo "not ok - no progress bar on a terminal"; fi
else echo "skip - progress bar: skipped: no script(1)"; fi
if "$APP" --data "$DATA" --epochs 1 --max-steps 300 | grep -q $'\r'; then echo "not ok - carriage returns in piped output"
else echo "ok - plain lines when stdout is not a terminal"; fi

# End to end: the whole configured run.
start=$(date +%s.%N)
"$APP" --data "$DATA" --log "$T/full.jsonl" >"$T/full.out" 2>&1; rc=$?
secs=$(echo "$(date +%s.%N) - $start" | bc)
acc=$(python3 -c "import json,sys; print('%.2f' % (100*[json.loads(l) for l in open(sys.argv[1]) if '\"epoch\"' in l and 'test_acc' in l][-1]['test_acc']))" "$T/full.jsonl" 2>/dev/null)
if [ $rc -eq 0 ] && [ -n "$acc" ] && python3 -c "import sys; sys.exit(not float('$acc') >= $MIN_ACC)"; then
    echo "ok - end-to-end training reaches $acc% test accuracy (>= $MIN_ACC%) in ${secs%.*} s"
else echo "not ok - end-to-end: status $rc, accuracy '${acc}' (want >= $MIN_ACC%)"; tail -n 8 "$T/full.out" | sed 's/^/    /'; fi
