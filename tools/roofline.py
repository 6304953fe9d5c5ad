#!/usr/bin/env python3
"""The hardware floor of a training step and epoch, and a measured epoch as a fraction of it.

    tools/roofline.py [--board NAME ...] [--shape 784-128x3-10 --batch 32 [--precision bf16]]
                      [--ms MEASURED] [--log mnist-log.jsonl ...] [--json OUT] [--gpus 2] [--reduce bf16]
                      [--gpu h100|h200] [--peak-tflops 790] [--hbm-tbps 3.0] [--l2-tbps 6.0] [--l2-mb 50]
                      [--phase-us 0.5]

A row per --board (configs/NAME_defconfig with the Kconfig defaults), --shape
or --log (an app/mnist --log file: the shape and batch of its config event,
the median ms of its epochs after the first); no row asked for: the five
benchmark boards and the throughput boards (tools/bench.py's sets). --ms is
the measured ms/epoch of the one --board or --shape. --gpu takes a GPU's rates
(default h100; h200: faster HBM, larger L2), each of which --peak-tflops,
--hbm-tbps, --l2-tbps, --l2-mb and --phase-us overrides.
Prints a markdown table; --json writes the rows.

The floor of a step (issue 20) is the largest of its FLOPs at the peak, its
parameter bytes at HBM's rate (L2's where they fit there) and its chain of
dependent phases; tools/lib/step_floor.py says how each is counted.

The last two columns predict data parallelism's speed-up on --gpus GPUs (default 2) at the same global batch:
the step (the measured one where --ms or --log gives it, else the floor: then an upper bound) split over
the GPUs, plus the all-reduce of its gradients (--reduce bf16 or fp32) from a measured table, without
overlap and overlapped by the backward pass; tools/lib/allreduce.py says how. The second is the
engine's data-parallel step with its all-reduce and an update pass over every parameter counted whole
(CONFIG_DP; its momentum counted; docs/PERF.md v30; pessimistic by up to 24 % on 2 H200s since some of both
hides, v45), what make predicts at configure time.
"""
import argparse
import json
import os
import sys

PROG = "roofline"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools", "lib"))  # the shared modules
sys.path.insert(0, os.path.join(REPO, "tools", "make"))  # kconfig.py
import allreduce  # noqa: E402
import bench_boards  # noqa: E402
from step_floor import GPU_PEAKS, PRECISIONS, floor, param_count  # noqa: E402
from train_log import median_after_first  # noqa: E402


class Refusal(Exception):
    pass


def parse_shape(text):
    """'784-128x3-10' or '784-128-128-128-10' -> [784, 128, 128, 128, 10]."""
    dims = []
    for part in text.split("-"):
        width, _, times = part.partition("x")
        if not width.isdigit() or int(width) < 1 or (times and (not times.isdigit() or int(times) < 1)):
            raise Refusal(f"bad shape {text!r}: write it like 784-128x3-10")
        dims += [int(width)] * (int(times) if times else 1)
    if len(dims) < 2:
        raise Refusal(f"bad shape {text!r}: it needs an input and an output width")
    return dims


def board_config(name):
    """(dims, batch, precision) of configs/NAME_defconfig (or of the defconfig at the path NAME) with the
    Kconfig defaults."""
    path = name if os.sep in name else os.path.join(REPO, "configs", f"{name}_defconfig")
    if not os.path.isfile(path):
        raise Refusal(f"unknown board {name!r}: no " + (path if os.sep in name else f"configs/{name}_defconfig"))
    os.environ["srctree"] = REPO
    import kconfig  # runs this script again under /usr/bin/python3 where kconfiglib is not importable
    try:
        kconf = kconfig.kconfiglib.Kconfig(os.path.join(REPO, "Kconfig"), warn_to_stderr=False)
        kconf.load_config(path)
    except kconfig.kconfiglib.KconfigError as e:
        raise Refusal(" ".join(str(e).split()))
    problems, names = kconfig.value_problems(kconf)
    problems += kconfig.untaken_values(kconf, skip=names)
    if problems:
        raise Refusal(f"{os.path.relpath(path, REPO)}: " + "; ".join(problems))
    return kconfig.board_of(kconf)


def read_log(path):
    """(dims, batch, precision, median ms/epoch after the first) of an app/mnist --log file."""
    try:
        with open(path) as f:
            events = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        raise Refusal(f"{path}: {e}")
    config = next((e for e in events if isinstance(e, dict) and e.get("event") == "config"), None)
    if not config or "shape" not in config or "batch" not in config:
        raise Refusal(f"{path}: no config event with a shape and a batch")
    epochs = sorted((e for e in events if isinstance(e, dict) and e.get("event") == "epoch" and "ms" in e),
                    key=lambda e: e.get("epoch", 0))
    if not epochs:
        raise Refusal(f"{path}: no epoch in the log")
    precision = config.get("precision", "bf16")
    if precision not in PRECISIONS:
        raise Refusal(f"{path}: unknown precision {precision!r}")
    return parse_shape(str(config["shape"])), int(config["batch"]), precision, median_after_first(
        [e["ms"] for e in epochs])


def fmt(x):
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def render(rows, gpus):
    head = ["board / shape", "batch", "GFLOP/step", "MB/step", "fits in L2", "compute us", "memory us",
            "latency us", "binds", "floor ms/epoch", "measured ms/epoch", "floor / measured",
            f"x{gpus} GPUs (no overlap .. overlapped)", f"x{gpus} GPUs, staticnn's step as built"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        label = f"{r['board']} ({r['shape']})" if r.get("board") else r["shape"]
        us = r["floor_us"]
        measured = r.get("measured_ms")
        cells = [label, str(r["batch"]), fmt(r["gflop_step"]), fmt(r["mb_step"]), "yes" if r["fits_l2"] else "no",
                 fmt(us["compute"]), fmt(us["memory"]), fmt(us["latency"]), r["binding"], fmt(r["floor_ms_epoch"]),
                 fmt(measured) if measured else "-", f"{r['fraction']:.3f}" if measured else "-",
                 f"{r['dp_speedup'][0]:.2f} .. {r['dp_speedup'][1]:.2f}" + ("" if measured else " (of the floor)"),
                 f"{r['dp_engine']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def positive(text):
    try:
        v = float(text)
    except ValueError:
        v = 0
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return v


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not the usage
        raise Refusal(message)


def parse_args(argv):
    p = Parser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--board", action="extend", nargs="+", default=[],
                   help="configs/NAME_defconfig, or a defconfig's path (one or more)")
    p.add_argument("--shape", help="a model shape, like 784-128x3-10")
    p.add_argument("--batch", type=int, help="the batch of --shape")
    p.add_argument("--precision", default="bf16", choices=sorted(PRECISIONS), help="the precision of --shape")
    p.add_argument("--ms", type=positive, help="measured ms/epoch of the one --board or --shape")
    p.add_argument("--log", action="extend", nargs="+", default=[], help="app/mnist --log files (one or more)")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--gpus", type=int, default=2, help="GPUs of the data-parallel prediction (default 2)")
    p.add_argument("--reduce", default="bf16", choices=sorted(allreduce.REDUCE_BYTES),
                   help="the gradients' type as all-reduced (default bf16)")
    p.add_argument("--gpu", default="h100", choices=sorted(GPU_PEAKS), help="the GPU whose rates count (default h100)")
    p.add_argument("--peak-tflops", type=positive, help="dense BF16 (default: --gpu's)")
    p.add_argument("--hbm-tbps", type=positive, help="(default: --gpu's)")
    p.add_argument("--l2-tbps", type=positive, help="(default: --gpu's)")
    p.add_argument("--l2-mb", type=positive, help="(default: --gpu's)")
    p.add_argument("--phase-us", type=positive, help="one dependent phase of a step (default: --gpu's)")
    args = p.parse_args(argv)
    for key, value in GPU_PEAKS[args.gpu].items():  # what the options leave, the GPU's
        if getattr(args, key) is None:
            setattr(args, key, value)
    if (args.shape is None) != (args.batch is None):
        p.error("--shape and --batch go together")
    if args.gpus < 2:
        p.error(f"--gpus {args.gpus}: a data-parallel prediction needs at least 2")
    if args.batch is not None and args.batch < 1:
        p.error(f"--batch {args.batch} is not positive")
    if args.ms is not None and len(args.board) + (args.shape is not None) != 1:
        p.error("--ms needs exactly one --board or --shape")
    return args


def rows_for(args):
    peaks = {k: getattr(args, k) for k in ("peak_tflops", "hbm_tbps", "l2_tbps", "l2_mb", "phase_us")}
    asked = [(b, *board_config(b), args.ms) for b in args.board]
    if args.shape is not None:
        asked.append((None, parse_shape(args.shape), args.batch, args.precision, args.ms))
    for path in args.log:
        dims, batch, precision, ms = read_log(path)
        asked.append((path, dims, batch, precision, ms))
    if not asked:
        boards = dict.fromkeys(bench_boards.BENCHMARK + bench_boards.THROUGHPUT)  # in order, once each
        asked = [(b, *board_config(b), None) for b in boards]
    rows = []
    for name, dims, batch, precision, ms in asked:
        r = floor(dims, batch, precision, peaks)
        r["board"] = name
        if ms:
            r["measured_ms"] = ms
            r["fraction"] = r["floor_ms_epoch"] / ms
        step_us = (ms if ms else r["floor_ms_epoch"]) * 1e3 / r["steps"]
        r["grad_mb"] = param_count(dims) * allreduce.REDUCE_BYTES[args.reduce] / 1e6
        r["allreduce_us"] = allreduce.allreduce_us(r["grad_mb"] * 1e6, args.gpus)
        r["dp_speedup"] = allreduce.speedup(step_us, r["grad_mb"] * 1e6, args.gpus)
        update = allreduce.update_us(param_count(dims), args.reduce, 1, args.hbm_tbps)  # SGD with momentum
        r["dp_engine"] = allreduce.engine_speedup(step_us, r["grad_mb"] * 1e6, args.gpus, update)
        rows.append(r)
    return rows


def main(argv):
    try:
        args = parse_args(argv)
        rows = rows_for(args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
    except (Refusal, OSError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(render(rows, args.gpus))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
