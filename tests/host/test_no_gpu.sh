#!/usr/bin/env bash
# A CUDA build run on a machine without an NVIDIA driver or GPU says which is
# missing and how to build the host target, in one line, exit 1.
# usage: test_no_gpu.sh PATH/TO/mnist   (a CUDA board's build)
set -u
APP=$1
. "$(dirname "$0")/../../tools/lib/gpu.sh"
if [ -n "$(gpu_cc)" ]; then echo "skip - CUDA build without a GPU: skipped: this machine has a GPU"; exit 0; fi
out=$("$APP" --epochs 1 2>&1); rc=$?
if [ $rc -eq 1 ] && [ "$(grep -c . <<<"$out")" -eq 1 ] &&
    grep -Eq "mnist: error: (no NVIDIA driver found|the NVIDIA driver finds no GPU).*make host_defconfig && make" <<<"$out"; then
    echo "ok - a CUDA build without a GPU says so and names the host target"
else echo "not ok - CUDA build without a GPU: status $rc: $out"; fi
