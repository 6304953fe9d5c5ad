#!/usr/bin/env bash
# What the program does to the files it is given: special files written in
# place and left as they were, links kept, an unwritable --save refused before
# training, no temporary left by an error or a signal, SIGINT/SIGTERM ending
# the run with what it trained saved, a dump directory written whole, and the
# other dataset's files refused.
# usage: test_outputs.sh PATH/TO/mnist   (built from configs/host_defconfig)
set -u
cd "$(dirname "$0")/../.."
APP=$1
DATA=${SNN_DATA:-data/mnist}
APP_ABS=$(realpath "$APP") DATA_ABS=$(realpath "$DATA") # for runs in a directory of their own
FASHION=${SNN_FASHION_DATA:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d "${TMPDIR:-/tmp}/snn-out.XXXXXX")
trap 'rm -rf "$T"' EXIT
SHORT=(--data "$DATA" --epochs 1 --max-steps 20)
PARAM_BYTES=$(("$(sed -n 's/.*(\([0-9]*\) parameters).*/\1/p' <("$APP" "${SHORT[@]}" --max-steps 1 2>/dev/null))" * 4))

verdict() { if eval "$2"; then echo "ok - $1"; else echo "not ok - $1${3:+: $3}"; fi; }
no_temporaries() { ! find "$T" -name '*.tmp.*' | grep -q .; }
# A whole weights file: safetensors whose data is the PARAM_BYTES of the parameters.
weights_ok() {
    python3 -c 'import struct, sys; b = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", b[:8])[0]
sys.exit(len(b) - 8 - n != int(sys.argv[2]))' "$1" "$PARAM_BYTES" 2>/dev/null
}

# Special files: written in place, still what they were. As root the tests
# use device nodes of their own, the same devices as /dev/null and /dev/full,
# so that a program that replaced them would not damage the machine.
NULL=/dev/null FULL=/dev/full
if mknod "$T/null" c 1 3 2>/dev/null && mknod "$T/full" c 1 7 2>/dev/null; then NULL=$T/null FULL=$T/full; fi
"$APP" "${SHORT[@]}" --save "$NULL" >/dev/null 2>"$T/err"; rc=$?
verdict "--save $NULL works and leaves the device" '[ $rc -eq 0 ] && [ -c "$NULL" ]' "$(cat "$T/err")"
mkfifo "$T/fifo"
timeout 60 cat "$T/fifo" >"$T/fifo.out" &
reader=$!
timeout 60 "$APP" "${SHORT[@]}" --log "$T/fifo" >/dev/null 2>"$T/err"; rc=$?
[ -p "$T/fifo" ] || kill $reader 2>/dev/null # the FIFO was replaced: its reader would wait on
wait $reader
verdict "--log to a FIFO writes through it and leaves the FIFO" \
    '[ $rc -eq 0 ] && [ -p "$T/fifo" ] && grep -q "\"event\":\"epoch\"" "$T/fifo.out"' "$(cat "$T/err")"
ln -s /proc/self/fd/1 "$T/stdout" # what /dev/stdout is, in a place a faulty program may replace
out=$("$APP" "${SHORT[@]}" --log "$T/stdout" 2>&1)
verdict "--log to a link to standard output (as /dev/stdout is) writes there" \
    'grep -q "\"event\":\"config\"" <<<"$out" && [ -L "$T/stdout" ]'
if [ -w "$FULL" ]; then
    out=$("$APP" "${SHORT[@]}" --save "$FULL" 2>&1); rc=$?
    verdict "--save $FULL is refused and the device stays" \
        '[ $rc -eq 1 ] && [ -c "$FULL" ] && grep -q "cannot write $FULL: No space left on device" <<<"$out"' "$out"
else echo "skip - --save /dev/full: skipped: /dev/full not writable"; fi

# A link to a regular file stays a link; its target gets the parameters.
echo old >"$T/target.bin" && ln -s target.bin "$T/link.bin"
"$APP" "${SHORT[@]}" --save "$T/link.bin" >/dev/null 2>&1
verdict "--save through a symbolic link keeps the link and replaces its target" \
    '[ -L "$T/link.bin" ] && weights_ok "$T/target.bin"'

# Refused before training: nothing trained, nothing left.
out=$("$APP" --data "$DATA" --save "$T/missing/params.bin" 2>&1); rc=$?
verdict "--save into a missing directory is refused before training" \
    '[ $rc -eq 1 ] && ! grep -q "^ *1 " <<<"$out" && grep -q "its directory $T/missing does not exist" <<<"$out"' "$out"

# An error after the outputs were opened (the data files there, but empty) leaves no temporary.
mkdir "$T/none" && touch "$T/none/"{train,t10k}-{images-idx3,labels-idx1}-ubyte
"$APP" --data "$T/none" --save "$T/e.bin" --log "$T/e.jsonl" --dump "$T/e.dump" >/dev/null 2>&1
verdict "an error leaves no temporary file or directory" 'no_temporaries && [ ! -e "$T/e.bin" ] && [ ! -e "$T/e.dump" ]' \
    "$(ls "$T")"

# A signal mid-epoch: the step finishes, --save and --log keep the work, the
# dump is dropped, one line, exit 128 + signal.
interrupt() { # SIGNAL STATUS
    local sig=$1 want=$2 d=$T/$1 rc
    mkdir -p "$d"
    "$APP" --data "$DATA" --save "$d/p.bin" --log "$d/l.jsonl" --dump "$d/dump" >"$d/out" 2>"$d/err" &
    local pid=$!
    for _ in $(seq 300); do grep -q '^epoch ' "$d/out" && break; sleep 0.05; done
    sleep 0.3
    kill -"$1" $pid; wait $pid; rc=$?
    verdict "$1 mid-epoch: exit $2, one line, parameters and log kept, no temporary, no half dump" \
        '[ $rc -eq $want ] && [ "$(wc -l <"$d/err")" -eq 1 ] && grep -q "interrupted by SIG$sig in epoch [0-9]* after step" "$d/err" &&
         weights_ok "$d/p.bin" && tail -n 1 "$d/l.jsonl" | grep -q "\"event\":\"interrupted\"" &&
         [ ! -e "$d/dump" ] && no_temporaries' "status $rc: $(cat "$d/err") $(ls "$d")"
}
interrupt INT 130
interrupt TERM 143

# An empty output name, or a file name ending in '/', is refused before any work: nothing trained,
# nothing written beside it (an empty name once trained the whole run, then failed).
mkdir "$T/empty"
for args in "--save|" "--save=" "--log|" "--checkpoint|" "--dump|" "--save|$T/empty/"; do
    IFS='|' read -r opt val <<<"$args"
    if [[ $args == *"|"* ]]; then set -- "$opt" "$val"; else set -- "$opt"; fi
    shown="$*"; [ -z "$val" ] && [ $# -eq 2 ] && shown="$opt ''"
    out=$(cd "$T/empty" && "$APP_ABS" --data "$DATA_ABS" "$@" 2>&1); rc=$?
    verdict "$shown (an empty or directory name) refused before training, nothing written" \
        '[ $rc -eq 1 ] && grep -q "wants a .* name" <<<"$out" && ! grep -q "^epoch " <<<"$out" && [ -z "$(ls -A "$T/empty")" ]' \
        "status $rc: $(tail -n 1 <<<"$out")"
done

# A temporary is a new name each run: a dead process's leftover of the old NAME.tmp.PID form, planted
# under the very PID the run gets (exec keeps it), neither blocks the run nor is touched.
mkdir "$T/pid"
out=$(cd "$T/pid" && bash -c 'echo stale >"w.st.tmp.$$"; mkdir "d.tmp.$$"; exec "$0" "$@"' "$APP_ABS" \
    --data "$DATA_ABS" --epochs 1 --max-steps 20 --save w.st --dump d 2>&1); rc=$?
verdict "a stale temporary named as this run's PID would be does not block --save or --dump" \
    '[ $rc -eq 0 ] && weights_ok "$T/pid/w.st" && [ -f "$T/pid/d/meta.json" ] && [ "$(cat "$T"/pid/w.st.tmp.*)" = stale ]' \
    "status $rc: $(tail -n 1 <<<"$out")"
rm -rf "$T"/pid/*.tmp.* # the planted leftovers, which the checks below would count

# A second signal that lands between a temporary's creation and its registration used to leave it
# behind. strace holds every openat of the run 0.3 s on its way back, the temporary's too: SIGINT and
# then SIGTERM sent while the temporary's openat is held are delivered as it returns, the second
# ending the run at once (the first had set the stop flag). Two different signals: two of one kind
# would merge into one pending signal.
if command -v strace >/dev/null && command -v pgrep >/dev/null; then
    mkdir "$T/race"
    (cd "$T/race" && exec strace -qq -o /dev/null -e trace=openat -e inject=openat:delay_exit=300000 \
        "$APP_ABS" --data "$DATA_ABS" --epochs 1 --max-steps 20 --save w.st >out 2>err) &
    spid=$!
    for _ in $(seq 1000); do compgen -G "$T/race/w.st.tmp.*" >/dev/null && break; sleep 0.01; done
    app=$(pgrep -P $spid)
    [ -n "$app" ] && kill -INT "$app" && kill -TERM "$app"
    wait $spid; rc=$?
    verdict "a second signal while an output's temporary is being created leaves no temporary" \
        '[ -n "$app" ] && [ $rc -gt 128 ] && ! compgen -G "$T/race/*.tmp.*" >/dev/null' "status $rc: $(ls "$T/race")"
else echo "skip - a second signal while a temporary is created: skipped: no strace or pgrep"; fi

# SIGTERM during --predict over many files: the results made before it are printed, not lost. One bad
# file after the first 100 says when to send it; 30000 good ones after it take seconds to read.
if [ -f "$T/p.bin" ] || "$APP" "${SHORT[@]}" --save "$T/p.bin" >/dev/null 2>&1; then
    mkdir "$T/many" && printf 'P2\n2 2\n255\n0 255\n255 0\n' >"$T/many/x.pgm" && echo junk >"$T/many/bad.pgm"
    python3 -c 'import os, sys
for i in range(30100): os.symlink("x.pgm", os.path.join(sys.argv[1], f"{i:05}.pgm"))' "$T/many"
    files=(); for i in $(seq -w 0 99); do files+=(000$i.pgm); done; files+=(bad.pgm)
    (cd "$T/many" && exec "$APP_ABS" --load "$T/p.bin" --predict "${files[@]}" [0-9]*.pgm >out 2>err) &
    pid=$!
    for _ in $(seq 1000); do grep -q bad.pgm "$T/many/err" 2>/dev/null && break; sleep 0.01; done
    kill -TERM $pid; wait $pid; rc=$?
    n=$(grep -c '^[0-9]*\.pgm: [0-9] (' "$T/many/out")
    verdict "SIGTERM during --predict prints the results made before it ($n), exit 143" \
        '[ $rc -eq 143 ] && [ "$n" -ge 100 ] && [ "$n" -lt 30200 ]' "status $rc, $n results"
fi

# The dump directory: written whole, replacing an earlier dump, never other files.
"$APP" "${SHORT[@]}" --dump "$T/dump" >/dev/null 2>&1 && "$APP" "${SHORT[@]}" --dump "$T/dump" >/dev/null 2>&1
verdict "--dump writes the directory whole and replaces an earlier dump" \
    '[ -f "$T/dump/meta.json" ] && [ -f "$T/dump/losses-1.bin" ] && no_temporaries && ! ls "$T" | grep -q "dump\.old"'
mkdir "$T/notes" && echo keep >"$T/notes/todo.txt"
out=$("$APP" "${SHORT[@]}" --dump "$T/notes" 2>&1); rc=$?
verdict "--dump refuses a directory of other files" \
    '[ $rc -eq 1 ] && [ "$(cat "$T/notes/todo.txt")" = keep ] && grep -q "refusing to replace it" <<<"$out"' "$out"

# The other dataset's files, though named and shaped alike, are refused.
if [ -f "$FASHION/t10k-labels-idx1-ubyte.gz" ] || [ -f "$FASHION/t10k-labels-idx1-ubyte" ]; then
    out=$("$APP" --data "$FASHION" --epochs 1 --max-steps 1 2>&1); rc=$?
    verdict "an MNIST build refuses the Fashion-MNIST files" \
        '[ $rc -eq 1 ] && grep -q "holds the Fashion-MNIST files, but this build trains MNIST" <<<"$out"' "$out"
else echo "skip - other dataset refused: skipped: no Fashion-MNIST in $FASHION (apt-get install dataset-fashion-mnist)"; fi
