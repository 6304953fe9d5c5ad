#!/usr/bin/env python3
"""PyTorch baseline timings for the MLP staticnn trains, to set its speed against.

    tools/torch_bench.py --dims 784,128,10 --batch 64 --lr 0.02 --momentum 0.9 --epochs 4
                         [--modes eager,compile,graph] [--json OUT] [--max-memory]
                         [--data DIR] [--mean 0.1307 --std 0.3081] [--seed 1] [--device cuda|cpu]
                         [--precision fp32|bf16|fp16] [--log FILE [--log-mode eager|compile|graph]]

Trains Linear/ReLU/.../Linear with mean cross-entropy and torch.optim.SGD
(momentum), float32 with TF32 off; or, with --precision bf16/fp16, the forward
and loss under torch.autocast to that type (FP32 master weights and update,
as staticnn's 16-bit modes; no loss scaling, as staticnn). As in staticnn, the training images stay on
the device as uint8; each step gathers its batch through the epoch's random
permutation and normalises it on the device, x = (imgs[idx].float()/255 -
mean)/std, inside the timed step; the permutation is drawn before the epoch's
timer starts, and the last partial batch is dropped. Modes:

  eager    the plain loop: zero_grad(set_to_none=True), forward, loss, backward, step
  compile  torch.compile(mode="max-autotune") of the whole train step (gather to
           optimizer step); if that fails, of the model only (the note says which)
  graph    the whole train step (gather, forward, loss, backward, SGD) captured in
           one torch.cuda.CUDAGraph after warm-up on a side stream; the step index
           lives on the device, so each step is one graph replay

Each step's loss stays on the device (no .item() inside an epoch). Timing: ms
per epoch (training only) from CUDA events around the epoch; the first epoch is
a warm-up and the result is the median of the rest. The final epoch's mean loss
is recorded: every mode must train. A mode that fails is reported in its note,
and the others still run. Exits 1 when a mode failed or did not train, or the
data is missing.

--log FILE writes one mode's run as `mnist --log` does (tools/lib/train_log.py),
so that tools/plot.py draws it beside staticnn's runs: a config event (target
pytorch-MODE), and per epoch the mean loss and accuracy over its steps, the
test set's (its 10000 images, evaluated under the same autocast after the
epoch's timer has stopped), the epoch's ms, train_s (the epochs' ms so far)
and wall_s (since the first epoch began: the permutations and evaluations
too, not the mode's compile or capture); an error event ends the log of a
mode that failed. The mode is --log-mode, else graph if it trained, else the
last of --modes that trained, else the last of --modes. With --log every step
also counts its right answers on the device (staticnn's step does too), so
its ms include that work; and the test set sits on the device, in
--max-memory's peak.

--device cpu (wall-clock timing; no graph mode) exists to check this script on
machines without a GPU.
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))  # the shared modules
import train_log  # noqa: E402
from digit_width import set_digit_width  # noqa: E402
from torch_parity import DataError, disable_tf32, load_test_set, load_train_set  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("torch_bench: error: PyTorch is not installed (import torch failed)")

PROG = "torch_bench"
MODES = ("eager", "compile", "graph")
TRAINED_LOSS = 1.0  # a final-epoch mean loss below this has learnt (chance is ln 10 = 2.30)
GRAPH_WARMUP_STEPS = 3  # eager steps on a side stream before capture, as PyTorch's recipe
COMPILE_PROBE_STEPS = 5  # compiled steps before timing: compile, record, replay
EVAL_BATCH = 1000  # test images per forward pass, as staticnn's CONFIG_EVAL_BATCH_SIZE


class Data:
    """The training set (and, with test, the test set) on the device: uint8 images (each digit scaled to
    digit_width as mnist --digit-width does; 0: as read), int64 labels, and the normalisation."""

    def __init__(self, directory, mean, std, device, test=False, digit_width=0):
        images, labels = load_train_set(directory)
        images = set_digit_width(images, digit_width)
        self.images = torch.from_numpy(images).to(device)
        self.labels = torch.from_numpy(labels.astype("int64")).to(device)
        self.count = len(labels)
        self.mean, self.std = mean, std
        if test:
            images, labels = load_test_set(directory)
            images = set_digit_width(images, digit_width)
            self.test_images = torch.from_numpy(images).to(device)
            self.test_labels = torch.from_numpy(labels.astype("int64")).to(device)

    def normalise(self, pixels):
        return (pixels.float() / 255 - self.mean) / self.std

    def batch(self, idx):
        return self.normalise(self.images.index_select(0, idx)), self.labels.index_select(0, idx)

    def test_batch(self, start, count):
        return self.normalise(self.test_images[start : start + count]), self.test_labels[start : start + count]


class EpochTimer:
    """Milliseconds a function takes: CUDA events on a GPU, the wall clock on the CPU."""

    def __init__(self, device):
        self.cuda = device.startswith("cuda")
        if self.cuda:
            self.start, self.stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def time(self, fn):
        if not self.cuda:
            t = time.perf_counter()
            fn()
            return (time.perf_counter() - t) * 1e3
        torch.cuda.synchronize()
        self.start.record()
        fn()
        self.stop.record()
        self.stop.synchronize()
        return self.start.elapsed_time(self.stop)


def build(args, device):
    """The model with PyTorch's default initialisation from --seed, and its optimizer."""
    torch.manual_seed(args.seed)
    layers = []
    for fan_in, fan_out in zip(args.dims[:-1], args.dims[1:]):
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1]).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)


AUTOCAST = None  # the 16-bit type of --precision, or None for FP32
COUNT_CORRECT = False  # --log: each step also counts its right answers


def autocast():
    # no cast cache: a cached cast of the weights would outlive a graph replay's update
    return torch.autocast("cuda", dtype=AUTOCAST or torch.float32, enabled=AUTOCAST is not None, cache_enabled=False)


def train_step(model, opt, data, idx):
    """Gather, forward, loss, backward, SGD step; the gradients must be None on entry. Returns the loss and
    the number of right answers (None unless COUNT_CORRECT)."""
    x, y = data.batch(idx)
    with autocast():
        logits = model(x)
        loss = F.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    return loss.detach(), (logits.argmax(1) == y).sum() if COUNT_CORRECT else None


class StepStats:
    """Each step's loss, and under COUNT_CORRECT its right answers, kept on the device through the epoch."""

    def __init__(self, steps, device):
        self.losses = torch.zeros(steps, device=device)
        self.correct = torch.zeros(steps, dtype=torch.long, device=device) if COUNT_CORRECT else None

    def store(self, s, result):
        """train_step's result for step s, a Python int."""
        loss, correct = result
        self.losses[s] = loss
        if correct is not None:
            self.correct[s] = correct

    def store_at(self, step, result):
        """train_step's result for the step whose index is in the device tensor step."""
        loss, correct = result
        self.losses.index_copy_(0, step, loss.view(1))
        if correct is not None:
            self.correct.index_copy_(0, step, correct.view(1))


# ---- modes: each setup returns (prepare(perm), run(perm), note); perm is [steps][batch] ----


def no_prepare(perm):
    """Eager and compiled steps slice the permutation directly."""


def python_loop(step, opt, stats, before_step=None):
    def run(perm):
        for s in range(perm.shape[0]):
            if before_step:
                before_step()
            opt.zero_grad(set_to_none=True)
            stats.store(s, step(perm[s]))

    return run


def setup_eager(model, opt, data, stats, batch, device):
    return no_prepare, python_loop(lambda idx: train_step(model, opt, data, idx), opt, stats), "plain loop"


def compiled_loop(step, opt, stats, batch, device):
    """The loop over a compiled step, run a few times before timing, so that
    compiling and CUDA-graph recording happen outside the epochs."""
    mark = torch.compiler.cudagraph_mark_step_begin if device.startswith("cuda") else None
    run = python_loop(step, opt, stats, mark)
    run(torch.arange(COMPILE_PROBE_STEPS * batch, device=device).view(COMPILE_PROBE_STEPS, batch))
    return run


def zero_momentum(opt):
    """SGD's momentum buffers, made before the first step as zeros: the same numbers as SGD's own first step
    (which sets the buffer to the gradient: momentum x 0 + g, dampening 0), but allocated outside the compiled
    step. Made by its first run, inside CUDA graphs, they would be graph outputs that the next replay
    overwrites while the optimizer still holds them; with fixed addresses, the graphs need not copy them
    either."""
    for group in opt.param_groups:
        for p in group["params"]:
            buf = opt.state[p]["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            torch._dynamo.mark_static_address(buf)


def setup_compile_step(model, opt, data, stats, batch, device):
    torch._dynamo.reset()
    for t in (data.images, data.labels):  # fixed addresses: CUDA graphs need not copy the dataset each step
        torch._dynamo.mark_static_address(t)
    zero_momentum(opt)
    compiled = torch.compile(lambda idx: train_step(model, opt, data, idx), mode="max-autotune")
    start = time.perf_counter()
    run = compiled_loop(compiled, opt, stats, batch, device)
    seconds = time.perf_counter() - start
    return no_prepare, run, f"compiled the whole train step, max-autotune ({seconds:.0f} s to compile)"


def setup_compile_model(model, opt, data, stats, batch, device):
    torch._dynamo.reset()
    compiled = torch.compile(model, mode="max-autotune")
    start = time.perf_counter()
    run = compiled_loop(lambda idx: train_step(compiled, opt, data, idx), opt, stats, batch, device)
    seconds = time.perf_counter() - start
    return no_prepare, run, f"compiled the model only, max-autotune ({seconds:.0f} s to compile)"


def device_indexed_step(model, opt, data, stats, perm, step):
    """The train step of batch perm[step], its figures to stats at step, then step += 1:
    every index on the device, so that one captured graph serves every step."""

    def body():
        idx = perm.index_select(0, step).view(-1)
        stats.store_at(step, train_step(model, opt, data, idx))
        step.add_(1)

    return body


def setup_graph(model, opt, data, stats, batch, device):
    if not device.startswith("cuda"):
        raise RuntimeError("graph mode needs CUDA")
    perm = torch.arange(stats.losses.numel() * batch, device=device).view(-1, batch)
    step = torch.zeros(1, dtype=torch.long, device=device)
    body = device_indexed_step(model, opt, data, stats, perm, step)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(GRAPH_WARMUP_STEPS):
            opt.zero_grad(set_to_none=True)
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)  # backward in the capture allocates the gradients from the graph's pool
    with torch.cuda.graph(graph):
        body()

    def prepare(epoch_perm):
        perm.copy_(epoch_perm)
        step.zero_()

    def run(epoch_perm):
        for _ in range(epoch_perm.shape[0]):
            graph.replay()

    return prepare, run, "one CUDA graph replay per step (gather, forward, loss, backward, SGD)"


SETUPS = {
    "eager": [setup_eager],
    "compile": [setup_compile_step, setup_compile_model],
    "graph": [setup_graph],
}


# ---- the log (--log) -----------------------------------------------------------


def evaluate(model, data):
    """The test set's mean loss and accuracy, under the training's autocast."""
    loss = torch.zeros((), device=data.test_labels.device)
    correct = torch.zeros((), dtype=torch.long, device=data.test_labels.device)
    count = len(data.test_labels)
    with torch.no_grad(), autocast():
        for start in range(0, count, EVAL_BATCH):
            x, y = data.test_batch(start, EVAL_BATCH)
            logits = model(x)
            loss += F.cross_entropy(logits, y, reduction="sum").float()
            correct += (logits.argmax(1) == y).sum()
    return loss.item() / count, correct.item() / count


def logged_epoch(epoch, model, data, stats, batch, ms, started):
    """The epoch's log event: its steps' figures, then the test set's; started: perf_counter() at the
    first epoch's start."""
    samples = stats.losses.numel() * batch
    train_loss, train_acc = stats.losses.mean().item(), stats.correct.sum().item() / samples
    test_loss, test_acc = evaluate(model, data)
    return train_log.epoch_event(epoch, train_loss, train_acc, test_loss, test_acc, ms[-1], sum(ms) / 1e3,
                                 time.perf_counter() - started, samples)


def logged_mode(requested, results):
    """--log-mode, else graph if it trained, else the last mode that trained, else the last mode."""
    if requested:
        return requested
    trained = [mode for mode, r in results.items() if r["ok"]]
    if "graph" in trained:
        return "graph"
    return trained[-1] if trained else list(results)[-1]


def log_events(mode, result, history, args, device_name):
    """The mode's run as mnist --log writes it: the config, its epochs, and an error if the mode failed."""
    config = train_log.event("config", target=f"pytorch-{mode}", shape="-".join(map(str, args.dims)),
                             batch=args.batch, epochs=args.epochs, lr=args.lr, momentum=args.momentum,
                             seed=args.seed, precision=args.precision, pixel_mean=args.mean, pixel_std=args.std,
                             data_dir=args.data, device=device_name, torch=torch.__version__, note=result["note"])
    failed = [train_log.event("error", message=result["note"])] if result["ms_median"] is None else []
    return [config] + history + failed


# ---- timing ------------------------------------------------------------------


def time_setup(setup, args, data, device, history):
    """Builds a fresh model, sets the mode up and times its epochs; with --log, history (cleared first)
    gets each epoch's log event."""
    if history is not None:
        history.clear()
    model, opt = build(args, device)
    steps = data.count // args.batch
    stats = StepStats(steps, device)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    prepare, run, note = setup(model, opt, data, stats, args.batch, device)
    generator = torch.Generator(device=device)
    generator.manual_seed(args.seed)
    timer, ms = EpochTimer(device), []
    started = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(data.count, generator=generator, device=device)[: steps * args.batch]
        perm = perm.view(steps, args.batch)
        prepare(perm)
        ms.append(timer.time(lambda: run(perm)))
        if history is not None:
            history.append(logged_epoch(epoch, model, data, stats, args.batch, ms, started))
    loss = stats.losses.mean().item()
    timed = ms[1:] if len(ms) > 1 else ms
    result = {"ms_median": statistics.median(timed), "ms_all": ms, "loss": loss,
              "ok": loss < TRAINED_LOSS, "note": note if loss < TRAINED_LOSS else f"{note}; DID NOT TRAIN"}
    if args.max_memory and cuda:
        result["max_memory_bytes"] = torch.cuda.max_memory_allocated()
    return result


def error_text(e):
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]


def run_mode(mode, args, data, device, history):
    """The first setup of the mode that works; the failures of those before it go in the note. history:
    as time_setup's, of the setup that worked or else the last one tried."""
    print(f"{PROG}: {mode} ...", flush=True)
    failures = []
    for setup in SETUPS[mode]:
        try:
            result = time_setup(setup, args, data, device, history)
            if failures:
                result["note"] += " (after: " + "; ".join(failures) + ")"
            return result
        except Exception as e:  # a failed mode is reported, and the others still run
            failures.append(f"{setup.__name__.removeprefix('setup_')} failed: {error_text(e)}")
            print(f"{PROG}: {mode}: {failures[-1]}", file=sys.stderr)
        finally:
            if mode == "compile" and hasattr(torch, "compiler"):  # PyTorch 1.x has no torch.compiler
                torch.compiler.reset()
            gc.collect()
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
    return {"ms_median": None, "ms_all": [], "loss": None, "ok": False, "note": "; ".join(failures)}


# ---- program -----------------------------------------------------------------


def parse_args():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--dims", default="784,128,10", help="layer widths, input to classes (default 784,128,10)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--epochs", type=int, default=4, help="epochs per mode; the first is a warm-up (default 4)")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated, of: " + ", ".join(MODES))
    p.add_argument("--json", help="write the results here")
    p.add_argument("--max-memory", action="store_true", help="record torch.cuda.max_memory_allocated() per mode")
    p.add_argument("--data", default="data/mnist", help="directory of the IDX files (default data/mnist)")
    p.add_argument("--mean", type=float, default=0.1307, help="pixel mean for normalisation (MNIST's)")
    p.add_argument("--std", type=float, default=0.3081, help="pixel std for normalisation (MNIST's)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="fp32 (TF32 off), or autocast of the forward and loss to bf16 or fp16")
    p.add_argument("--log", metavar="FILE", help="write one mode's run as mnist --log does, for tools/plot.py")
    p.add_argument("--log-mode", choices=MODES,
                   help="the mode --log records (default: graph if it trained, else the last of --modes that "
                        "trained, else the last of --modes)")
    args = p.parse_args()
    try:
        args.dims = [int(d) for d in args.dims.split(",")]
    except ValueError:
        p.error(f"--dims wants comma-separated widths, not '{args.dims}'")
    args.modes = [m for m in args.modes.split(",") if m]
    unknown = [m for m in args.modes if m not in MODES]
    if unknown:
        p.error(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    if args.log_mode and args.log_mode not in args.modes:
        p.error(f"--log-mode {args.log_mode} is not among --modes {','.join(args.modes)}")
    if args.log_mode and not args.log:
        p.error("--log-mode names the mode --log records: give --log FILE too")
    if len(args.dims) < 2 or min(args.dims) < 1 or args.batch < 1 or args.epochs < 1:
        p.error("--dims needs two or more positive widths; --batch and --epochs must be positive")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("no CUDA device visible to PyTorch (--device cpu runs on the CPU)")
    return args


def print_table(results, device_name, args):
    shape = "-".join(str(d) for d in args.dims)
    timed = f"median of epochs 2..{args.epochs}" if args.epochs > 1 else "the one epoch, no warm-up"
    print(f"PyTorch {torch.__version__} on {device_name}: MLP {shape}, {args.precision}, batch {args.batch}, "
          f"{args.epochs} epochs (ms/epoch: {timed})")
    print(f"{'mode':8} {'ms/epoch':>10} {'final loss':>10} {'peak MiB':>9}  note")
    for mode, r in results.items():
        ms = f"{r['ms_median']:.2f}" if r["ms_median"] is not None else "failed"
        loss = f"{r['loss']:.4f}" if r["loss"] is not None else "-"
        mem = f"{r['max_memory_bytes'] / 2**20:.1f}" if "max_memory_bytes" in r else "-"
        print(f"{mode:8} {ms:>10} {loss:>10} {mem:>9}  {r['note']}")


def main():
    global AUTOCAST, COUNT_CORRECT
    args = parse_args()
    device = args.device
    if device == "cuda":
        disable_tf32(torch)
    AUTOCAST = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[args.precision]
    COUNT_CORRECT = bool(args.log)
    try:
        log = open(args.log, "w") if args.log else None  # refused now rather than after the runs
    except OSError as e:
        sys.exit(f"{PROG}: error: cannot write {args.log}: {e.strerror}")
    try:
        data = Data(args.data, args.mean, args.std, device, test=bool(args.log))
    except DataError as e:
        sys.exit(f"{PROG}: error: {e}")
    if data.count < args.batch:
        sys.exit(f"{PROG}: error: batch {args.batch} exceeds the {data.count} training images")
    device_name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    histories = {mode: [] if log else None for mode in args.modes}
    results = {mode: run_mode(mode, args, data, device, histories[mode]) for mode in args.modes}
    print_table(results, device_name, args)
    if log:
        mode = logged_mode(args.log_mode, results)
        with log:
            train_log.write(log, log_events(mode, results[mode], histories[mode], args, device_name))
        print(f"{PROG}: the log of {mode}: {args.log}")
    if args.json:
        settings = {k: getattr(args, k) for k in ("dims", "batch", "lr", "momentum", "epochs", "seed", "mean", "std",
                                                  "precision")}
        with open(args.json, "w") as f:
            json.dump({"device": device_name, "torch": torch.__version__, "settings": settings, **results}, f,
                      indent=1)
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
