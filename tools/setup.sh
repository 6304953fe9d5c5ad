#!/usr/bin/env bash
# Installs what building, fetching and testing need on a fresh Debian/Ubuntu
# machine (as root, or through sudo). Idempotent: installed packages are skipped.
set -eu
need=()
have_py() { /usr/bin/python3 -c "import $1" 2>/dev/null; } # Debian's python3-* packages serve /usr/bin/python3
for cmd_pkg in make:make gcc:gcc tmux:tmux bc:bc curl:curl npm:npm gzip:gzip python3:python3 clang:clang; do
    command -v "${cmd_pkg%%:*}" >/dev/null || need+=("${cmd_pkg#*:}")
done
have_py kconfiglib || need+=(python3-kconfiglib)
have_py numpy || need+=(python3-numpy)           # tools/torch_parity.py's numpy backend and its test
have_py matplotlib || need+=(python3-matplotlib) # the parity plots
[ -f /usr/include/zlib.h ] || need+=(zlib1g-dev)
[ -f /usr/include/cjson/cJSON.h ] || need+=(libcjson-dev) # safetensors headers, --log JSON
[ -f /usr/include/png.h ] || need+=(libpng-dev) # data/image_png.c: users' digit images
# The IDX fuzz test: libFuzzer and the sanitizers' runtime for clang.
fuzzer_works() { echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
    clang -fsanitize=fuzzer,address -x c - -o /dev/null 2>/dev/null; }
command -v clang >/dev/null && fuzzer_works || need+=(libclang-rt-dev)
# The tests that tell the two datasets apart read Fashion-MNIST from here.
[ -d /usr/share/datasets/fashion-mnist ] || need+=(dataset-fashion-mnist)
if [ ${#need[@]} -gt 0 ]; then
    SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "setup: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Another apt or unattended-upgrades may hold dpkg's lock: wait for it rather than fail at once.
    wait_lock=(-o DPkg::Lock::Timeout=600)
    $SUDO apt-get "${wait_lock[@]}" update -qq
    $SUDO apt-get "${wait_lock[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "setup: no CUDA toolkit (nvcc): only the host target can be built here"
fi
echo "setup: ready"
