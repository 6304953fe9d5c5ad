#!/usr/bin/env python3
"""The hardware floor of a training step and epoch, and a measured epoch as a fraction of it.

    tools/roofline.py [--board NAME ...] [--shape 784-128x3-10 --batch 32 [--precision bf16]]
                      [--ms MEASURED] [--log mnist-log.jsonl ...] [--json OUT]
                      [--peak-tflops 790] [--hbm-tbps 3.0] [--l2-tbps 6.0] [--l2-mb 50] [--phase-us 0.5]

A row per --board (configs/NAME_defconfig with the Kconfig defaults), --shape
or --log (an app/mnist --log file: the shape and batch of its config event,
the median ms of its epochs after the first); no row asked for: the five
benchmark boards and the throughput boards (tools/bench.py's sets). --ms is
the measured ms/epoch of the one --board or --shape.
Prints a markdown table; --json writes the rows.

The floor of a step (issue 20) is the largest of
  compute: the step's FLOPs at the peak. Per Linear layer (B rows, in x out):
    forward 2*B*in*out, weight gradient 2*B*in*out, input gradient 2*B*in*out
    for every layer but the first.
  memory: the step's parameter bytes at the HBM rate, or at the L2 rate where
    the state (FP32 weights and momentum, 16-bit twins) fits in the L2. Per
    weight, with 16-bit operands: forward reads the twin (2 B), the input
    gradient reads it again (2 B; not for the first layer), the weight gradient
    and update read the FP32 weight and momentum and write both and the twin
    (18 B): 22 B, 20 for the first layer. FP32 and TF32 have no twin: the GEMMs
    read the FP32 weight (4 B each) and the update moves 16 B. A bias moves 16 B.
    Activations and their gradients (a few B*width rows) are not counted: a
    fused step keeps them on chip, so only the parameters must make the trip.
  latency: 2H+4 dependent phases (H hidden layers: the forward, the loss, the
    backward's chain, the update) at --phase-us each.
Steps per epoch: floor(60000 / B), the last partial batch dropped.
"""
import argparse
import json
import os
import sys

PROG = "roofline"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools", "make"))  # kconfig.py
from bench import CONFIG_SETS, median_after_first  # noqa: E402

TRAIN_SAMPLES = 60000
PRECISIONS = {"bf16": 2, "fp16": 2, "fp16_acc16": 2, "tf32": 4, "fp32": 4}  # bytes of a GEMM operand
# H100's L2 is two partitions, and weights that every SM reads are kept in
# both, so half of it holds the state (the 784x4 fits, 1024x3 not).
L2_USABLE = 0.5


# The H100's figures (the defaults of the options below).
DEFAULT_PEAKS = {"peak_tflops": 790.0, "hbm_tbps": 3.0, "l2_tbps": 6.0, "l2_mb": 50.0, "phase_us": 0.5}


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


def shape_label(dims):
    """[784, 128, 128, 128, 10] -> '784-128x3-10' (the hidden widths run-length coded)."""
    runs = []
    for d in dims[1:-1]:
        if runs and runs[-1][0] == d:
            runs[-1][1] += 1
        else:
            runs.append([d, 1])
    return "-".join([str(dims[0])] + [f"{d}x{n}" if n > 1 else str(d) for d, n in runs] + [str(dims[-1])])


def board_dims(sym):
    """A board's layer widths, [784, hidden..., 10], from its Kconfig values (sym: a symbol's name -> str)."""
    return [784] + [int(sym("NN_HIDDEN_WIDTH"))] * int(sym("NN_HIDDEN_LAYERS")) + [10]


def param_count(dims):
    """Weights and biases of the Linear layers between dims."""
    return sum(i * o + o for i, o in zip(dims[:-1], dims[1:]))


def floor(dims, batch, precision, peaks):
    layers = list(zip(dims[:-1], dims[1:]))
    flops = sum(2 * batch * i * o * (3 if n else 2) for n, (i, o) in enumerate(layers))
    operand = PRECISIONS[precision]
    twin = 2 if operand == 2 else 0
    param_bytes = sum(i * o * ((2 if n else 1) * operand + 16 + twin) + 16 * o for n, (i, o) in enumerate(layers))
    state_bytes = param_count(dims) * (8 + twin)
    fits = state_bytes <= L2_USABLE * peaks["l2_mb"] * 1e6
    us = {"compute": flops / (peaks["peak_tflops"] * 1e6),
          "memory": param_bytes / ((peaks["l2_tbps"] if fits else peaks["hbm_tbps"]) * 1e6),
          "latency": (2 * (len(layers) - 1) + 4) * peaks["phase_us"]}
    binding = max(us, key=us.get)
    steps = TRAIN_SAMPLES // batch
    return {"shape": shape_label(dims), "dims": dims, "batch": batch, "precision": precision, "steps": steps,
            "gflop_step": flops / 1e9, "mb_step": param_bytes / 1e6, "state_mb": state_bytes / 1e6,
            "fits_l2": fits, "floor_us": us, "binding": binding, "floor_ms_epoch": us[binding] * steps / 1e3}


def board_config(name):
    """(dims, batch, precision) of configs/NAME_defconfig with the Kconfig defaults."""
    path = os.path.join(REPO, "configs", f"{name}_defconfig")
    if not os.path.exists(path):
        raise Refusal(f"unknown board {name!r}: no configs/{name}_defconfig")
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
        raise Refusal(f"configs/{name}_defconfig: " + "; ".join(problems))
    sym = lambda s: kconf.syms[s].str_value  # noqa: E731
    dims = board_dims(sym)
    precision = next((p for p in PRECISIONS if kconf.syms.get("PRECISION_" + p.upper()) is not None
                      and sym("PRECISION_" + p.upper()) == "y"), "fp32")
    return dims, int(sym("TRAIN_BATCH_SIZE")), precision


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


def render(rows):
    head = ["board / shape", "batch", "GFLOP/step", "MB/step", "fits in L2", "compute us", "memory us",
            "latency us", "binds", "floor ms/epoch", "measured ms/epoch", "floor / measured"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        label = f"{r['board']} ({r['shape']})" if r.get("board") else r["shape"]
        us = r["floor_us"]
        measured = r.get("measured_ms")
        cells = [label, str(r["batch"]), fmt(r["gflop_step"]), fmt(r["mb_step"]), "yes" if r["fits_l2"] else "no",
                 fmt(us["compute"]), fmt(us["memory"]), fmt(us["latency"]), r["binding"], fmt(r["floor_ms_epoch"]),
                 fmt(measured) if measured else "-", f"{r['fraction']:.3f}" if measured else "-"]
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
    p.add_argument("--board", action="extend", nargs="+", default=[], help="configs/NAME_defconfig (one or more)")
    p.add_argument("--shape", help="a model shape, like 784-128x3-10")
    p.add_argument("--batch", type=int, help="the batch of --shape")
    p.add_argument("--precision", default="bf16", choices=sorted(PRECISIONS), help="the precision of --shape")
    p.add_argument("--ms", type=positive, help="measured ms/epoch of the one --board or --shape")
    p.add_argument("--log", action="extend", nargs="+", default=[], help="app/mnist --log files (one or more)")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--peak-tflops", type=positive, default=DEFAULT_PEAKS["peak_tflops"], help="H100 dense BF16")
    p.add_argument("--hbm-tbps", type=positive, default=DEFAULT_PEAKS["hbm_tbps"])
    p.add_argument("--l2-tbps", type=positive, default=DEFAULT_PEAKS["l2_tbps"])
    p.add_argument("--l2-mb", type=positive, default=DEFAULT_PEAKS["l2_mb"])
    p.add_argument("--phase-us", type=positive, default=DEFAULT_PEAKS["phase_us"], help="one dependent phase of a step")
    args = p.parse_args(argv)
    if (args.shape is None) != (args.batch is None):
        p.error("--shape and --batch go together")
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
        boards = dict.fromkeys(CONFIG_SETS["benchmark"] + CONFIG_SETS["throughput"])  # in order, once each
        asked = [(b, *board_config(b), None) for b in boards]
    rows = []
    for name, dims, batch, precision, ms in asked:
        r = floor(dims, batch, precision, peaks)
        r["board"] = name
        if ms:
            r["measured_ms"] = ms
            r["fraction"] = r["floor_ms_epoch"] / ms
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
    sys.stdout.write(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
