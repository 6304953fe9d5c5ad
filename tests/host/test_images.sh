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
exit 0
