#!/usr/bin/env bash
# test_images.sh DRIVER [MNIST_DIR]: the image decoders and the digit recipe.
#
# DRIVER is test_image_load. test_images.py writes PNG, PGM and PPM files,
# synthetic and, from MNIST_DIR/t10k-images-idx3-ubyte (default: the
# repository's data/mnist), real test digits; it runs the driver over them
# and prints one ok / not ok / skip line per case. Exits 0.
set -u

driver=${1:-}
if [[ -z $driver || ! -x $driver ]]; then
    echo "not ok - images: driver '${driver}' missing or not executable"
    exit 0
fi
[[ $driver == /* ]] || driver=$PWD/$driver
here=$(cd "$(dirname "$0")" && pwd)
mnist=${2:-$here/../../data/mnist}
# the first python3 with numpy (Debian's python3-numpy is under /usr/bin/python3)
python=$(for p in python3 /usr/bin/python3; do "$p" -c 'import numpy' 2>/dev/null && command -v "$p" && break; done)
if [[ -z $python ]]; then
    echo "skip - images: skipped: no python3 with numpy to write the test images (tools/setup.sh installs it)"
    exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/snn-images.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$python" "$here/test_images.py" "$driver" "$tmp/t" "$mnist/t10k-images-idx3-ubyte" ||
    echo "not ok - images: test_images.py exited with status $?"

# Inputs that are not regular files. A FIFO with no writer is refused as
# empty at once: open() does not wait for a writer (5 s budget). An image
# through a pipe (process substitution, in pieces of the pipe's 64 KiB)
# gives what its file gives.
mkfifo "$tmp/fifo"
err=$(timeout -k 1 5 "$driver" "$tmp/fifo" 2>&1 >/dev/null); rc=$?
if [[ $rc -eq 1 && $err == "mnist: error: $tmp/fifo: empty file (a FIFO or pipe with no writer?)" ]]; then
    echo "ok - images: a FIFO with no writer is refused as empty, not waited on"
else echo "not ok - images: a FIFO with no writer: exit $rc (124 or 137: still waiting after 5 s): $err"; fi
for f in seven-x4.pgm big.png; do
    want=$("$driver" "$tmp/t/in/$f" 2>&1 | tail -n +2)
    got=$("$driver" <(cat "$tmp/t/in/$f") 2>&1); rc=$?
    if [[ $rc -eq 0 && -n $want && $(tail -n +2 <<<"$got") == "$want" ]]; then
        echo "ok - images: $f ($(wc -c <"$tmp/t/in/$f") bytes) through a pipe: the file's digit"
    else echo "not ok - images: $f through a pipe: exit $rc: $(head -n 1 <<<"$got")"; fi
done
exit 0
