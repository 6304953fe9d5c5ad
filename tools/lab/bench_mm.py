#!/usr/bin/env python3
"""Memory strategies side by side: epoch time and device memory per strategy.

The static arena (CUDA graph on and off), our caching pool and
cudaMallocAsync, with PyTorch's peak for the same model.

    tools/lab/bench_mm.py --out DIR [--configs h100_784x4_b64,h100_1024x3_b32] [--epochs 6]
                          [--skip-torch] [--run-timeout 600] [--torch-timeout 300]

Run from the repository root on the GPU machine. For each configs/<name>_defconfig
and each variant of VARIANTS:
  1. builds build/bench_mm/<name>-<variant> from the defconfig with the variant's
     line appended, and checks that the generated config.h has the strategy and
     the CUDA graph setting asked for (log: DIR/<name>-<variant>.build.log)
  2. trains: app/mnist --epochs N --log DIR/<name>-<variant>.jsonl; the time is the
     median epoch after the first, the memory figures are the log's
     {"event":"memory"} line (device allocation calls at start-up and during
     training, per-step tensors, bytes reserved, peak bytes in use)
  3. PyTorch, once per config: tools/torch_bench.py --modes eager --epochs 1
     --max-memory, the same dims, batch, lr and momentum, the training set
     preloaded on the GPU, SGD with momentum: torch.cuda.max_memory_allocated
and writes DIR/mm.md (a markdown table) and DIR/mm.json, rewritten after each
config so an interrupted run keeps what it measured. Ratios are against the
static arena with the graph off: the like-for-like comparison, where every
strategy launches the same kernels one by one and only the memory differs.
"""
import argparse
import datetime
import json
import os
import sys

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TOOLS)  # bench.py
sys.path.insert(0, os.path.join(TOOLS, "lib"))  # the shared modules
from bench import (BUILD_TIMEOUT_S, MIB, REPO, config_names, fmt_ms, layered_defconfig, parse_config_h,  # noqa: E402
                   read_engine_log, run_shape, run_torch)
from run_logged import run_logged  # noqa: E402

PROG = "bench_mm"
DEFAULT_CONFIGS = ["h100_784x4_b64", "h100_1024x3_b32"]
BASELINE = "static"
# variant: (line appended to the defconfig, the CONFIG_MM_ symbol it must give, CUDA graph on, label)
VARIANTS = {
    "static": ("# CONFIG_CUDA_GRAPH is not set", "CONFIG_MM_STATIC", False, "static arena, graph off"),
    "static-graph": ("", "CONFIG_MM_STATIC", True, "static arena, CUDA graph"),
    "pool": ("CONFIG_MM_POOL=y", "CONFIG_MM_POOL", False, "pool (ours)"),
    "cuda-async": ("CONFIG_MM_CUDA_ASYNC=y", "CONFIG_MM_CUDA_ASYNC", False, "cudaMallocAsync"),
}


# ---- configs and logs (importable, and tested without a GPU) --------------------


def variant_defconfig(base_text, variant):
    """The defconfig of one variant: the board's on the layered step (the strategies differ in how a step's
    kernels get their tensors; a fused board's step allocates nothing), with the variant's line appended."""
    line = VARIANTS[variant][0]
    return layered_defconfig(base_text) + (line + "\n" if line else "")


def check_variant(config, variant):
    """None if the generated config (parse_config_h) is the variant asked for, else what is wrong:
    Kconfig quietly drops a choice whose dependencies fail, so it is checked here."""
    _, symbol, graph, _ = VARIANTS[variant]
    if config.get(symbol) != 1:
        strategies = {v[1] for v in VARIANTS.values()}
        strategy = next((k for k in sorted(strategies) if config.get(k) == 1), "none")
        return f"asked for {symbol}, the config has {strategy}"
    if bool(config.get("CONFIG_CUDA_GRAPH")) != graph:
        onoff = lambda on: "on" if on else "off"
        return f"CONFIG_CUDA_GRAPH is {onoff(config.get('CONFIG_CUDA_GRAPH'))}, wanted {onoff(graph)}"
    return None


def read_memory(text):
    """The {"event":"memory"} line of a --log file."""
    for line in text.splitlines():
        if '"memory"' in line:
            event = json.loads(line)
            if event.get("event") == "memory":
                return event
    raise ValueError("no memory line in the log")


def read_run(text):
    """Epoch times (bench.read_engine_log) and the memory figures of one run."""
    return dict(read_engine_log(text), memory=read_memory(text))


# ---- report --------------------------------------------------------------------


def ratio(value, base):
    return f"{value / base:.3f}x" if value is not None and base else "-"


def mib(nbytes):
    return f"{nbytes / MIB:.1f}" if nbytes is not None else "-"


def config_rows(name, result):
    """The table rows of one config: one per variant, then PyTorch's."""
    shape = result.get("shape")
    label = f"{name} ({'-'.join(map(str, shape['dims']))}, b{shape['batch']})" if shape else name
    runs = result.get("runs", {})
    base = runs.get(BASELINE) or {}
    base_ms = base.get("ms_median")
    base_peak = (base.get("memory") or {}).get("peak_in_use_bytes")
    rows = []
    for variant in VARIANTS:
        run = runs.get(variant)
        if run is None:
            continue
        if "error" in run:
            rows.append([label, VARIANTS[variant][3], run["error"]] + ["-"] * 7)
            continue
        m = run["memory"]
        peak = m["peak_in_use_bytes"]
        rows.append([label, VARIANTS[variant][3], fmt_ms(run["ms_median"]), ratio(run["ms_median"], base_ms),
                     f"{m['startup_alloc_calls']} + {m['training_alloc_calls']}", str(m["tensors"]),
                     mib(m["reserved_bytes"]), mib(peak), ratio(peak, base_peak), f"{100 * run['test_acc']:.2f}%"])
    torch = result.get("torch")
    if torch is not None:
        peak = torch.get("max_memory_bytes")
        rows.append([label, "PyTorch eager (max_memory_allocated)", "-", "-", "-", "-", "-",
                     mib(peak) if peak is not None else "failed", ratio(peak, base_peak), "-"])
    return rows


def render_markdown(results, gpu, date, epochs):
    head = ["config", "strategy", "ms/epoch", "time vs static", "device alloc calls (start-up + training)",
            "per-step tensors", "reserved MiB", "peak in use MiB", "peak vs static", "final test acc"]
    lines = [f"## Memory strategies on {gpu}, {date}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, result in results.items():
        lines += ["| " + " | ".join(row) + " |" for row in config_rows(name, result)]
    lines += ["",
              f"ms/epoch: training only, median of epochs 2..{epochs}. Ratios against the static arena with the "
              "CUDA graph off (every strategy then launches the same kernels one by one; > 1: slower or larger). "
              "Reserved and peak in use include the start-up allocation (parameters, momentum, dataset, input "
              "batch, statistics); under pool and cudaMallocAsync the layer outputs and activation gradients are "
              "allocated and freed each step. PyTorch: torch.cuda.max_memory_allocated over one eager epoch of "
              "the same model, with the training set on the GPU.", ""]
    return "\n".join(lines) + "\n"


def device_name(results):
    for r in results.values():
        for run in r.get("runs", {}).values():
            if run.get("device"):
                return run["device"]
        if (r.get("torch") or {}).get("device"):
            return r["torch"]["device"]
    return "unknown GPU"


def write_reports(out, results, epochs):
    gpu, date = device_name(results), datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    markdown = render_markdown(results, gpu, date, epochs)
    with open(os.path.join(out, "mm.md"), "w") as f:
        f.write(markdown)
    with open(os.path.join(out, "mm.json"), "w") as f:
        json.dump({"gpu": gpu, "date": date, "epochs": epochs, "configs": results}, f, indent=1)
    return markdown


# ---- steps ---------------------------------------------------------------------


def say(text):
    print(f"{PROG}: {datetime.datetime.now().strftime('%H:%M:%S')} {text}", flush=True)


def build_variant(name, variant, out):
    """Builds the variant; returns (its parsed config.h, None) or (None, an error text)."""
    obj = f"build/bench_mm/{name}-{variant}"
    log = os.path.join(out, f"{name}-{variant}.build.log")
    os.makedirs(os.path.join(REPO, obj), exist_ok=True)
    with open(os.path.join(REPO, "configs", f"{name}_defconfig")) as f:
        text = variant_defconfig(f.read(), variant)
    with open(os.path.join(REPO, obj, "def"), "w") as f:
        f.write(text)
    error = run_logged(["make", f"O={obj}", "defconfig", f"DEFCONFIG={obj}/def"], log, BUILD_TIMEOUT_S)
    if not error:
        error = run_logged(["make", f"O={obj}", f"-j{os.cpu_count()}", f"{obj}/app/mnist"], log, BUILD_TIMEOUT_S,
                           "a")
    if error:
        return None, f"build {error}"
    with open(os.path.join(REPO, obj, "include/generated/config.h")) as f:
        config = parse_config_h(f.read())
    wrong = check_variant(config, variant)
    return (None, wrong) if wrong else (config, None)


def run_variant(name, variant, args):
    log = os.path.join(args.out, f"{name}-{variant}.jsonl")
    error = run_logged([f"build/bench_mm/{name}-{variant}/app/mnist", "--epochs", str(args.epochs), "--log", log],
                       os.path.join(args.out, f"{name}-{variant}.out"), args.run_timeout)
    if error:
        raise RuntimeError(f"run {error}")
    with open(log) as f:
        return read_run(f.read())


def bench_config(name, args):
    result = {"runs": {}}
    for variant in VARIANTS:
        say(f"{name} {variant}: building")
        config, error = build_variant(name, variant, args.out)
        if error:
            print(f"{PROG}: {name} {variant}: {error}, see {args.out}/{name}-{variant}.build.log", file=sys.stderr)
            result["runs"][variant] = {"error": "build failed"}
            continue
        result.setdefault("shape", run_shape(config))
        say(f"{name} {variant}: training {args.epochs} epochs")
        try:
            result["runs"][variant] = run_variant(name, variant, args)
        except (OSError, RuntimeError, ValueError, KeyError) as e:
            print(f"{PROG}: {name} {variant}: {e}, see {args.out}/{name}-{variant}.out", file=sys.stderr)
            result["runs"][variant] = {"error": "run failed"}
    if not args.skip_torch and "shape" in result:
        say(f"{name}: PyTorch eager, one epoch, peak memory")
        result["torch"] = run_torch(name, dict(result["shape"], epochs=1), "eager", args.out, args.torch_timeout)
    return result


def parse_args():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="directory for the logs and reports")
    p.add_argument("--configs", default=",".join(DEFAULT_CONFIGS), help="defconfig names, comma-separated")
    p.add_argument("--epochs", type=int, default=6, help="epochs per run; the first is a warm-up (default 6)")
    p.add_argument("--skip-torch", action="store_true", help="no PyTorch peak-memory run")
    p.add_argument("--run-timeout", type=int, default=600, help="seconds per staticnn run (default 600)")
    p.add_argument("--torch-timeout", type=int, default=300, help="seconds for the PyTorch run (default 300)")
    args = p.parse_args()
    args.out = os.path.abspath(args.out)  # the commands run from the repository root
    args.configs = config_names(p, args.configs)
    if args.epochs < 2:
        p.error("--epochs must be 2 or more: the first epoch is a warm-up")
    return args


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = {}
    for name in args.configs:
        results[name] = bench_config(name, args)
        markdown = write_reports(args.out, results, args.epochs)
    print(markdown, end="")
    failed = [f"{n} {v}" for n, r in results.items() for v, run in r["runs"].items() if "error" in run]
    if failed:
        print(f"{PROG}: failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
