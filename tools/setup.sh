#!/usr/bin/env bash
# Installs what building, fetching and testing need on a fresh Debian/Ubuntu
# machine (as root, or through sudo). Idempotent: installed packages are skipped.
set -eu
need=()
have_py_kconfiglib() { /usr/bin/python3 -c 'import kconfiglib' 2>/dev/null || python3 -c 'import kconfiglib' 2>/dev/null; }
for cmd_pkg in make:make gcc:gcc tmux:tmux bc:bc curl:curl npm:npm gzip:gzip python3:python3; do
    command -v "${cmd_pkg%%:*}" >/dev/null || need+=("${cmd_pkg#*:}")
done
have_py_kconfiglib || need+=(python3-kconfiglib)
/usr/bin/python3 -c 'import numpy' 2>/dev/null || need+=(python3-numpy) # tools/torch_parity.py's numpy backend and its test
[ -f /usr/include/zlib.h ] || need+=(zlib1g-dev)
if [ ${#need[@]} -gt 0 ]; then
    SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "setup: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "setup: no CUDA toolkit (nvcc): only the host target can be built here"
fi
echo "setup: ready"
