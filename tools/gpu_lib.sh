# The GPU scripts' shared helpers (tools/run.sh, tools/gpu_check.sh, tests/gpu/run.sh): source it.

# The first GPU's compute capability as digits (75, 90); empty without a GPU.
gpu_cc() { nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -dc '0-9'; }

# usable CC WANT: whether a GPU of capability CC runs the code path of target
# smWANT (sm_90a code runs on 9.0 only).
usable() { [ -n "$1" ] && [ "$1" -ge "$2" ] && { [ "$2" -ne 90 ] || [ "$1" -eq 90 ]; }; }

# The last epoch's validation accuracy (%) in an app/mnist --log file.
val_acc() {
    python3 -c "import json,sys; print('%.2f' % (100*[json.loads(l) for l in open(sys.argv[1]) if '\"val_acc\"' in l][-1]['val_acc']))" "$1" 2>/dev/null
}
