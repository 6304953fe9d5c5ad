#!/usr/bin/env python3
"""The benchmark driver: staticnn against PyTorch, per benchmark defconfig.

    tools/bench.py --out DIR [--configs c1,c2,...|benchmark|throughput] [--skip-torch] [--layered]
                   [--modes eager,compile,graph] [--torch-timeout 240] [--run-timeout 300]

Run from the repository root on the GPU machine. --configs names boards, or a set:
benchmark (the default: the five launch-bound boards) or throughput (the wide and
large-batch boards, issue 23). For each configs/<name>_defconfig:
  1. builds it: make O=build/bench/<name> <name>_defconfig, then
     make O=build/bench/<name> -jN build/bench/<name>/app/mnist  (log: DIR/<name>.build.log)
  2. trains: build/bench/<name>/app/mnist --log DIR/<name>.jsonl  (output: DIR/<name>.out);
     staticnn's ms/epoch is the median of the epochs after the first
  3. times PyTorch on the same shape and schedule (read from the build's
     include/generated/config.h): tools/torch_bench.py, one subprocess per mode
     with its own timeout, so that one failure leaves the rest (DIR/<name>.torch-<mode>.{json,log})
  4. with --layered, where the board runs the fused step: builds and trains it again
     with CONFIG_STEP_LAYERED=y (build/bench/<name>-layered), the other path in the same call
and writes DIR/bench.md (a markdown table: config, staticnn ms/epoch, PyTorch
eager / compile / graph ms/epoch, best PyTorch / staticnn, staticnn's final
validation accuracy, the step, the layered twin, the floor, and peak device
memory: staticnn's (the bytes its allocator reserved: the arena, for the
static strategy) against the least torch.cuda.max_memory_allocated() of the
modes) and DIR/bench.json (everything), rewritten after each
config so an interrupted run keeps what it measured.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))  # the shared modules
import bench_boards  # noqa: E402
import step_floor  # noqa: E402
from run_logged import run_logged  # noqa: E402
from train_log import median_after_first  # noqa: E402

PROG = "bench"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("eager", "compile", "graph")
DATASETS = {  # name: (pixel mean, pixel std), as include/snn_config.h
    "MNIST": (0.1307, 0.3081),
    "Fashion-MNIST": (0.2860, 0.3530),
}
INPUT_DIM, CLASSES = 784, 10
BUILD_TIMEOUT_S = 900
MIB = 2 ** 20


# ---- parsing (importable, and tested without a GPU) ----------------------------


def parse_config_h(text):
    """{CONFIG_NAME: value} from a generated config.h; strings unquoted, numbers as int."""
    values = {}
    for m in re.finditer(r"^#define\s+(CONFIG_\w+)\s+(.*?)\s*$", text, re.M):
        name, raw = m.groups()
        if raw.startswith('"') and raw.endswith('"'):
            values[name] = raw[1:-1]
        else:
            try:
                values[name] = int(raw, 0)
            except ValueError:
                values[name] = raw
    return values


def run_shape(config):
    """What torch_bench.py needs to train what the config trains."""
    layers = range(1, config.get("CONFIG_NN_HIDDEN_LAYERS", 1) + 1)
    dataset = "Fashion-MNIST" if config.get("CONFIG_DATASET_FASHION_MNIST") else "MNIST"
    mean, std = DATASETS[dataset]
    return {
        "dims": [INPUT_DIM] + [config.get(f"CONFIG_NN_HIDDEN_WIDTH_{k}") or config["CONFIG_NN_HIDDEN_WIDTH"]
                               for k in layers] + [CLASSES],
        "batch": config["CONFIG_TRAIN_BATCH_SIZE"],
        "lr": config["CONFIG_TRAIN_LR"],
        "momentum": config["CONFIG_TRAIN_MOMENTUM"],
        "epochs": config["CONFIG_TRAIN_EPOCHS"],
        "dataset": dataset,
        "data_dir": os.path.join(config.get("CONFIG_DATA_ROOT", "data"), dataset.lower()),
        "mean": mean,
        "std": std,
        "precision": "bf16" if config.get("CONFIG_PRECISION_BF16") else "fp16" if config.get(
            "CONFIG_PRECISION_FP16") or config.get("CONFIG_PRECISION_FP16_ACC16") else "fp32",
    }


def read_engine_log(text):
    """staticnn's --log JSON lines: epoch times, their median, the device, the final scores."""
    events = [json.loads(line) for line in text.splitlines() if line.strip()]
    epochs = sorted((e for e in events if e.get("event") == "epoch"), key=lambda e: e["epoch"])
    if not epochs:
        raise ValueError("no epoch in the log")
    config = next((e for e in events if e.get("event") == "config"), {})
    memory = next((e for e in events if e.get("event") == "memory"), {})
    ms = [e["ms"] for e in epochs]
    last = epochs[-1]
    return {"ms_all": ms, "ms_median": median_after_first(ms), "test_acc": last["test_acc"],
            "test_loss": last["test_loss"], "train_loss": last["train_loss"], "device": config.get("device"),
            "step": config.get("step", "layered"), "device_bytes": memory.get("reserved_bytes")}


def torch_least_memory(torch):
    """(bytes, mode): the least max_memory_allocated() among the modes that trained, or None."""
    measured = [(e["max_memory_bytes"], mode) for mode, e in torch.items()
                if e and e.get("ok") and e.get("max_memory_bytes")]
    return min(measured) if measured else None


# ---- report --------------------------------------------------------------------


def fmt_ms(ms):
    return f"{ms:.1f}" if ms >= 100 else f"{ms:.2f}"


def torch_cell(entry):
    if entry is None:
        return "-"
    return fmt_ms(entry["ms_median"]) if entry.get("ok") else "failed"


def table_row(name, result):
    """The cells of one config's row of bench.md."""
    shape = result.get("shape")
    label = (f"{name} ({'-'.join(map(str, shape['dims']))}, b{shape['batch']}, {shape.get('precision', 'fp32')})"
             if shape else name)
    engine = result.get("staticnn")
    engine_ms = engine["ms_median"] if engine else None
    torch = result.get("torch", {})
    cells = [label, fmt_ms(engine_ms) if engine else result.get("staticnn_error", "failed")]
    cells += [torch_cell(torch.get(mode)) for mode in MODES]
    best = [e["ms_median"] for e in torch.values() if e and e.get("ok")]
    cells.append(f"{min(best) / engine_ms:.2f}x" if best and engine_ms else "-")
    cells.append(f"{100 * engine['test_acc']:.2f}%" if engine else "-")
    layered = result.get("layered")
    cells.append(engine.get("step", "layered") if engine else "-")
    cells.append(f"{fmt_ms(layered['ms_median'])} ({100 * layered['test_acc']:.2f}%)" if layered else "-")
    cells.append(f"{layered['ms_median'] / engine_ms:.2f}x" if layered and engine_ms else "-")
    floor = result.get("floor_ms")
    cells.append(f"{fmt_ms(floor)} ({floor / engine_ms:.2f})" if floor and engine_ms else "-")
    ours = engine.get("device_bytes") if engine else None
    cells.append(f"{ours / MIB:.0f}" if ours else "-")
    theirs = torch_least_memory(torch)
    cells.append(f"{theirs[0] / MIB:.0f} ({theirs[1]}; {theirs[0] / ours:.2f}x)" if theirs and ours else "-")
    return cells


def render_markdown(results, gpu, date):
    head = ["config", "staticnn ms/epoch", "eager", "compile", "graph", "best torch / staticnn",
            "staticnn final test acc", "step", "layered ms/epoch (acc)", "layered / staticnn",
            "floor ms/epoch (floor / staticnn)", "staticnn MiB", "torch MiB (mode; torch / staticnn)"]
    lines = [f"## staticnn vs PyTorch on {gpu}, {date}", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(table_row(name, r)) + " |" for name, r in results.items()]
    lines += ["", "ms/epoch: training only, median of the epochs after the first. PyTorch columns: "
              "torch_bench.py ms/epoch per mode. Ratio > 1: staticnn is faster. step: the path the board runs; "
              "layered: the same board with CONFIG_STEP_LAYERED=y (--layered). floor: tools/roofline.py. "
              "MiB: peak device memory, staticnn's reserved bytes against the least "
              "torch.cuda.max_memory_allocated() of the modes (both hold the training images on the device).",
              ""]
    for name, r in results.items():
        for mode, entry in r.get("torch", {}).items():
            if entry:
                lines.append(f"- {name} {mode}: {entry.get('note', '')}")
    return "\n".join(lines) + "\n"


def gpu_name(results):
    """The device staticnn reported, else PyTorch's, else nvidia-smi's."""
    for r in results.values():
        for name in [(r.get("staticnn") or {}).get("device")] + [e.get("device") for e in r.get("torch", {}).values()
                                                                 if e]:
            if name:
                return name
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30)
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown GPU"


def write_reports(out, results):
    gpu, date = gpu_name(results), datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    markdown = render_markdown(results, gpu, date)
    with open(os.path.join(out, "bench.md"), "w") as f:
        f.write(markdown)
    with open(os.path.join(out, "bench.json"), "w") as f:
        json.dump({"gpu": gpu, "date": date, "configs": results}, f, indent=1)
    return markdown


# ---- steps ---------------------------------------------------------------------


LAYERED = "-layered"  # the suffix of a board's build with CONFIG_STEP_LAYERED=y


def layered_defconfig(text):
    """A board's defconfig with the layered step forced: its step (a choice takes one member) and its fused
    kernels' settings (which the layered step hides, and Kconfig refuses to set) dropped."""
    return "".join(l for l in text.splitlines(True) if not l.startswith(("CONFIG_STEP_", "CONFIG_FUSED_"))) + \
        "CONFIG_STEP_LAYERED=y\n"


def build(name, out):
    obj = f"build/bench/{name}"
    log = os.path.join(out, f"{name}.build.log")
    if name.endswith(LAYERED):
        os.makedirs(os.path.join(REPO, obj), exist_ok=True)
        with open(os.path.join(REPO, "configs", f"{name[:-len(LAYERED)]}_defconfig")) as f:
            text = layered_defconfig(f.read())
        with open(os.path.join(REPO, obj, "def"), "w") as f:
            f.write(text)
        error = run_logged(["make", f"O={obj}", "defconfig", f"DEFCONFIG={obj}/def"], log, BUILD_TIMEOUT_S)
    else:
        error = run_logged(["make", f"O={obj}", f"{name}_defconfig"], log, BUILD_TIMEOUT_S)
    if not error:
        error = run_logged(["make", f"O={obj}", f"-j{os.cpu_count()}", f"{obj}/app/mnist"], log, BUILD_TIMEOUT_S,
                           "a")
    return error


def read_shape(name):
    with open(os.path.join(REPO, f"build/bench/{name}/include/generated/config.h")) as f:
        return run_shape(parse_config_h(f.read()))


def run_engine(name, out, timeout):
    log = os.path.join(out, f"{name}.jsonl")
    error = run_logged([f"build/bench/{name}/app/mnist", "--log", log], os.path.join(out, f"{name}.out"), timeout)
    if error:
        raise RuntimeError(f"run {error}")
    with open(log) as f:
        return read_engine_log(f.read())


def run_torch(name, shape, mode, out, timeout):
    """One mode of torch_bench.py in its own process: its JSON entry, or a failed one."""
    stem = os.path.join(out, f"{name}.torch-{mode}")
    cmd = [sys.executable, os.path.join(REPO, "tools", "torch_bench.py"), "--dims", ",".join(map(str, shape["dims"])),
           "--batch", str(shape["batch"]), "--lr", str(shape["lr"]), "--momentum", str(shape["momentum"]),
           "--epochs", str(shape["epochs"]), "--modes", mode, "--data", shape["data_dir"],
           "--mean", str(shape["mean"]), "--std", str(shape["std"]), "--precision", shape["precision"],
           "--max-memory", "--json", stem + ".json"]
    if os.path.exists(stem + ".json"):
        os.remove(stem + ".json")
    error = run_logged(cmd, stem + ".log", timeout)
    try:
        with open(stem + ".json") as f:
            report = json.load(f)
    except (OSError, ValueError):
        return {"ok": False, "ms_median": None, "note": f"torch_bench.py {error or 'wrote no JSON'}, see {stem}.log"}
    return dict(report[mode], device=report["device"], torch=report["torch"])


def say(text):
    print(f"{PROG}: {datetime.datetime.now().strftime('%H:%M:%S')} {text}", flush=True)


def bench_config(name, args):
    result = {}
    say(f"{name}: building")
    error = build(name, args.out)
    if error:
        result["staticnn_error"] = "build failed"
        print(f"{PROG}: {name}: build {error}, see {args.out}/{name}.build.log", file=sys.stderr)
    try:
        result["shape"] = read_shape(name)
    except (OSError, KeyError) as e:
        print(f"{PROG}: {name}: no usable config.h ({e})", file=sys.stderr)
        return result
    if not error:
        say(f"{name}: training with staticnn")
        try:
            result["staticnn"] = run_engine(name, args.out, args.run_timeout)
        except (OSError, RuntimeError, ValueError) as e:
            result["staticnn_error"] = "failed"
            print(f"{PROG}: {name}: staticnn {e}, see {args.out}/{name}.out", file=sys.stderr)
    engine = result.get("staticnn")
    if args.layered and engine and engine["step"] != "layered":
        say(f"{name}: building and training the layered step")
        layered = name + LAYERED
        if build(layered, args.out):
            print(f"{PROG}: {layered}: build failed, see {args.out}/{layered}.build.log", file=sys.stderr)
        else:
            try:
                result["layered"] = run_engine(layered, args.out, args.run_timeout)
            except (OSError, RuntimeError, ValueError) as e:
                print(f"{PROG}: {layered}: {e}, see {args.out}/{layered}.out", file=sys.stderr)
    shape = result["shape"]
    result["floor_ms"] = step_floor.floor(shape["dims"], shape["batch"], shape["precision"],
                                          step_floor.DEFAULT_PEAKS)["floor_ms_epoch"]
    if not args.skip_torch:
        result["torch"] = {}
        for mode in args.modes:
            say(f"{name}: PyTorch {mode}")
            result["torch"][mode] = run_torch(name, result["shape"], mode, args.out, args.torch_timeout)
    return result


def config_names(parser, text):
    """The comma-separated defconfig names (or set names) of --configs, each checked to exist."""
    names = [b for c in text.split(",") if c for b in bench_boards.SETS.get(c, [c])]
    if not names:
        parser.error("--configs names no config")
    missing = [c for c in names if not os.path.exists(os.path.join(REPO, "configs", f"{c}_defconfig"))]
    if missing:
        parser.error("no configs/" + ", configs/".join(f"{c}_defconfig" for c in missing))
    return names


def parse_args():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="directory for the logs and reports")
    p.add_argument("--configs", default="benchmark",
                   help="defconfig names, or the sets benchmark / throughput, comma-separated (default: benchmark)")
    p.add_argument("--skip-torch", action="store_true", help="staticnn only")
    p.add_argument("--layered", action="store_true",
                   help="also build and train each fused board with CONFIG_STEP_LAYERED=y")
    p.add_argument("--modes", default=",".join(MODES), help="torch_bench.py modes (default: all)")
    p.add_argument("--torch-timeout", type=int, default=240, help="seconds per torch_bench.py mode (default 240)")
    p.add_argument("--run-timeout", type=int, default=300, help="seconds per staticnn run (default 300)")
    args = p.parse_args()
    args.out = os.path.abspath(args.out)  # the commands run from the repository root
    args.configs = config_names(p, args.configs)
    args.modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in args.modes if m not in MODES]
    if unknown:
        p.error(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    return args


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = {}
    for name in args.configs:
        results[name] = bench_config(name, args)
        markdown = write_reports(args.out, results)
    print(markdown, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
