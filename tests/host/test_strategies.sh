#!/usr/bin/env bash
# The memory strategies on the host target: the same training under the
# static arena and under the pool (bit for bit), and what each one reports.
# usage: test_strategies.sh STATIC_BUILD_DIR POOL_BUILD_DIR
#   (O= directories of host_defconfig and tests/configs/pool_defconfig)
set -u
cd "$(dirname "$0")/../.."
STATIC=$1 POOL=$2
DATA=${SNN_DATA:-data/mnist}
T=$(mktemp -d "${TMPDIR:-/tmp}/snn-mm.XXXXXX")
trap 'rm -rf "$T"' EXIT

for b in static pool; do
    dir=$STATIC; [ $b = pool ] && dir=$POOL
    if ! "$dir/app/mnist" --data "$DATA" --max-steps 100 --epochs 2 --save "$T/$b.bin" --log "$T/$b.jsonl" \
        >"$T/$b.out" 2>&1; then
        echo "not ok - strategies: the $b run failed: $(tail -n 2 "$T/$b.out" | tr '\n' ' ')"; exit 0
    fi
done

if cmp -s "$T/static.bin" "$T/pool.bin"; then echo "ok - strategies: pool and static arena train to identical parameters"
else echo "not ok - strategies: pool and static arena parameters differ"; fi

# Every figure the log has, checked against what the config implies.
python3 - "$T" "$POOL/include/generated/config.h" <<'PY'
import json, re, sys
t, config_h = sys.argv[1:]
config = dict(re.findall(r"^#define (CONFIG_\w+) (\S+)", open(config_h).read(), re.M))
logs = {b: [json.loads(l) for l in open(f"{t}/{b}.jsonl")] for b in ("static", "pool")}
def events(b, kind): return [e for e in logs[b] if e["event"] == kind]
def verdict(ok, text): print(("ok - " if ok else "not ok - ") + "strategies: " + text)

strip = lambda e: {k: v for k, v in e.items() if k not in ("ms", "samples_per_s", "train_s", "wall_s")}
verdict([strip(e) for e in events("static", "epoch")] == [strip(e) for e in events("pool", "epoch")]
        and events("static", "step") == events("pool", "step"), "identical step losses and epoch scores")

s, p = events("static", "memory")[0], events("pool", "memory")[0]
verdict(s["strategy"] == "static" and s["startup_alloc_calls"] == 1 and s["training_alloc_calls"] == 0
        and s["tensors"] == 0 and s["reserved_bytes"] == s["peak_in_use_bytes"] == s["arena_bytes"],
        "static reports one allocation at start-up, none after, the arena reserved and in use")
layers = int(config.get("CONFIG_NN_HIDDEN_LAYERS", 0)) + 1
eval_steps = 10000 // int(config["CONFIG_EVAL_BATCH_SIZE"])
tensors = 2 * (100 * 2 * layers + eval_steps * layers)  # 2 epochs of 100 steps; outputs (and gradients)
verdict(p["strategy"] == "pool" and p["startup_alloc_calls"] == 1 and p["training_alloc_calls"] >= 1
        and p["tensors"] == tensors and p["arena_bytes"] < s["arena_bytes"]
        and p["arena_bytes"] < p["peak_in_use_bytes"] <= p["reserved_bytes"],
        f"pool reports {p['tensors']} per-step tensors (want {tensors}), {p['training_alloc_calls']} segment(s), "
        f"peak in use {p['peak_in_use_bytes']} B within {p['reserved_bytes']} B reserved")
PY

if grep -q "per-step tensors, allocated and freed each step by the pool strategy" "$T/pool.out" &&
    grep -q "input batch" "$T/pool.out" && ! grep -q "activation gradients" "$T/pool.out"; then
    echo "ok - strategies: the pool's plan leaves the per-step tensors to the strategy and says so"
else echo "not ok - strategies: the pool's plan does not say what the strategy allocates"; fi
if grep -q "^memory, strategy pool:" "$T/pool.out" && grep -q "^memory, strategy static:" "$T/static.out"; then
    echo "ok - strategies: each run prints its memory figures"
else echo "not ok - strategies: a run does not print its memory figures"; fi
