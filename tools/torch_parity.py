#!/usr/bin/env python3
"""Step-by-step loss parity of a staticnn run against an independent trainer.

    ./app/mnist --dump DUMP_DIR
    tools/torch_parity.py DUMP_DIR [--precision fp32|tf32|tf32_wgmma|fp16|fp16_acc16|bf16] [--epochs N]
                          [--png FILE] [--judge-steps N] [--tol T] [--mean-tol T]
                          [--backend torch|numpy] [--device cuda|cpu] [--data DIR]

Rebuilds the run from the dump (meta.json: shape and schedule; init.bin: the
initial parameters, W [out][in] then b per layer, float32; order-E.bin: the
sample order of epoch E, int32[60000]), trains the same MLP (Linear, ReLU, ...,
Linear; mean cross-entropy, label-smoothed as the build says; the build's
optimizer and learning-rate schedule as meta.json records them, kernels/optim.h:
SGD with PyTorch's momentum, v = mu*v + g, w -= lr*v, or Nesterov, or AdamW,
weight decay decoupled) in that order, and compares each step's loss with
losses-E.bin.
Inputs are normalised exactly as the engine does, (pixel/255 - mean)/std in
float32.

Precision (--precision, else meta.json's "precision", else fp32 for dumps
that predate it) is the build's CONFIG_PRECISION_*, and the trainer computes
as the engine does in it. app/mnist records null for a TF32 build on the
Hopper path whose wgmma thresholds keep some forward GEMMs on mma.sync: those
round, the others truncate, which no one precision here follows; such a dump
needs --precision.
Activations, gradients, weights and momentum are float32 in every precision,
and so are the bias gradient, the loss, the ReLU mask and the SGD update. What
changes is the three GEMMs of each layer (Y = X W^T, dX = dY W, dW = dY^T X):
each rounds both of its operands and sums the products in float32; tf32 rounds
to 10 mantissa bits, to nearest with ties away from zero (cvt.rna); fp16 and
bf16 to nearest even. tf32_wgmma is the TF32 build on the Hopper path with
every forward GEMM on wgmma (CONFIG_GEMM_WGMMA_MIN_K=1, _MIN_MFLOP=0): wgmma
reads TF32 from the float32 words by dropping the 13 low mantissa bits, so the
forward GEMMs truncate both operands, the two backward ones round as tf32
(mma.sync). fp16_acc16 rounds to fp16 and sums in an FP16 register that
mma.sync m16n8k8 rounds after each k chunk of 8: the emulation adds each
chunk's float32 sum to the FP16 running sum and rounds, in k order. That is an
approximation: how the tensor core rounds inside one instruction is not
documented, and where the engine splits a GEMM's k range over blocks (split-K,
by the GPU's SM count and the tiles, neither in the dump) each slice has an
FP16 sum of its own and the slices are added in float32, which the emulation
does not follow. The torch backend computes the GEMMs in a
torch.autograd.Function of its own (float32 matmuls of the rounded operands,
TF32 off), except in fp32, where it is PyTorch's F.linear; the numpy backend
rounds alike (bf16 and tf32 on the uint32 view of the float32 bits).

With the torch backend and a 16-bit precision, PyTorch's own mixed precision
is trained too, as a second reference that is drawn and summarised but not
judged: torch.autocast to bf16 (fp16 for fp16 and fp16_acc16), FP32 master
weights, no loss scaling (the engine has none).

Backends: torch (default; on CUDA when there is one) or numpy (for machines
without PyTorch). Prints the max and median relative difference
|ours-ref|/|ref| per epoch and the first step over the tolerance, plots the
curves and the difference when --png is given, and ends with one summary line
on the judged steps: the first --judge-steps of epoch 1 (0: all of it), and on
the mean loss of epoch 1. Exits 1 when one of them exceeds its tolerance.

Why not the whole epoch: two float32 trainings that differ only in summation
order (the host engine and numpy here) agree to ~1e-7 until a hidden unit's
pre-activation, within rounding of 0, lands on opposite sides of the ReLU in
the two; from there the difference grows by about e every 15-20 steps
(momentum SGD is chaotic) and passes 1e-3 within ~70 steps. On the host
configuration (784-256-10, batch 64) that happened at step 200 against
PyTorch (1.13, CPU) and at step 730 against numpy, so a 937-step epoch fails
any fixed tolerance by chance, while a real bug shows at step 1 (forward) or 2
(update). The per-epoch lines and the plot show the whole run.

Tolerances (the defaults per precision, VERDICT below; --judge-steps, --tol
and --mean-tol override them). fp32: steps 1-50 and the epoch mean within
1e-3, from the measurements above (the means of trajectories that had parted
differed by up to 8.9e-4).

In the rounded precisions the same summation-order noise now and then moves a
GEMM operand across a boundary of the coarser grid, a change of 2^-8 (bf16)
or 2^-11 of it instead of 2^-24, so the trajectories part within 10-20 steps
rather than hundreds. Measured with the numpy backend against itself, same
rounding, another float32 summation order (k summed in two halves, or in
float64), 784-256-10, batch 64, the host run's initial weights, 60 sample
orders: steps 1-5 within 8e-6 in tf32, fp16 and bf16 (1.6e-5 in fp16_acc16,
chunks summed in float64), but steps 1-10 up to 6e-5 and 1-20 up to 4e-4; the
epoch means differed by up to 1.8e-3 (15 runs). GEMMs computed in another
precision than the emulated one differ over steps 1-5 by 2e-5 or more
(medians of 20 orders: fp32, tf32 and fp16 among themselves 3e-5, bf16
against any of them 1e-4, fp16 against fp16_acc16 5e-5); a wrong forward,
gradient or update by far more, at step 1 or 2. Hence steps 1-5 within 5e-5,
six times the noise measured, which leaves room for the tensor cores' own
FP32 summation (not that of IEEE float32 additions), and the epoch mean
within 5e-3: a bug fails, bf16 is told from the others, but tf32 from fp16
(10 mantissa bits both) and either from fp32 not reliably. fp16_acc16: steps
1-5 within 1e-3. Its emulation rounds the FP16 running sum to nearest; an
emulation that rounds it toward zero differs from it by 1.4e-3 to 2.1e-3 by
step 5, so a tensor core that truncates fails here, and the emulation would
have to follow it.

Also a small library for tools/torch_bench.py: load_train_set, load_test_set, disable_tf32.
"""
import argparse
import collections
import contextlib
import gzip
import json
import math
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))  # the shared modules
from digit_width import set_digit_width  # noqa: E402
from noise import Distortion, Noise  # noqa: E402

PROG = "torch_parity"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN_COUNT = 60000
TEST_COUNT = 10000
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


def load_set(directory, prefix, count, name):
    """The images (uint8 [count][784]) and labels (uint8 [count]) of the files PREFIX-*-idx?-ubyte."""
    images = read_idx(directory, f"{prefix}-images-idx3-ubyte", (count, 28, 28))
    labels = read_idx(directory, f"{prefix}-labels-idx1-ubyte", (count,))
    if labels.max() >= CLASSES:
        raise DataError(f"{directory}: a {name} label is {labels.max()}, beyond the {CLASSES} classes")
    return images.reshape(count, IMAGE_PIXELS), labels


def load_train_set(directory):
    """Training images (uint8 [60000][784]) and labels (uint8 [60000])."""
    return load_set(directory, "train", TRAIN_COUNT, "training")


def load_test_set(directory):
    """Test images (uint8 [10000][784]) and labels (uint8 [10000])."""
    return load_set(directory, "t10k", TEST_COUNT, "test")


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


def check_draws(dump, epoch, meta, noise, distortion):
    """The engine's draws of the first steps of epoch `epoch` (draws-E.bin, from a build that translates,
    distorts or drops units) against tools/lib/noise.py's, which the trainers use: the steps compared, 0 for a
    build with none; a difference is a DataError. The distortions' floats may differ by a rounding (numpy's
    fused multiply-add is float64 rounded to float32), at most DISTORT_TOL relative."""
    if not (noise.shift or noise.dropout or distortion):
        return 0
    path = os.path.join(dump, f"draws-{epoch}.bin")
    if not os.path.exists(path):
        raise DataError(f"no {path}: the build translates, distorts or drops units, and its dump must hold its "
                        "draws")
    raw = np.fromfile(path, dtype=np.uint8)
    batch, widths = meta["batch"], meta["dims"][1:-1]
    shift_bytes = 2 * batch if noise.shift else 0
    masks = [(w, (batch * w + 7) // 8) for w in widths] if noise.dropout else []
    maps = 6 * 4 * batch if distortion and distortion.affine else 0
    field_rows = min(batch, DUMP_FIELD_ROWS)  # app/mnist.c dumps the fields of a step's first rows
    fields = 2 * IMAGE_PIXELS * 4 * field_rows if distortion and distortion.elastic else 0
    per_step = shift_bytes + sum(b for _, b in masks) + maps + fields
    steps = raw.size // per_step
    if steps == 0 or raw.size != steps * per_step:
        raise DataError(f"{path}: {raw.size} bytes, not whole steps of {per_step}")
    for s in range(steps):
        block = raw[s * per_step : (s + 1) * per_step]
        if noise.shift:
            got = block[:shift_bytes].view(np.int8).reshape(batch, 2)
            dx, dy = noise.shifts(epoch - 1, s, batch)
            if not (np.array_equal(got[:, 0], dx) and np.array_equal(got[:, 1], dy)):
                raise DataError(f"{path}: step {s + 1}'s translations differ from tools/lib/noise.py's")
        at = shift_bytes
        for layer, (width, size) in enumerate(masks):
            bits = np.unpackbits(block[at : at + size], bitorder="little")[: batch * width].reshape(batch, width)
            if not np.array_equal(bits.astype(bool), noise.keep(epoch - 1, s, layer, batch, width)):
                raise DataError(f"{path}: step {s + 1}'s dropout mask of hidden layer {layer} differs from "
                                "tools/lib/noise.py's")
            at += size
        if maps:
            got = block[at : at + maps].view("<f4").reshape(batch, 6)
            close(path, s, "affine maps", got, np.stack(distortion.maps(epoch - 1, s, batch), axis=1))
            at += maps
        if fields:
            got = block[at : at + fields].view("<f4").reshape(field_rows, 2, IMAGE_PIXELS)
            dx, dy = distortion.fields(epoch - 1, s, field_rows)
            want = np.stack([dx.reshape(field_rows, -1), dy.reshape(field_rows, -1)], axis=1)
            close(path, s, "elastic displacements", got, want)
            at += fields
    return steps


DISTORT_TOL = 1e-6
DUMP_FIELD_ROWS = 8  # app/mnist.c's SNN_DUMP_FIELD_ROWS


def close(path, step, what, got, want):
    """A DataError where the engine's floats and numpy's differ by more than DISTORT_TOL relative."""
    worst = float(np.max(np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), 1.0)))
    if not worst <= DISTORT_TOL:  # a NaN is no match either
        raise DataError(f"{path}: step {step + 1}'s {what} differ from tools/lib/noise.py's by {worst:.1e} "
                        f"(tolerance {DISTORT_TOL:.0e})")


def dumped_epochs(dump):
    """How many epochs, 1, 2, ... in a row, have losses-E.bin."""
    n = 0
    while os.path.exists(os.path.join(dump, f"losses-{n + 1}.bin")):
        n += 1
    return n


# ---- the engine's GEMM numerics -----------------------------------------------

PRECISIONS = ("fp32", "tf32", "tf32_wgmma", "fp16", "fp16_acc16", "bf16")
# The verdict's defaults: the steps of epoch 1 judged, their tolerance, and the epoch mean's ("Tolerances" above).
Verdict = collections.namedtuple("Verdict", "judge_steps tol mean_tol")
VERDICT = {
    "fp32": Verdict(50, 1e-3, 1e-3),
    "tf32": Verdict(5, 5e-5, 5e-3),
    "tf32_wgmma": Verdict(5, 5e-5, 5e-3),
    "fp16": Verdict(5, 5e-5, 5e-3),
    "fp16_acc16": Verdict(5, 1e-3, 5e-3),
    "bf16": Verdict(5, 5e-5, 5e-3),
}
ACC16_CHUNK = 8  # k of one mma.sync m16n8k8: the FP16 accumulator is rounded after each
AUTOCAST_DTYPE = {"fp16": "float16", "fp16_acc16": "float16", "bf16": "bfloat16"}
NUMERICS = {
    "fp32": "float32",
    "tf32": "float32 GEMMs of TF32-rounded operands",
    "tf32_wgmma": "float32 GEMMs of TF32 operands, truncated in the forward GEMMs (wgmma), rounded in the "
                  "backward ones",
    "fp16": "float32 GEMMs of FP16-rounded operands",
    "fp16_acc16": "FP16-accumulated GEMMs (emulated) of FP16-rounded operands",
    "bf16": "float32 GEMMs of BF16-rounded operands",
}


def round_bf16(x):
    """float32 array x rounded to bfloat16 (to nearest, ties to even), as float32; Inf and NaN kept."""
    bits = x.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return np.where(np.isfinite(x), rounded.view(np.float32), x)


def round_tf32(x):
    """float32 array x rounded to TF32 (10 mantissa bits; to nearest, ties away from zero, as
    cvt.rna.tf32.f32), as float32; Inf and NaN kept."""
    rounded = (x.view(np.uint32) + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return np.where(np.isfinite(x), rounded.view(np.float32), x)


def truncate_tf32(x):
    """float32 array x with its 13 low mantissa bits cleared (TF32 toward zero, as wgmma reads float32
    words), as float32; Inf and NaN kept."""
    truncated = x.view(np.uint32) & np.uint32(0xFFFFE000)
    return np.where(np.isfinite(x), truncated.view(np.float32), x)


def round_fp16(x):
    """float32 array x rounded to half (to nearest, ties to even; subnormals, overflow to Inf), as float32."""
    with np.errstate(over="ignore"):  # Inf is the rounding's answer, as __float2half_rn's
        return x.astype(np.float16).astype(np.float32)


NUMPY_ROUNDING = {"fp32": lambda x: x, "tf32": round_tf32, "tf32_wgmma": round_tf32, "fp16": round_fp16,
                  "fp16_acc16": round_fp16, "bf16": round_bf16}
# where the forward GEMMs' operands are rounded otherwise than the backward ones'
NUMPY_FORWARD_ROUNDING = {"tf32_wgmma": truncate_tf32}


def acc16_chunks(k):
    """How many k chunks of ACC16_CHUNK cover k, and the zeros that pad k to them."""
    chunks = -(-k // ACC16_CHUNK)
    return chunks, chunks * ACC16_CHUNK - k


def matmul_acc16(a, b):
    """a @ b (float32 arrays holding halves) summed in an FP16 running sum, rounded after each k chunk."""
    (m, k), n = a.shape, b.shape[1]
    chunks, pad = acc16_chunks(k)
    a = np.pad(a, ((0, 0), (0, pad))).reshape(m, chunks, ACC16_CHUNK).transpose(1, 0, 2)
    b = np.pad(b, ((0, pad), (0, 0))).reshape(chunks, ACC16_CHUNK, n)
    acc = np.zeros((m, n), dtype=np.float16)
    with np.errstate(over="ignore"):
        for partial in a @ b:
            acc = (acc.astype(np.float32) + partial).astype(np.float16)
    return acc.astype(np.float32)


def numpy_gemm(precision, forward=False):
    """(a, b) -> a @ b as the engine's GEMMs (its forward GEMMs, if forward) compute it in precision."""
    rnd = NUMPY_FORWARD_ROUNDING.get(precision, NUMPY_ROUNDING[precision]) if forward else NUMPY_ROUNDING[precision]
    if precision == "fp16_acc16":
        return lambda a, b: matmul_acc16(rnd(a), rnd(b))
    return lambda a, b: rnd(a) @ rnd(b)


def torch_rounding(torch, precision, forward=False):
    """The operand rounding of precision (of its forward GEMMs, if forward), for a float32 tensor (as
    round_bf16 and co)."""
    if forward and precision == "tf32_wgmma":
        def truncate_tf32_tensor(x):
            truncated = (x.contiguous().view(torch.int32) & -0x2000).view(torch.float32)
            return torch.where(torch.isfinite(x), truncated, x)
        return truncate_tf32_tensor
    if precision == "bf16":
        return lambda x: x.to(torch.bfloat16).float()
    if precision in ("fp16", "fp16_acc16"):
        return lambda x: x.half().float()
    if precision in ("tf32", "tf32_wgmma"):
        def round_tf32_tensor(x):
            rounded = ((x.contiguous().view(torch.int32) + 0x1000) & -0x2000).view(torch.float32)
            return torch.where(torch.isfinite(x), rounded, x)
        return round_tf32_tensor
    return lambda x: x


def torch_matmul_acc16(torch, a, b):
    """matmul_acc16 on tensors."""
    (m, k), n = a.shape, b.shape[1]
    chunks, pad = acc16_chunks(k)
    a = torch.nn.functional.pad(a, (0, pad)).reshape(m, chunks, ACC16_CHUNK).transpose(0, 1)
    b = torch.nn.functional.pad(b, (0, 0, 0, pad)).reshape(chunks, ACC16_CHUNK, n)
    acc = torch.zeros(m, n, dtype=torch.float16, device=a.device)
    for partial in torch.bmm(a, b):
        acc = (acc.float() + partial).half()
    return acc.float()


def torch_engine_linear(torch, precision):
    """F.linear(x, w, b) with its forward and both backward GEMMs computed as the engine's in precision
    (bias and bias gradient in float32)."""
    def gemm_rounding(rnd):
        if precision == "fp16_acc16":
            return lambda a, b: torch_matmul_acc16(torch, rnd(a), rnd(b))
        return lambda a, b: rnd(a) @ rnd(b)

    gemm, gemm_fwd = (gemm_rounding(torch_rounding(torch, precision, forward)) for forward in (False, True))

    class EngineLinear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            ctx.save_for_backward(x, w)
            return gemm_fwd(x, w.t()) + b

        @staticmethod
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            dx = gemm(dy, w) if ctx.needs_input_grad[0] else None
            return dx, gemm(dy.t(), x), dy.sum(dim=0)

    return EngineLinear.apply


# ---- trainers ----------------------------------------------------------------


class Recipe:
    """The run's training recipe from meta.json (nn/Kconfig; dumps that predate it: SGD, constant lr)."""

    def __init__(self, meta):
        self.lr, self.momentum = meta["lr"], meta["momentum"]
        self.optimizer = meta.get("optimizer", "sgd")
        self.nesterov = meta.get("nesterov", False)
        self.betas = (meta.get("beta1", 0.9), meta.get("beta2", 0.999))
        self.eps = meta.get("eps", 1e-8)
        self.weight_decay = meta.get("weight_decay", 0.0)
        self.smoothing = meta.get("label_smoothing", 0.0)
        self.schedule = meta.get("schedule", "constant")
        self.warmup, self.final = meta.get("lr_warmup", 0), meta.get("lr_final", 0.0)
        self.gamma, self.step_epochs = meta.get("lr_gamma", 1.0), meta.get("lr_step_epochs", 1)
        self.epoch_steps = meta["steps_per_epoch"]
        self.total = meta.get("epochs", 1) * self.epoch_steps
        self.noise = Noise(meta.get("seed", 1), meta.get("augment_shift", 0), meta.get("dropout", 0.0))
        self.background = None  # the normalised 0 pixel, which a translation moves in
        if self.noise.shift:
            self.background = np.float32((0.0 - np.float32(meta["pixel_mean"])) / np.float32(meta["pixel_std"]))
        self.distortion = None  # kernels/distort.h's, where the build distorts; its images: the training set's
        if meta.get("affine") or meta.get("elastic"):
            self.distortion = Distortion(self.noise.key, meta.get("affine"), meta.get("elastic"))
        self.images, self.pixel_mean, self.pixel_std = None, meta.get("pixel_mean"), meta.get("pixel_std")
        self.text = meta.get("recipe", f"SGD lr {self.lr} momentum {self.momentum}")

    def batch(self, x, idx, epoch, step):
        """The normalised batch of samples idx as the engine's step `step` of epoch `epoch` (from 0) gathers
        it: translated (x: the normalised training set) or, where the build distorts, the training set's bytes
        translated, then distorted (self.images), then normalised."""
        if self.distortion is None:
            return self.noise.translate(x[idx], epoch, step, self.background)
        moved = self.noise.translate(self.images[idx], epoch, step, 0)
        return normalise(self.distortion.apply(moved, epoch, step), self.pixel_mean, self.pixel_std)

    def factor(self, t):
        """The schedule's factor on lr at update t (from 0) of the run (kernels/optim.h, in float64)."""
        if self.schedule == "step":
            return self.gamma ** (t // self.epoch_steps // self.step_epochs)
        if self.schedule in ("cosine", "linear"):
            if t < self.warmup:
                return (t + 1) / self.warmup
            p = (t - self.warmup) / max(self.total - self.warmup, 1)
            fall = 1 - p if self.schedule == "linear" else (1 + math.cos(math.pi * p)) / 2
            return self.final + (1 - self.final) * fall
        return 1.0


def softmax_xent(z, y, smoothing=0.0):
    """Mean loss (float64 sum of float32 row losses, as the engine) and dLoss/dz, label-smoothed."""
    rows = np.arange(len(y))
    zmax = z.max(axis=1, keepdims=True)
    e = np.exp(z - zmax)
    s = e.sum(axis=1, keepdims=True)
    row_loss = np.log(s[:, 0]) - (z[rows, y] - zmax[:, 0])
    target = np.zeros_like(z)
    target[rows, y] = np.float32(1.0)
    if smoothing:
        a = np.float32(smoothing)
        mean = (z - zmax).mean(axis=1, dtype=np.float32)
        row_loss = np.log(s[:, 0]) - (np.float32(1) - a) * (z[rows, y] - zmax[:, 0]) - a * mean
        target = (np.float32(1) - a) * target + a / np.float32(z.shape[1])
    dz = (e / s - target) * (np.float32(1.0) / np.float32(len(y)))
    return np.float32(row_loss.sum(dtype=np.float64) / len(y)), dz


class NumpyTrainer:
    """The MLP in float32 numpy: forward, backward, the recipe's update; GEMMs as the engine's in precision."""

    def __init__(self, params, recipe, x, y, precision):
        self.w = [w.copy() for w, _ in params]
        self.b = [b.copy() for _, b in params]
        moments = 2 if recipe.optimizer == "adamw" else 1
        self.state = {id(p): [np.zeros_like(p) for _ in range(moments)] for p in self.w + self.b}
        self.recipe, self.t = recipe, 0
        self.x, self.y = x, y.astype(np.int64)
        self.gemm, self.gemm_fwd = numpy_gemm(precision), numpy_gemm(precision, forward=True)
        self.name = f"numpy, {NUMERICS[precision]}"

    def step(self, idx, epoch, step):
        """Step `step` of epoch `epoch` (from 0) on the samples idx, the engine's draws (tools/lib/noise.py) included."""
        noise, last = self.recipe.noise, len(self.w) - 1
        acts, drop = [self.recipe.batch(self.x, idx, epoch, step)], []
        for layer, (w, b) in enumerate(zip(self.w, self.b)):
            z = self.gemm_fwd(acts[-1], w.T) + b
            if layer < last:
                drop.append(noise.dropout_factor(epoch, step, layer, *z.shape) if noise.dropout else None)
                z = np.maximum(z, np.float32(0.0))
                if drop[-1] is not None:
                    z = z * drop[-1]
            acts.append(z)
        loss, dz = softmax_xent(acts[-1], self.y[idx], self.recipe.smoothing)
        for layer in range(last, -1, -1):
            gw, gb = self.gemm(dz.T, acts[layer]), dz.sum(axis=0)
            if layer > 0:  # with the weights before their update, as the engine
                dz = self.gemm(dz, self.w[layer]) * (acts[layer] > 0)
                if drop[layer - 1] is not None:
                    dz = dz * drop[layer - 1]
            self.update(self.w[layer], gw)
            self.update(self.b[layer], gb)
        self.t += 1
        return loss

    def update(self, p, g):
        """kernels/optim.h's snn_update in float32 numpy, the step's factors from float64 (snn_rate_at)."""
        r, s, t = self.recipe, self.state[id(p)], self.t
        lr = r.lr * r.factor(t)
        if r.weight_decay:
            p *= np.float32(1 - lr * r.weight_decay)
        if r.optimizer == "adamw":
            (b1, b2), f32 = r.betas, np.float32
            s[0][...] = f32(b1) * s[0] + f32(1 - b1) * g
            s[1][...] = f32(b2) * s[1] + f32(1 - b2) * g * g
            step, rsq = f32(lr / (1 - b1 ** (t + 1))), f32(1 / math.sqrt(1 - b2 ** (t + 1)))
            p -= step * (s[0] / (np.sqrt(s[1]) * rsq + f32(r.eps)))
        elif r.momentum:
            mu = np.float32(r.momentum)
            s[0][...] = mu * s[0] + g
            p -= np.float32(lr) * (g + mu * s[0] if r.nesterov else s[0])
        else:
            p -= np.float32(lr) * g

    def run_epoch(self, order, steps, batch, epoch):
        return np.array([self.step(order[s * batch : (s + 1) * batch], epoch, s) for s in range(steps)],
                        dtype=np.float32)


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
    """The MLP in PyTorch: float32 parameters, F.cross_entropy (label_smoothing), torch.optim.SGD or AdamW,
    the schedule as a LambdaLR; SGD's weight decay decoupled by hand (torch.optim.SGD's is an L2 term), as
    AdamW's. Each layer through linear (F.linear or torch_engine_linear), all of the forward under autocast to
    autocast_dtype if given."""

    def __init__(self, torch, params, recipe, data, linear, autocast_dtype, name):
        self.torch, self.linear, self.autocast_dtype, self.name = torch, linear, autocast_dtype, name
        self.recipe = recipe
        self.x, self.y = data
        device = self.x.device
        # copies: both trainers start from the same arrays
        self.params = [tuple(torch.tensor(p, device=device, requires_grad=True) for p in layer) for layer in params]
        flat = [p for pair in self.params for p in pair]
        if recipe.optimizer == "adamw":
            self.opt = torch.optim.AdamW(flat, lr=recipe.lr, betas=recipe.betas, eps=recipe.eps,
                                         weight_decay=recipe.weight_decay)
        else:
            self.opt = torch.optim.SGD(flat, lr=recipe.lr, momentum=recipe.momentum, nesterov=recipe.nesterov)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.opt, recipe.factor)

    def forward(self, h, drop):
        """drop: each hidden layer's dropout factors (tools/lib/noise.py), or None."""
        for layer, (w, b) in enumerate(self.params):
            h = self.linear(h, w, b)
            if layer + 1 < len(self.params):
                h = self.torch.relu(h)
                if drop:
                    h = h * drop[layer]
        return h

    def draws(self, idx, epoch, step):
        """The batch of samples idx as the engine's step `step` of epoch `epoch` (from 0) sees it, translated,
        and its dropout factors per hidden layer (or None)."""
        torch, noise = self.torch, self.recipe.noise
        x = self.x[idx]
        if self.recipe.distortion:
            x = torch.from_numpy(self.recipe.batch(None, idx.cpu().numpy(), epoch, step)).to(x.device)
        elif noise.shift:
            x = torch.from_numpy(noise.translate(x.cpu().numpy(), epoch, step, self.recipe.background)).to(x.device)
        if not noise.dropout:
            return x, None
        widths = [w.shape[0] for w, _ in self.params[:-1]]
        drop = [torch.from_numpy(noise.dropout_factor(epoch, step, layer, len(idx), width)).to(x.device)
                for layer, width in enumerate(widths)]
        return x, drop

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return self.torch.autocast(self.x.device.type, dtype=self.autocast_dtype)

    def run_epoch(self, order, steps, batch, epoch):
        torch = self.torch
        idx = torch.from_numpy(order[: steps * batch]).to(self.x.device).view(steps, batch)
        losses = torch.empty(steps, device=self.x.device)
        for s in range(steps):
            self.opt.zero_grad(set_to_none=True)
            x, drop = self.draws(idx[s], epoch, s)
            with self.autocast():
                loss = torch.nn.functional.cross_entropy(self.forward(x, drop), self.y[idx[s]],
                                                         label_smoothing=self.recipe.smoothing)
            loss.backward()
            if self.recipe.optimizer == "sgd" and self.recipe.weight_decay:
                with torch.no_grad():
                    for p in self.opt.param_groups[0]["params"]:
                        p.mul_(1 - self.opt.param_groups[0]["lr"] * self.recipe.weight_decay)
            self.opt.step()
            self.schedule.step()
            losses[s] = loss.detach()
        return losses.cpu().numpy()


def torch_trainers(device, params, recipe, x, y, precision):
    """The trainer to judge (the engine's numerics), and PyTorch's own mixed precision for a 16-bit
    precision (else None)."""
    import torch

    disable_tf32(torch)
    where = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"
    data = (torch.from_numpy(x).to(device), torch.from_numpy(y.astype(np.int64)).to(device))
    linear = torch.nn.functional.linear if precision == "fp32" else torch_engine_linear(torch, precision)
    judged = TorchTrainer(torch, params, recipe, data, linear, None,
                          f"PyTorch {torch.__version__}, {NUMERICS[precision]}, on {where}")
    if precision not in AUTOCAST_DTYPE:
        return judged, None
    dtype = AUTOCAST_DTYPE[precision]
    mixed = TorchTrainer(torch, params, recipe, data, torch.nn.functional.linear, getattr(torch, dtype),
                         f"PyTorch autocast {dtype}, FP32 master weights (reference, not judged)")
    return judged, mixed


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

EARLY_STEPS = 50  # the plot's close-up of where the trajectories part


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


def mean_relative_difference(ours, ref):
    """The means of two loss arrays, and |ours - ref| / |ref| between them."""
    mean_ours, mean_ref = float(np.mean(ours, dtype=np.float64)), float(np.mean(ref, dtype=np.float64))
    return mean_ours, mean_ref, abs(mean_ours - mean_ref) / abs(mean_ref)


def plot_difference(axis, rel, steps_shown, tol, judged):
    """The relative difference of the first steps_shown steps, the tolerance and the judged steps."""
    x = np.arange(1, steps_shown + 1)
    rel = rel[:steps_shown]
    exact = rel == 0
    axis.plot(x[~exact], rel[~exact], ".", ms=2, color="tab:red",
              label=f"|judged - staticnn| / |staticnn| ({exact.sum()} steps equal, not drawn)")
    axis.axhline(tol, color="k", ls=":", lw=1, label=f"tolerance {tol:.0e}")
    axis.axvspan(0.5, judged + 0.5, color="tab:green", alpha=0.12, label=f"judged: steps 1-{judged}")
    axis.set_yscale("log")
    finite = rel[np.isfinite(rel)]
    axis.set_ylim(top=max(tol, finite.max() if finite.size else tol) * 300)  # room for the legend
    axis.set_xlabel("step")
    axis.grid(True, which="major", alpha=0.3)


def plot(path, meta, precision, ref, judged_curve, reference_curve, steps, judged, tol):
    """The staticnn curve, the judged trainer's (name, losses) and PyTorch's mixed precision
    (name, losses, or None) on top; below, the judged trainer's relative difference over the run and
    over its first EARLY_STEPS steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name, ours = judged_curve
    rel = relative_difference(ours, ref)
    fig, ax = plt.subplot_mosaic([["top", "top"], ["run", "early"]], figsize=(12, 7),
                                 gridspec_kw={"height_ratios": [3, 2], "width_ratios": [3, 1]})
    top, run, early = ax["top"], ax["run"], ax["early"]
    run.sharex(top)
    x = np.arange(1, len(ref) + 1)
    top.plot(x, ref, lw=1.2, label=f"staticnn ({meta.get('target', '?')}, {precision})")
    top.plot(x, ours, lw=0.8, ls="--", label=f"{name} (judged)")
    if reference_curve:
        top.plot(x, reference_curve[1], lw=0.8, ls=":", color="tab:grey", label=reference_curve[0])
    top.set_yscale("log")
    top.set_ylabel("training loss (per step)")
    top.legend(fontsize="small")
    top.grid(True, which="major", alpha=0.3)
    shape = "-".join(str(d) for d in meta["dims"])
    top.set_title(f"{meta.get('dataset', 'MNIST')} MLP {shape}, batch {meta['batch']}, "
                  f"{Recipe(meta).text}, GEMMs in {precision}")
    plot_difference(run, rel, len(rel), tol, judged)
    run.set_ylabel("relative difference")
    run.legend(loc="upper left", fontsize="small", ncol=3)
    for axis in (top, run):
        for boundary in range(steps, len(ref), steps):
            axis.axvline(boundary + 0.5, color="grey", lw=0.6, alpha=0.5)
    plot_difference(early, rel, min(EARLY_STEPS, len(rel)), tol, judged)
    early.set_title(f"steps 1-{min(EARLY_STEPS, len(rel))}", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---- program -----------------------------------------------------------------


def parse_args():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("dump", metavar="DUMP_DIR", help="directory written by ./app/mnist --dump")
    p.add_argument("--precision", choices=PRECISIONS,
                   help="the build's CONFIG_PRECISION_* (default: the dump's, else fp32)")
    p.add_argument("--epochs", type=int, default=1,
                   help="epochs to train and compare (default 1; 0: every epoch the dump has)")
    p.add_argument("--png", help="plot the loss curves and their difference to this file")
    p.add_argument("--judge-steps", type=int,
                   help="steps of epoch 1 the verdict covers (0: the whole epoch; default per precision: "
                        + ", ".join(f"{k} {v.judge_steps}" for k, v in VERDICT.items()) + ")")
    p.add_argument("--tol", type=float,
                   help="relative tolerance of those steps' losses (default per precision: "
                        + ", ".join(f"{k} {v.tol:.0e}" for k, v in VERDICT.items()) + ")")
    p.add_argument("--mean-tol", type=float,
                   help="relative tolerance of epoch 1's mean loss (default per precision: "
                        + ", ".join(f"{k} {v.mean_tol:.0e}" for k, v in VERDICT.items()) + ")")
    p.add_argument("--backend", choices=("torch", "numpy"), default="torch")
    p.add_argument("--device", choices=("cuda", "cpu"), help="torch device (default: cuda when there is one)")
    p.add_argument("--data", help="dataset directory (default: the dump's data_dir)")
    args = p.parse_args()
    if args.epochs < 0 or (args.judge_steps or 0) < 0:
        p.error("--epochs and --judge-steps want a number >= 0")
    if any(t is not None and not t > 0 for t in (args.tol, args.mean_tol)):
        p.error("--tol and --mean-tol want a positive number")
    return args


def verdict_settings(args, precision):
    """The precision's Verdict, with what the command line set instead."""
    given = Verdict(args.judge_steps, args.tol, args.mean_tol)
    return Verdict(*(default if value is None else value for default, value in zip(VERDICT[precision], given)))


def resolve_precision(requested, meta, dump):
    """--precision, else the dump's, else fp32; a --precision the dump contradicts is refused, and so is
    a dump whose numerics are no one precision (null) without --precision."""
    recorded = meta.get("precision")
    if "precision" in meta and recorded is None and not requested:
        raise DataError(f"{dump}/meta.json: the run's numerics are no one precision (TF32 with some forward "
                        f"GEMMs on wgmma): give --precision")
    if recorded is not None and recorded not in PRECISIONS:
        raise DataError(f"{dump}/meta.json: precision '{recorded}' is none of {', '.join(PRECISIONS)}")
    if requested and recorded and requested != recorded:
        raise DataError(f"--precision {requested}, but {dump}/meta.json says the run computed in {recorded}")
    return requested or recorded or "fp32"


def make_trainers(args, meta, params, precision):
    """The trainer to judge, and PyTorch's mixed precision as an unjudged reference (or None)."""
    device = torch_device(args.device) if args.backend == "torch" else None
    images, labels = load_train_set(find_data_dir(meta.get("data_dir", "data/mnist"), args.data))
    images = set_digit_width(images, meta.get("digit_width", 0))
    x = normalise(images, meta["pixel_mean"], meta["pixel_std"])
    recipe = Recipe(meta)
    recipe.images = images
    if device is None:
        return NumpyTrainer(params, recipe, x, labels, precision), None
    return torch_trainers(device, params, recipe, x, labels, precision)


def train_reference(trainer, orders, refs, steps, batch):
    """PyTorch's mixed precision over the epochs, each epoch's mean loss printed beside the engine's."""
    losses = []
    for epoch, (order, ref) in enumerate(zip(orders, refs), start=1):
        losses.append(trainer.run_epoch(order, steps, batch, epoch - 1))
        mean, mean_ref, rel = mean_relative_difference(losses[-1], ref)
        print(f"  reference, epoch {epoch}: mean loss {mean:.6f} vs staticnn {mean_ref:.6f}, rel diff {rel:.1e} "
              f"({trainer.name})")
    return np.concatenate(losses)


def main():
    args = parse_args()
    try:
        meta = read_meta(args.dump)
        precision = resolve_precision(args.precision, meta, args.dump)
        params = read_params(args.dump, meta["dims"])
        available = dumped_epochs(args.dump)
        if available == 0:
            raise DataError(f"no losses-1.bin in {args.dump}")
        epochs = min(args.epochs or available, available)
        if epochs < args.epochs:
            print(f"{PROG}: the dump has the losses of {available} epoch(s): comparing {epochs}")
        steps, batch = meta["steps_per_epoch"], meta["batch"]
        refs = [read_float32(os.path.join(args.dump, f"losses-{e}.bin"), steps) for e in range(1, epochs + 1)]
        orders = [read_order(args.dump, e) for e in range(1, epochs + 1)]
        recipe = Recipe(meta)
        drawn = [check_draws(args.dump, e, meta, recipe.noise, recipe.distortion) for e in range(1, epochs + 1)]
        trainer, mixed = make_trainers(args, meta, params, precision)
    except DataError as e:
        sys.exit(f"{PROG}: error: {e}")
    settings = verdict_settings(args, precision)
    tol = settings.tol

    shape = "-".join(str(d) for d in meta["dims"])
    print(f"{PROG}: MLP {shape}, batch {batch}, {steps} steps per epoch, {Recipe(meta).text}; "
          f"staticnn ({meta.get('target', '?')}, {precision}) vs {trainer.name}")
    if any(drawn):
        kinds = [k for k, on in (("translations", recipe.noise.shift), ("distortions", recipe.distortion),
                                 ("dropout masks", recipe.noise.dropout)) if on]
        print(f"  draws: the engine's {', '.join(kinds)} of steps 1-{drawn[0]} of each epoch equal "
              "tools/lib/noise.py's, which the trainers use")
    ours, stats = [], []
    for epoch, (order, ref) in enumerate(zip(orders, refs), start=1):
        start = time.perf_counter()
        ours.append(trainer.run_epoch(order, steps, batch, epoch - 1))
        stats.append(summarise(relative_difference(ours[-1], ref), tol))
        print(f"  {describe(epoch, steps, stats[-1], tol)} [{time.perf_counter() - start:.1f} s]")
    reference = train_reference(mixed, orders, refs, steps, batch) if mixed else None

    judged = min(settings.judge_steps or steps, steps)
    if args.png:
        plot(args.png, meta, precision, np.concatenate(refs), (trainer.name, np.concatenate(ours)),
             (mixed.name, reference) if mixed else None, steps, judged, tol)
        print(f"  plot: {args.png}")

    verdict = summarise(relative_difference(ours[0][:judged], refs[0][:judged]), tol)
    # The epoch's mean loss is judged whole: trajectories that part at a ReLU
    # flip still train alike, and their means agree.
    mean_ours, mean_ref, mean_rel = mean_relative_difference(ours[0], refs[0])
    passed = verdict["max"] <= tol and mean_rel <= settings.mean_tol
    window = f"{steps} steps" if judged == steps else f"steps 1-{judged} of {steps}"
    print(f"parity ({precision}): epoch 1, {window}, max rel diff {verdict['max']:.1e}, "
          f"median {verdict['median']:.1e} (tol {tol:.0e}); epoch mean loss {mean_ours:.6f} vs {mean_ref:.6f}, "
          f"rel diff {mean_rel:.1e} (tol {settings.mean_tol:.0e}): {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
