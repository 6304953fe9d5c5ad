#!/usr/bin/env python3
"""tools/lab/bench_mm.py without a GPU: its defconfig variants, its checks of the
generated config, its log parsing and its table, on fake logs."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "lab"))
import bench_mm  # noqa: E402
from bench import parse_config_h  # noqa: E402


def verdict(ok, name, why=""):
    print(f"ok - bench_mm: {name}" if ok else f"not ok - bench_mm: {name}: {why}")


def fake_log(epoch_ms, strategy, tensors, calls, reserved, peak, arena=100 * 2**20):
    lines = [{"event": "config", "target": "sm90", "device": "NVIDIA H100 80GB HBM3", "shape": "784-784-784-10"}]
    lines += [{"event": "epoch", "epoch": i + 1, "train_loss": 0.1, "train_acc": 0.97, "test_loss": 0.08,
               "test_acc": 0.9812, "ms": ms, "samples_per_s": 1.0} for i, ms in enumerate(epoch_ms)]
    lines.append({"event": "memory", "strategy": strategy, "startup_alloc_calls": 1, "training_alloc_calls": calls,
                  "tensors": tensors, "waits": 0, "arena_bytes": arena, "reserved_bytes": reserved,
                  "peak_in_use_bytes": peak})
    return "".join(json.dumps(e) + "\n" for e in lines)


def test_variants():
    base = "CONFIG_TARGET_SM90=y\nCONFIG_NN_HIDDEN_LAYERS=4\n"
    texts = {v: bench_mm.variant_defconfig(base, v) for v in bench_mm.VARIANTS}
    ok = (texts["static-graph"] == base + "CONFIG_STEP_LAYERED=y\n"
          and texts["static"].endswith("\nCONFIG_STEP_LAYERED=y\n# CONFIG_CUDA_GRAPH is not set\n")
          and texts["pool"].endswith("\nCONFIG_MM_POOL=y\n") and texts["cuda-async"].endswith("CONFIG_MM_CUDA_ASYNC=y\n"))
    fused = bench_mm.variant_defconfig(base + "CONFIG_STEP_FUSED=y\n", "pool")
    ok = ok and fused == base + "CONFIG_STEP_LAYERED=y\nCONFIG_MM_POOL=y\n"
    verdict(ok, "each variant appends the layered step (a fused board's step dropped) and its line to the board's "
            "defconfig", (texts, fused))

    graph = parse_config_h("#define CONFIG_MM_STATIC 1\n#define CONFIG_CUDA_GRAPH 1\n")
    static = parse_config_h("#define CONFIG_MM_STATIC 1\n")
    pool = parse_config_h("#define CONFIG_MM_POOL 1\n#define CONFIG_MM_POOL_CAP_MIB 4096\n")
    checks = [bench_mm.check_variant(graph, "static-graph"), bench_mm.check_variant(static, "static"),
              bench_mm.check_variant(pool, "pool")]
    dropped = bench_mm.check_variant(static, "cuda-async")
    graph_on = bench_mm.check_variant(graph, "static")
    ok = (checks == [None, None, None] and "CONFIG_MM_CUDA_ASYNC" in dropped and "CONFIG_MM_STATIC" in dropped
          and "CONFIG_CUDA_GRAPH is on" in graph_on)
    verdict(ok, "a generated config that is not the variant asked for is caught", (checks, dropped, graph_on))


def test_table():
    mb = 2**20
    logs = {
        "static": fake_log([900, 100, 102, 98, 100, 100], "static", 0, 0, 100 * mb, 100 * mb),
        "static-graph": fake_log([800, 80, 80, 81, 79, 80], "static", 0, 0, 100 * mb, 100 * mb),
        "pool": fake_log([950, 104, 104, 104, 104, 104], "pool", 56000, 3, 106 * mb, 97 * mb, 96 * mb),
        "cuda-async": fake_log([990, 108, 108, 108, 108, 108], "cuda-async", 56000, 56000, 98 * mb, 97 * mb, 96 * mb),
    }
    runs = {v: bench_mm.read_run(text) for v, text in logs.items()}
    ok = runs["pool"]["ms_median"] == 104 and runs["static"]["ms_median"] == 100 and runs["pool"]["memory"]["tensors"] == 56000
    verdict(ok, "a --log file gives the median epoch after the first and the memory figures",
            {v: r["ms_median"] for v, r in runs.items()})
    try:
        bench_mm.read_memory(logs["pool"].replace('"memory"', '"other"'))
        verdict(False, "a log without its memory line is refused", "accepted")
    except ValueError:
        verdict(True, "a log without its memory line is refused")

    shape = {"dims": [784, 784, 784, 784, 784, 10], "batch": 64}
    results = {"h100_784x4_b64": {"shape": shape, "runs": runs,
                                     "torch": {"ok": True, "max_memory_bytes": 250 * mb, "device": "H100"}},
               "h100_1024x3_b32": {"runs": {"static": {"error": "build failed"}}, "torch": {"ok": False}}}
    md = bench_mm.render_markdown(results, "NVIDIA H100 80GB HBM3", "2026-01-01 00:00", 6)
    rows = {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 10 and cells[0].startswith("h100"):
            rows[(cells[0].split(" ")[0], cells[1])] = cells
    want = {
        ("h100_784x4_b64", "static arena, graph off"): ["100.0", "1.000x", "1 + 0", "0", "100.0", "100.0", "1.000x"],
        ("h100_784x4_b64", "static arena, CUDA graph"): ["80.00", "0.800x", "1 + 0", "0", "100.0", "100.0", "1.000x"],
        ("h100_784x4_b64", "pool (ours)"): ["104.0", "1.040x", "1 + 3", "56000", "106.0", "97.0", "0.970x"],
        ("h100_784x4_b64", "cudaMallocAsync"): ["108.0", "1.080x", "1 + 56000", "56000", "98.0", "97.0", "0.970x"],
        ("h100_784x4_b64", "PyTorch eager (max_memory_allocated)"): ["-", "-", "-", "-", "-", "250.0", "2.500x"],
        ("h100_1024x3_b32", "static arena, graph off"): ["build failed", "-", "-", "-", "-", "-", "-"],
        ("h100_1024x3_b32", "PyTorch eager (max_memory_allocated)"): ["-", "-", "-", "-", "-", "failed", "-"],
    }
    bad = {k: (rows.get(k, [None] * 9)[2:9], v) for k, v in want.items() if rows.get(k, [None] * 9)[2:9] != v}
    verdict(not bad and len(rows) == len(want) and "784-784-784-784-784-10, b64" in md and "| 98.12% |" in md,
            "the table: times, ratios against the static arena (graph off), device calls, reserved, peaks, PyTorch",
            bad or md)

    with tempfile.TemporaryDirectory() as out:
        bench_mm.write_reports(out, results, 6)
        with open(os.path.join(out, "mm.json")) as f:
            saved = json.load(f)
        verdict(os.path.exists(os.path.join(out, "mm.md")) and saved["gpu"] == "NVIDIA H100 80GB HBM3",
                "mm.md and mm.json are written, the GPU named from the logs", saved.get("gpu"))


test_variants()
test_table()
