#!/usr/bin/env python3
"""Step-by-step loss parity of a staticnn run against an independent trainer.

    ./app/mnist --dump DUMP_DIR
    tools/torch_parity.py DUMP_DIR [--epochs N] [--png FILE] [--tol 1e-3] [--judge-steps 50]
                          [--backend torch|numpy] [--device cuda|cpu] [--data DIR]

Rebuilds the run from the dump (meta.json: shape and schedule; init.bin: the
initial parameters, W [out][in] then b per layer, float32; order-E.bin: the
sample order of epoch E, int32[60000]), trains the same MLP (Linear, ReLU, ...,
Linear; mean cross-entropy; SGD with PyTorch's momentum, v = mu*v + g,
w -= lr*v) in that order, and compares each step's loss with losses-E.bin.
Inputs are normalised exactly as the engine does, (pixel/255 - mean)/std in
float32.

Backends: torch (default; float32 with TF32 off, on CUDA when there is one) or
numpy (a float32 forward/backward/SGD of its own, for machines without
PyTorch). Prints the max and median relative difference |ours-ref|/|ref| per
epoch and the first step over the tolerance, plots both curves and the
difference when --png is given, and ends with one summary line on the judged
steps: the first --judge-steps of epoch 1 (0: all of it), and on the mean loss
of epoch 1. Exits 1 when one of them exceeds the tolerance.

Why not the whole epoch: two float32 trainings that differ only in summation
order (the host engine and numpy here) agree to ~1e-7 until a hidden unit's
pre-activation, within rounding of 0, lands on opposite sides of the ReLU in
the two; from there the difference grows by about e every 15-20 steps
(momentum SGD is chaotic) and passes 1e-3 within ~70 steps. On the host
configuration (784-256-10, batch 64) that happened at step 200 against
PyTorch (1.13, CPU) and at step 730 against numpy, so a 937-step epoch fails
any fixed tolerance by chance, while a real bug shows at step 1 (forward) or 2
(update). The per-epoch lines and the plot show the whole run.

Also a small library for tools/torch_bench.py: load_train_set, disable_tf32.
"""
import argparse
import gzip
import json
import os
import sys
import time
import warnings

import numpy as np

PROG = "torch_parity"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_COUNT = 60000
IMAGE_PIXELS = 28 * 28
CLASSES = 10
IDX_UBYTE = 0x08


class DataError(Exception):
    """A missing or malformed input file; the message says which and why."""


# ---- dataset -----------------------------------------------------------------


def read_idx(directory, name, shape):
    """The uint8 IDX file directory/name (or name.gz), checked against shape."""
    path = os.path.join(directory, name)
    if os.path.exists(path):
        with open(path, "rb") as f:
            raw = f.read()
    elif os.path.exists(path + ".gz"):
        path += ".gz"
        with gzip.open(path, "rb") as f:
            raw = f.read()
    else:
        raise DataError(f"no {name} or {name}.gz in {directory} (run 'make data')")
    ndim = len(shape)
    header = 4 + 4 * ndim
    if len(raw) < header or raw[0] != 0 or raw[1] != 0 or raw[2] != IDX_UBYTE or raw[3] != ndim:
        raise DataError(f"{path}: not an IDX file of unsigned bytes with {ndim} dimensions")
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    if dims != tuple(shape):
        raise DataError(f"{path}: dimensions {dims}, expected {tuple(shape)}")
    data = np.frombuffer(raw, dtype=np.uint8, offset=header)
    if data.size != int(np.prod(shape)):
        raise DataError(f"{path}: {data.size} data bytes, expected {int(np.prod(shape))}")
    return data.reshape(shape).copy()  # writable, as torch.from_numpy wants


def load_train_set(directory):
    """Training images (uint8 [60000][784]) and labels (uint8 [60000])."""
    images = read_idx(directory, "train-images-idx3-ubyte", (TRAIN_COUNT, 28, 28))
    labels = read_idx(directory, "train-labels-idx1-ubyte", (TRAIN_COUNT,))
    if labels.max() >= CLASSES:
        raise DataError(f"{directory}: a training label is {labels.max()}, beyond the {CLASSES} classes")
    return images.reshape(TRAIN_COUNT, IMAGE_PIXELS), labels


def normalise(images, mean, std):
    """(pixel/255 - mean)/std in float32, operation for operation as the engine."""
    x = images.astype(np.float32) / np.float32(255.0)
    x -= np.float32(mean)
    x /= np.float32(std)
    return x


def find_data_dir(meta_dir, override):
    """--data, else the dump's data_dir, from here or else from the repository root."""
    if override:
        return override
    for candidate in (meta_dir, os.path.join(REPO, meta_dir)):
        if os.path.isdir(candidate):
            return candidate
    raise DataError(f"the dump's data directory {meta_dir} is neither here nor under {REPO}; pass --data DIR")


# ---- dump --------------------------------------------------------------------


def read_float32(path, count=None):
    """A little-endian float32 file, with count values if count is given."""
    if not os.path.exists(path):
        raise DataError(f"no {path}")
    values = np.fromfile(path, dtype="<f4")
    if count is not None and values.size != count:
        raise DataError(f"{path}: {values.size} float32 values, expected {count}")
    return values


def read_meta(dump):
    path = os.path.join(dump, "meta.json")
    try:
        with open(path) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        raise DataError(f"cannot read {path}: {e}") from e
    missing = [k for k in ("dims", "batch", "steps_per_epoch", "lr", "momentum", "pixel_mean", "pixel_std")
               if k not in meta]
    if missing:
        raise DataError(f"{path}: no {', '.join(missing)}")
    if meta["steps_per_epoch"] * meta["batch"] > TRAIN_COUNT:
        raise DataError(f"{path}: {meta['steps_per_epoch']} steps of {meta['batch']} exceed {TRAIN_COUNT} samples")
    return meta


def read_params(dump, dims):
    """[(W [out][in], b [out]), ...] from init.bin."""
    sizes = [(o, i) for i, o in zip(dims[:-1], dims[1:])]
    flat = read_float32(os.path.join(dump, "init.bin"), sum(o * i + o for o, i in sizes))
    params, at = [], 0
    for out, inp in sizes:
        w = flat[at : at + out * inp].reshape(out, inp).copy()
        at += out * inp
        params.append((w, flat[at : at + out].copy()))
        at += out
    return params


def read_order(dump, epoch):
    path = os.path.join(dump, f"order-{epoch}.bin")
    if not os.path.exists(path):
        raise DataError(f"no {path}")
    order = np.fromfile(path, dtype="<i4")
    if order.size != TRAIN_COUNT or order.min() < 0 or order.max() >= TRAIN_COUNT:
        raise DataError(f"{path}: not a sample order of {TRAIN_COUNT} indices")
    return order.astype(np.int64)


def dumped_epochs(dump):
    """How many epochs, 1, 2, ... in a row, have losses-E.bin."""
    n = 0
    while os.path.exists(os.path.join(dump, f"losses-{n + 1}.bin")):
        n += 1
    return n


# ---- trainers ----------------------------------------------------------------


def softmax_xent(z, y):
    """Mean loss (float64 sum of float32 row losses, as the engine) and dLoss/dz."""
    rows = np.arange(len(y))
    zmax = z.max(axis=1, keepdims=True)
    e = np.exp(z - zmax)
    s = e.sum(axis=1, keepdims=True)
    row_loss = np.log(s[:, 0]) - (z[rows, y] - zmax[:, 0])
    dz = e / s
    dz[rows, y] -= np.float32(1.0)
    dz *= np.float32(1.0) / np.float32(len(y))
    return np.float32(row_loss.sum(dtype=np.float64) / len(y)), dz


class NumpyTrainer:
    """The MLP in float32 numpy: forward, backward, SGD with momentum."""

    def __init__(self, params, lr, momentum, x, y):
        self.w = [w.copy() for w, _ in params]
        self.b = [b.copy() for _, b in params]
        self.vw = [np.zeros_like(w) for w in self.w]
        self.vb = [np.zeros_like(b) for b in self.b]
        self.lr, self.mu = np.float32(lr), np.float32(momentum)
        self.x, self.y = x, y.astype(np.int64)
        self.name = "numpy float32"

    def step(self, idx):
        acts = [self.x[idx]]
        last = len(self.w) - 1
        for layer, (w, b) in enumerate(zip(self.w, self.b)):
            z = acts[-1] @ w.T + b
            acts.append(z if layer == last else np.maximum(z, np.float32(0.0)))
        loss, dz = softmax_xent(acts[-1], self.y[idx])
        for layer in range(last, -1, -1):
            gw, gb = dz.T @ acts[layer], dz.sum(axis=0)
            if layer > 0:  # with the weights before their update, as the engine
                dz = (dz @ self.w[layer]) * (acts[layer] > 0)
            self.sgd(self.w[layer], self.vw[layer], gw)
            self.sgd(self.b[layer], self.vb[layer], gb)
        return loss

    def sgd(self, p, v, g):
        v *= self.mu
        v += g
        p -= self.lr * v

    def run_epoch(self, order, steps, batch):
        return np.array([self.step(order[s * batch : (s + 1) * batch]) for s in range(steps)], dtype=np.float32)


def disable_tf32(torch):
    """FP32 matmuls in IEEE float32 (TF32 off), through the legacy switches only:
    PyTorch (2.9 on) refuses a mix of these and the newer fp32_precision ones."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy switches warn of their deprecation
        torch.backends.cuda.matmul.allow_tf32 = False
        if torch.backends.cuda.matmul.allow_tf32:
            raise RuntimeError("TF32 is still on for matmuls after allow_tf32 = False")
        try:  # cuDNN runs no op of these MLPs: a refusal here costs nothing, so it only warns
            torch.backends.cudnn.allow_tf32 = False
        except RuntimeError as e:
            print(f"{PROG}: warning: could not turn TF32 off for cuDNN: {e}", file=sys.stderr)


class TorchTrainer:
    """The MLP as torch.nn.Linear/ReLU layers, F.cross_entropy and torch.optim.SGD."""

    def __init__(self, params, lr, momentum, x, y, device):
        import torch
        import torch.nn.functional as F

        disable_tf32(torch)
        self.torch, self.F = torch, F
        layers = []
        for w, b in params:
            linear = torch.nn.Linear(w.shape[1], w.shape[0])
            with torch.no_grad():
                linear.weight.copy_(torch.from_numpy(w))
                linear.bias.copy_(torch.from_numpy(b))
            layers += [linear, torch.nn.ReLU()]
        self.model = torch.nn.Sequential(*layers[:-1]).to(device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=momentum)
        self.x = torch.from_numpy(x).to(device)
        self.y = torch.from_numpy(y.astype(np.int64)).to(device)
        self.device = device
        where = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"
        self.name = f"PyTorch {torch.__version__} float32 on {where}"

    def run_epoch(self, order, steps, batch):
        torch = self.torch
        idx = torch.from_numpy(order[: steps * batch]).to(self.device).view(steps, batch)
        losses = torch.empty(steps, device=self.device)
        for s in range(steps):
            self.opt.zero_grad(set_to_none=True)
            loss = self.F.cross_entropy(self.model(self.x[idx[s]]), self.y[idx[s]])
            loss.backward()
            self.opt.step()
            losses[s] = loss.detach()
        return losses.cpu().numpy()


def torch_device(requested):
    try:
        import torch
    except ImportError:
        raise DataError("PyTorch is not installed here: use --backend numpy") from None
    if requested == "cuda" and not torch.cuda.is_available():
        raise DataError("--device cuda, but PyTorch sees no CUDA device")
    if requested:
        return requested
    if torch.cuda.is_available():
        return "cuda"
    print(f"{PROG}: no CUDA device, running PyTorch on the CPU")
    return "cpu"


# ---- comparison and report ---------------------------------------------------


def relative_difference(ours, ref):
    """|ours-ref|/|ref| per step; a non-finite loss of ours counts as infinite."""
    with np.errstate(invalid="ignore", over="ignore"):
        rel = np.abs(ours.astype(np.float64) - ref) / np.maximum(np.abs(ref), np.finfo(np.float32).tiny)
    rel[~np.isfinite(rel)] = np.inf
    return rel


def summarise(rel, tol):
    over = np.nonzero(rel > tol)[0]
    return {
        "max": float(rel.max()),
        "max_step": int(rel.argmax()) + 1,
        "median": float(np.median(rel)),
        "first_over": int(over[0]) + 1 if over.size else None,
    }


def describe(epoch, steps, stats, tol):
    first = f"first step over tol: {stats['first_over']}" if stats["first_over"] else "no step over tol"
    return (f"epoch {epoch}: {steps} steps, max rel diff {stats['max']:.2e} (step {stats['max_step']}), "
            f"median {stats['median']:.2e}, {first} ({tol:.0e})")


def plot(path, meta, ref, ours, rel, steps, judged, tol, trainer_name):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(1, len(ref) + 1)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    top.plot(x, ref, lw=1.2, label=f"staticnn ({meta.get('target', '?')})")
    top.plot(x, ours, lw=0.8, ls="--", label=trainer_name)
    top.set_yscale("log")
    top.set_ylabel("training loss (per step)")
    top.legend()
    shape = "-".join(str(d) for d in meta["dims"])
    top.set_title(f"{meta.get('dataset', 'MNIST')} MLP {shape}, batch {meta['batch']}, "
                  f"SGD lr {meta['lr']} momentum {meta['momentum']}")
    exact = rel == 0
    bottom.plot(x[~exact], rel[~exact], ".", ms=2, color="tab:red",
                label=f"|ours - staticnn| / |staticnn| ({exact.sum()} steps equal, not drawn)")
    bottom.axhline(tol, color="k", ls=":", lw=1, label=f"tolerance {tol:.0e}")
    bottom.axvspan(0.5, judged + 0.5, color="tab:green", alpha=0.12, label=f"judged: steps 1-{judged}")
    bottom.set_yscale("log")
    finite = rel[np.isfinite(rel)]
    bottom.set_ylim(top=max(tol, finite.max() if finite.size else tol) * 300)  # room for the legend
    bottom.set_ylabel("relative difference")
    bottom.set_xlabel("step")
    bottom.legend(loc="upper left", fontsize="small", ncol=3)
    for axis in (top, bottom):
        for boundary in range(steps, len(ref), steps):
            axis.axvline(boundary + 0.5, color="grey", lw=0.6, alpha=0.5)
        axis.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---- program -----------------------------------------------------------------


def parse_args():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("dump", metavar="DUMP_DIR", help="directory written by ./app/mnist --dump")
    p.add_argument("--epochs", type=int, default=1, help="epochs to train and compare (default 1)")
    p.add_argument("--png", help="plot the loss curves and their difference to this file")
    p.add_argument("--tol", type=float, default=1e-3, help="relative tolerance (default 1e-3, FP32)")
    p.add_argument("--judge-steps", type=int, default=50,
                   help="steps of epoch 1 the verdict covers (default 50; 0: the whole epoch)")
    p.add_argument("--backend", choices=("torch", "numpy"), default="torch")
    p.add_argument("--device", choices=("cuda", "cpu"), help="torch device (default: cuda when there is one)")
    p.add_argument("--data", help="dataset directory (default: the dump's data_dir)")
    args = p.parse_args()
    if args.epochs < 1 or args.judge_steps < 0:
        p.error("--epochs wants a positive number, --judge-steps one >= 0")
    return args


def make_trainer(args, meta, params):
    device = torch_device(args.device) if args.backend == "torch" else None
    images, labels = load_train_set(find_data_dir(meta.get("data_dir", "data/mnist"), args.data))
    x = normalise(images, meta["pixel_mean"], meta["pixel_std"])
    if device is None:
        return NumpyTrainer(params, meta["lr"], meta["momentum"], x, labels)
    return TorchTrainer(params, meta["lr"], meta["momentum"], x, labels, device)


def main():
    args = parse_args()
    try:
        meta = read_meta(args.dump)
        params = read_params(args.dump, meta["dims"])
        available = dumped_epochs(args.dump)
        if available == 0:
            raise DataError(f"no losses-1.bin in {args.dump}")
        epochs = min(args.epochs, available)
        if epochs < args.epochs:
            print(f"{PROG}: the dump has the losses of {available} epoch(s): comparing {epochs}")
        steps, batch = meta["steps_per_epoch"], meta["batch"]
        refs = [read_float32(os.path.join(args.dump, f"losses-{e}.bin"), steps) for e in range(1, epochs + 1)]
        orders = [read_order(args.dump, e) for e in range(1, epochs + 1)]
        trainer = make_trainer(args, meta, params)
    except DataError as e:
        sys.exit(f"{PROG}: error: {e}")

    shape = "-".join(str(d) for d in meta["dims"])
    print(f"{PROG}: MLP {shape}, batch {batch}, {steps} steps per epoch, lr {meta['lr']}, "
          f"momentum {meta['momentum']}; staticnn ({meta.get('target', '?')}) vs {trainer.name}")
    ours, stats = [], []
    for epoch, (order, ref) in enumerate(zip(orders, refs), start=1):
        start = time.perf_counter()
        ours.append(trainer.run_epoch(order, steps, batch))
        stats.append(summarise(relative_difference(ours[-1], ref), args.tol))
        print(f"  {describe(epoch, steps, stats[-1], args.tol)} [{time.perf_counter() - start:.1f} s]")

    judged = min(args.judge_steps or steps, steps)
    if args.png:
        ref_all, ours_all = np.concatenate(refs), np.concatenate(ours)
        plot(args.png, meta, ref_all, ours_all, relative_difference(ours_all, ref_all), steps, judged, args.tol,
             trainer.name)
        print(f"  plot: {args.png}")

    verdict = summarise(relative_difference(ours[0][:judged], refs[0][:judged]), args.tol)
    # The epoch's mean loss is judged whole: trajectories that part at a ReLU
    # flip still train alike, and their means agree.
    mean_ours, mean_ref = float(np.mean(ours[0], dtype=np.float64)), float(np.mean(refs[0], dtype=np.float64))
    mean_rel = abs(mean_ours - mean_ref) / abs(mean_ref)
    passed = verdict["max"] <= args.tol and mean_rel <= args.tol
    window = f"{steps} steps" if judged == steps else f"steps 1-{judged} of {steps}"
    print(f"parity: epoch 1, {window}, max rel diff {verdict['max']:.1e}, median {verdict['median']:.1e}; "
          f"epoch mean loss {mean_ours:.6f} vs {mean_ref:.6f}, rel diff {mean_rel:.1e} "
          f"(tol {args.tol:.0e}): {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
