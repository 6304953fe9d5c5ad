#!/usr/bin/env python3
"""PyTorch's time to accuracy on the recipe of a staticnn run, to set a speedrun board against.

    tools/torch_time_to_acc.py LOG.jsonl [--seeds 5] [--data DIR] [--json OUT] [--mode graph|eager]
                               [--device cuda|cpu] [--stop-at-target]

LOG is the --log of a staticnn run with --target-acc (tools/time_to_acc.py
keeps them with --logs): its config event gives the shape, batch, epochs,
steps per epoch, the recipe (optimizer, schedule, weight decay, label
smoothing, augmentation, dropout, the digits' width), the precision, the target, the set it watches and how often it is
scored. This script trains the same MLP the way a PyTorch user would, from
PyTorch's default initialisation of each seed 1..N: nn.Linear/ReLU,
F.cross_entropy(label_smoothing), torch.optim.AdamW or SGD (SGD's weight decay
decoupled by hand, as staticnn's), nn.Dropout after each hidden ReLU, each
image translated on the device by offsets from torch.randint and, where the
recipe distorts, resampled by one F.grid_sample through an elastic field
(torch.rand, smoothed by the Gaussian as a separable conv2d) and an affine map
(PyTorch's own generator: the same recipe, not the same draws), the forward under torch.autocast for a
16-bit precision, TF32 off for FP32. As in staticnn and tools/torch_bench.py
the images stay on the device as uint8 and each step gathers its batch through
the epoch's permutation.

Mode graph (the default, PyTorch's strongest for this size): the whole step
(gather, forward, loss, backward, the schedule's learning rate computed on the
device from a step counter, the optimizer's capturable step) is one CUDA graph
replay; warm-up and capture run first, then the model, the optimizer's state
and the counter are put back to their start, so the timed run trains from the
seed's initial weights. Mode eager: the plain loop, the learning rate set the
same way. Every CONFIG_TRAIN_EVAL_EVERY steps and at each epoch's end the
watched set is scored (outside the timed stretches, as staticnn does); the
first score at or above the target is recorded and the run trains on to its
fixed length, whose test accuracy is its result (--stop-at-target: the run
ends at the mark). Training time is CUDA events around the stretches of steps
up to the mark; wall time runs from the first step, evaluations included.
Prints a row per seed and the summary of tools/time_to_acc.py.
"""
import argparse
import math
import sys
import time

import time_to_acc
import torch_bench
from torch_parity import DataError, Recipe, disable_tf32

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("torch_time_to_acc: error: PyTorch is not installed (import torch failed)")

PROG = "torch_time_to_acc"
TRAIN_COUNT = 60000
SIDE = 28
AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp16_acc16": torch.float16}


def fail(msg):
    sys.exit(f"{PROG}: error: {msg}")


def read_config(path):
    try:
        config, _, _ = time_to_acc.run_events(path)
    except (OSError, ValueError, KeyError) as err:
        fail(f"{path}: not a staticnn log: {err}")
    if not config:
        fail(f"{path}: no config event")
    for key in ("shape", "batch", "epochs", "steps_per_epoch", "target_acc", "eval_every", "lr"):
        if key not in config:
            fail(f"{path}: the config event has no '{key}': not the log of a --target-acc run")
    return config


def translate(images, shift):
    """uint8 images [rows][784], each moved by offsets drawn uniformly from [-shift, shift] on the device,
    0 (the background) moving in: a crop of the images padded by shift."""
    rows = images.shape[0]
    padded = F.pad(images.view(rows, SIDE, SIDE), (shift, shift, shift, shift))
    dx, dy = (torch.randint(-shift, shift + 1, (rows, 1), device=images.device) for _ in range(2))
    side = torch.arange(SIDE, device=images.device)
    ys, xs = side + shift - dy, side + shift - dx  # [rows][28]: the padded pixel each one reads
    r = torch.arange(rows, device=images.device)[:, None, None]
    return padded[r, ys[:, :, None], xs[:, None, :]].reshape(rows, SIDE * SIDE)


def gaussian(d, device):
    """The elastic field's smoothing, the Gaussian of width sigma to 4 sigma, normalised (kernels/distort.h)."""
    radius = int(4.0 * d.elastic["sigma"] + 0.5)
    k = torch.arange(-radius, radius + 1, dtype=torch.float32, device=device)
    w = torch.exp(-0.5 * (k / d.elastic["sigma"]) ** 2)
    return w / w.sum()


def distort(images, d, gauss):
    """uint8 images [rows][784] through the recipe's distortions d (tools/lib/noise.py's Distortion: its
    ranges) as one would write them in PyTorch: each output pixel reads the image at c + M (q - c) + t, q the
    pixel moved by alpha times a uniform field smoothed by gauss, bilinear, 0 beyond the edge. Floats in [0,
    255]."""
    rows, dev, c = images.shape[0], images.device, (SIDE - 1) / 2
    side = (torch.arange(SIDE, dtype=torch.float32, device=dev) - c) / c  # align_corners: pixel centres at +-1
    gy, gx = torch.meshgrid(side, side, indexing="ij")
    qx, qy = gx.expand(rows, SIDE, SIDE), gy.expand(rows, SIDE, SIDE)
    if d.elastic:
        k = gauss.numel()
        u = (torch.rand(rows * 2, 1, SIDE, SIDE, device=dev) * 2 - 1)
        u = F.conv2d(F.conv2d(u, gauss.view(1, 1, 1, k), padding=(0, k // 2)), gauss.view(1, 1, k, 1),
                     padding=(k // 2, 0)).view(rows, 2, SIDE, SIDE)
        qx, qy = qx + d.alpha * u[:, 0] / c, qy + d.alpha * u[:, 1] / c
    if d.affine:
        a, r = d.affine, torch.rand(rows, 5, 1, 1, device=dev) * 2 - 1
        theta, s, h = r[:, 0] * math.radians(a["rotate"]), 1 + a["scale"] * r[:, 1], a["shear"] * r[:, 2]
        cs, sn = torch.cos(theta), torch.sin(theta)
        tx, ty = a["translate"] * r[:, 3] / c, a["translate"] * r[:, 4] / c
        qx, qy = s * cs * qx + s * (h * cs - sn) * qy + tx, s * sn * qx + s * (h * sn + cs) * qy + ty
    grid = torch.stack((qx, qy), dim=-1)
    return F.grid_sample(images.view(rows, 1, SIDE, SIDE).float(), grid, mode="bilinear", padding_mode="zeros",
                         align_corners=True).view(rows, SIDE * SIDE)


def factor_on_device(recipe, t):
    """Recipe.factor (kernels/optim.h) of the update counter t (a float64 tensor), in device ops."""
    if recipe.schedule == "step":
        return recipe.gamma ** torch.floor(t / (recipe.epoch_steps * recipe.step_epochs))
    if recipe.schedule in ("cosine", "linear"):
        p = ((t - recipe.warmup) / max(recipe.total - recipe.warmup, 1)).clamp(min=0)
        fall = 1 - p if recipe.schedule == "linear" else (1 + torch.cos(math.pi * p)) / 2
        after = recipe.final + (1 - recipe.final) * fall
        if recipe.warmup:
            return torch.where(t < recipe.warmup, (t + 1) / recipe.warmup, after)
        return after
    return torch.ones_like(t)


class Run:
    """One seed's model, optimizer and step, graph-captured or eager."""

    def __init__(self, cfg, recipe, data, seed, mode, device):
        torch.manual_seed(seed)
        dims = [int(d) for d in cfg["shape"].split("-")]
        layers = []
        for fan_in, fan_out in zip(dims[:-1], dims[1:]):
            layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.ReLU()]
            if recipe.noise.dropout:
                layers.append(torch.nn.Dropout(recipe.noise.dropout))
        self.model = torch.nn.Sequential(*layers[: -2 if recipe.noise.dropout else -1]).to(device)
        self.params = list(self.model.parameters())
        self.recipe, self.data, self.batch = recipe, data, cfg["batch"]
        self.gauss = gaussian(recipe.distortion, device) if recipe.distortion and recipe.distortion.elastic else None
        self.steps = cfg["steps_per_epoch"]
        self.lr = torch.tensor(recipe.lr, dtype=torch.float32, device=device)
        if recipe.optimizer == "adamw":
            # a tensor lr: capturable in a graph; eager, the single-tensor update reads it as it is
            self.opt = torch.optim.AdamW(self.params, lr=self.lr, betas=recipe.betas, eps=recipe.eps,
                                         weight_decay=recipe.weight_decay, capturable=mode == "graph",
                                         foreach=mode == "graph")
        else:
            self.opt = torch.optim.SGD(self.params, lr=self.lr, momentum=recipe.momentum, nesterov=recipe.nesterov)
        self.t = torch.zeros((), dtype=torch.float64, device=device)  # updates so far: the schedule's time
        self.perm = torch.zeros(self.steps, self.batch, dtype=torch.long, device=device)
        self.step = torch.zeros(1, dtype=torch.long, device=device)
        self.graph = self.capture() if mode == "graph" else None

    def body(self):
        """One training step, every index on the device."""
        idx = self.perm.index_select(0, self.step).view(-1)
        images, y = self.data.images.index_select(0, idx), self.data.labels.index_select(0, idx)
        if self.recipe.noise.shift:
            images = translate(images, self.recipe.noise.shift)
        if self.recipe.distortion:
            images = distort(images, self.recipe.distortion, self.gauss)
        x = self.data.normalise(images)
        with torch_bench.autocast():
            loss = F.cross_entropy(self.model(x), y, label_smoothing=self.recipe.smoothing)
        loss.backward()
        with torch.no_grad():
            self.lr.copy_(self.recipe.lr * factor_on_device(self.recipe, self.t))
            if self.recipe.optimizer == "sgd" and self.recipe.weight_decay:
                torch._foreach_mul_(self.params, 1 - self.lr * self.recipe.weight_decay)
        self.opt.step()
        self.t.add_(1)
        self.step.add_(1)

    def capture(self):
        start = [p.detach().clone() for p in self.params]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(torch_bench.GRAPH_WARMUP_STEPS):
                self.opt.zero_grad(set_to_none=True)
                self.body()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            self.body()
        with torch.no_grad():  # back to the seed's start: the weights, the optimizer's state, the clock
            for p, p0 in zip(self.params, start):
                p.copy_(p0)
            for state in self.opt.state.values():
                for v in state.values():
                    if torch.is_tensor(v):
                        v.zero_()
        self.t.zero_()
        return graph

    def begin_epoch(self, perm):
        self.perm.copy_(perm[: self.steps * self.batch].view(self.steps, self.batch))
        self.step.zero_()

    def train(self, n):
        for _ in range(n):
            if self.graph:
                self.graph.replay()
            else:
                self.opt.zero_grad(set_to_none=True)
                self.body()

    def score(self, images, labels):
        """Accuracy of the watched set under the training's autocast (a synchronisation)."""
        correct = torch.zeros((), dtype=torch.long, device=labels.device)
        self.model.eval()  # every unit
        with torch.no_grad(), torch_bench.autocast():
            for start in range(0, len(labels), torch_bench.EVAL_BATCH):
                x = self.data.normalise(images[start : start + torch_bench.EVAL_BATCH])
                correct += (self.model(x).argmax(1) == labels[start : start + torch_bench.EVAL_BATCH]).sum()
        self.model.train()
        return correct.item() / len(labels)


def run_seed(cfg, recipe, data, watched, seed, mode, device, stop):
    """The seed's first score of the watched set at or above the target (or its best), and its test accuracy at
    the end of the fixed-length run (None with stop: the run ends at the mark)."""
    run = Run(cfg, recipe, data, seed, mode, device)
    timer = torch_bench.EpochTimer(device)
    every, goal = cfg["eval_every"], cfg["target_acc"]
    fit = TRAIN_COUNT - cfg.get("validation_size", 0)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    train_s, best, first = 0.0, None, None
    started = time.perf_counter()
    for epoch in range(1, cfg["epochs"] + 1):
        run.begin_epoch(torch.randperm(fit, generator=gen).to(device))
        done = 0
        while done < run.steps:
            last = min((done // every + 1) * every, run.steps)
            train_s += timer.time(lambda: run.train(last - done)) / 1e3
            done = last
            acc = run.score(*watched)
            row = {"seed": seed, "gpu": None, "reached": acc >= goal, "set": cfg.get("target_set", "test"),
                   "epoch": epoch,
                   "step": done, "steps": (epoch - 1) * run.steps + done, "acc": acc, "train_s": train_s,
                   "wall_s": time.perf_counter() - started}
            if row["reached"] and first is None:
                first = row
                if stop:
                    return dict(first, end_epoch=None, end_test_acc=None, end_train_s=None, end_valid_acc=None)
            if best is None or acc > best["acc"]:
                best = row
    end = run.score(data.test_images, data.test_labels)
    return dict(first or best, end_epoch=cfg["epochs"], end_test_acc=end, end_train_s=train_s, end_valid_acc=None)


def main():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("log", help="the --log of a staticnn --target-acc run: the recipe to train")
    p.add_argument("--seeds", type=int, default=5, help="seeds 1..N (default 5)")
    p.add_argument("--data", default="data/mnist", help="directory of the IDX files (default data/mnist)")
    p.add_argument("--json", help="write the rows and the summary here")
    p.add_argument("--mode", choices=("graph", "eager"), default="graph")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--stop-at-target", action="store_true", help="end each run at the mark (no fixed-length result)")
    args = p.parse_args()
    cfg = read_config(args.log)
    if args.seeds < 1:
        fail(f"--seeds wants at least 1, not {args.seeds}")
    if args.device == "cpu" and args.mode == "graph":
        fail("graph mode needs CUDA: give --mode eager with --device cpu")
    if args.device == "cuda" and not torch.cuda.is_available():
        fail("no CUDA device (give --device cpu --mode eager to check this script)")
    recipe = Recipe(cfg)
    torch_bench.AUTOCAST = AUTOCAST.get(cfg.get("precision")) if args.device == "cuda" else None
    disable_tf32(torch)
    if cfg.get("precision", "").startswith("tf32"):
        torch.backends.cuda.matmul.allow_tf32 = True
    try:
        data = torch_bench.Data(args.data, cfg["pixel_mean"], cfg["pixel_std"], args.device, test=True,
                                digit_width=cfg.get("digit_width", 0))
    except DataError as e:
        fail(str(e))
    held = cfg.get("validation_size", 0)
    watched = ((data.images[TRAIN_COUNT - held:], data.labels[TRAIN_COUNT - held:]) if held
               else (data.test_images, data.test_labels))
    rows = [run_seed(cfg, recipe, data, watched, seed, args.mode, args.device, args.stop_at_target)
            for seed in range(1, args.seeds + 1)]
    device = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    shown = dict(cfg, device=device, target=f"pytorch {torch.__version__}", step=args.mode)
    s = time_to_acc.summary(rows, cfg["target_acc"])
    time_to_acc.print_table(shown, 100 * cfg["target_acc"], rows, s)
    if args.json:
        time_to_acc.write_json(args.json, shown, 100 * cfg["target_acc"], rows, s)


if __name__ == "__main__":
    main()
