# The GPU scripts' shared helpers (tools/make/run.sh, tools/gpu_check.sh, tests/gpu/run.sh, tests/host/test_ptx.sh): source it.

# The first GPU's compute capability as digits (75, 90); empty without a GPU.
gpu_cc() { nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -dc '0-9'; }

# usable CC WANT: whether a GPU of capability CC runs the code path of target
# smWANT (sm_90a code runs on 9.0 only).
usable() { [ -n "$1" ] && [ "$1" -ge "$2" ] && { [ "$2" -ne 90 ] || [ "$1" -eq 90 ]; }; }

# The last epoch's validation accuracy (%) in an app/mnist --log file.
test_acc() {
    python3 -c "import json,sys; print('%.2f' % (100*[json.loads(l) for l in open(sys.argv[1]) if '\"test_acc\"' in l][-1]['test_acc']))" "$1" 2>/dev/null
}

# board_def_retarget BOARD DIR: BOARD's defconfig without its target and
# precision, with its GEMM tiles and stages written out from its .config (made
# in DIR): the tiles may be its target's defaults, which another target lacks.
board_def_retarget() {
    local tiles='^CONFIG_GEMM_\(FWD\|DGRAD\|WGRAD\)_\|^CONFIG_GEMM_STAGES='
    make --no-print-directory O="$2" "${1}_defconfig" >/dev/null || return 1
    grep -v "^CONFIG_TARGET_SM\\|^CONFIG_PRECISION_\\|$tiles" "configs/${1}_defconfig"
    grep "$tiles" "$2/.config"
}
