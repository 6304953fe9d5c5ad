#!/usr/bin/env python3
"""tools/torch_parity.py without a GPU: its emulation of the engine's GEMM
numerics (the bf16, fp16 and tf32 roundings on known bit patterns, ties
included; the FP16 running sum), the precision it takes from the command line
or the dump, and, given the host build's mnist, the numpy backend end to end
on a short dump (and on one at --digit-width 12). Where PyTorch is installed, its rounding against numpy's.

    tests/host/test_torch_parity.py [HOST_MNIST]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("skip - torch_parity: skipped: no numpy for this python3")
    sys.exit(0)

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
import torch_parity as tp  # noqa: E402

SHORT_STEPS = 60


def verdict(ok, name, why=""):
    print(f"ok - torch_parity: {name}" if ok else f"not ok - torch_parity: {name}: {why}")


def floats(*bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def same_bits(got, want):
    """Bitwise equal, any NaN matching any NaN."""
    both_nan = np.isnan(got) & np.isnan(want)
    return bool(np.all(both_nan | (got.view(np.uint32) == want.view(np.uint32))))


def check_rounding(name, fn, cases):
    """cases: (input bits, expected output bits) pairs."""
    got = fn(floats(*(c[0] for c in cases)))
    want = floats(*(c[1] for c in cases))
    bad = [f"{c[0]:#010x} -> {g:#010x}, want {c[1]:#010x}" for c, g, w in zip(cases, got.view(np.uint32), want)
           if not same_bits(np.array([g]).view(np.float32), np.array([w]))]
    verdict(not bad, name, "; ".join(bad))


BF16_CASES = [
    (0x3F800000, 0x3F800000),  # 1.0 stays
    (0x3F807FFF, 0x3F800000),  # below half an ulp: down
    (0x3F808001, 0x3F810000),  # above half an ulp: up
    (0x3F808000, 0x3F800000),  # tie, even below: down
    (0x3F818000, 0x3F820000),  # tie, odd below: up to even
    (0xBF808000, 0xBF800000),  # negative tie: to even
    (0xBF818000, 0xBF820000),
    (0x3FFFFFFF, 0x40000000),  # carries into the exponent
    (0x7F7FFFFF, 0x7F800000),  # FLT_MAX rounds to Inf, as __float2bfloat16_rn
    (0x00018000, 0x00020000),  # subnormal tie, odd below: up
    (0x80000000, 0x80000000),  # -0 stays
    (0x7F800000, 0x7F800000),  # Inf stays
    (0xFF800000, 0xFF800000),
    (0x7FFFFFFF, 0x7FFFFFFF),  # NaN stays NaN (the bare carry would make it -0)
]
TF32_CASES = [
    (0x3F800FFF, 0x3F800000),  # below half an ulp (13 bits dropped): down
    (0x3F801000, 0x3F802000),  # tie, even below: away from zero (cvt.rna), not to even
    (0x3F803000, 0x3F804000),  # tie, odd below: away from zero
    (0xBF801000, 0xBF802000),  # negative tie: away from zero
    (0x3F801001, 0x3F802000),
    (0x3FFFF000, 0x40000000),  # carries into the exponent
    (0x7F800000, 0x7F800000),
    (0x7FFFF000, 0x7FFFF000),  # NaN stays NaN (the bare carry would make it -0)
]
FP16_CASES = [  # half: 10 mantissa bits, so ties at 0x1000 above 1.0
    (0x3F801000, 0x3F800000),  # 1 + 2^-11, tie, even below: down
    (0x3F803000, 0x3F804000),  # 1 + 3 * 2^-11, tie, odd below: up
    (0x477FE000, 0x477FE000),  # 65504, the largest half
    (0x477FF000, 0x7F800000),  # 65520, tie between 65504 (odd) and 65536: Inf
    (0x33800000, 0x33800000),  # 2^-24, the smallest subnormal half
    (0x33000000, 0x00000000),  # 2^-25, tie between 0 and 2^-24: to even, 0
    (0x33C00000, 0x34000000),  # 3 * 2^-25, tie between 2^-24 (odd) and 2^-23: 2^-23
    (0xB3000000, 0x80000000),  # -2^-25: -0
]


TF32_TRUNCATE_CASES = [  # float32 bits in, the bits wgmma computes with
    (0x3F800FFF, 0x3F800000),  # 1 + 4095 * 2^-23: below the rounding's tie, dropped
    (0x3F801FFF, 0x3F800000),  # 1 + 8191 * 2^-23: rounding would carry to 1 + 2^-10; truncation drops it
    (0xBF801FFF, 0xBF800000),  # negative: toward zero
    (0x7F7FFFFF, 0x7F7FE000),  # FLT_MAX stays finite
    (0x7F800000, 0x7F800000),  # Inf
    (0x00001FFF, 0x00000000),  # a subnormal below TF32's resolution: zero
]


def test_rounding():
    check_rounding("bf16 rounds to nearest even (ties, carries, FLT_MAX, NaN, Inf)", tp.round_bf16, BF16_CASES)
    check_rounding("tf32 rounds to nearest, ties away from zero, as cvt.rna", tp.round_tf32, TF32_CASES)
    check_rounding("fp16 rounds to nearest even (ties, overflow to Inf, subnormals)", tp.round_fp16, FP16_CASES)
    check_rounding("tf32 as wgmma reads it: truncated", tp.truncate_tf32, TF32_TRUNCATE_CASES)
    x = np.random.default_rng(1).standard_normal((37, 53)).astype(np.float32)
    ok = all(same_bits(tp.NUMPY_ROUNDING[p](x.T), tp.NUMPY_ROUNDING[p](x).T) for p in tp.PRECISIONS)
    verdict(ok, "rounding a transposed view rounds the same values")


def test_gemm():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((9, 21)).astype(np.float32), rng.standard_normal((21, 5)).astype(np.float32)
    verdict(same_bits(tp.numpy_gemm("fp32")(a, b), a @ b), "fp32 GEMM is the plain float32 matmul")
    want = tp.round_bf16(a) @ tp.round_bf16(b)
    verdict(same_bits(tp.numpy_gemm("bf16")(a, b), want), "bf16 GEMM: both operands rounded, float32 products")
    fwd, bwd = tp.numpy_gemm("tf32_wgmma", forward=True)(a, b), tp.numpy_gemm("tf32_wgmma")(a, b)
    ok = (same_bits(fwd, tp.truncate_tf32(a) @ tp.truncate_tf32(b))
          and same_bits(bwd, tp.round_tf32(a) @ tp.round_tf32(b)) and not same_bits(fwd, bwd))
    verdict(ok, "tf32_wgmma: forward GEMMs truncate their operands, backward ones round them")

    # 2048 + seven 1s: the first k chunk sums to 2055 in float32, which rounds to 2056 in half (a tie, spacing
    # 2); the second chunk adds 8 exactly. An FP16 sum rounded after every product would stay at 2048, a
    # float32 one reach 2063.
    a = np.ones((1, 16), dtype=np.float32)
    b = np.ones((16, 1), dtype=np.float32)
    b[0, 0] = 2048
    got = float(tp.numpy_gemm("fp16_acc16")(a, b)[0, 0])
    verdict(got == 2064, "fp16_acc16 rounds its FP16 sum after each k chunk of 8", f"{got}, want 2064")
    a, b = rng.integers(-3, 4, (6, 13)).astype(np.float32), rng.integers(-3, 4, (13, 7)).astype(np.float32)
    verdict(same_bits(tp.matmul_acc16(a, b), a @ b), "fp16_acc16 with k not a multiple of 8 (exact small integers)")


def test_precision_choice():
    meta = {"precision": "bf16"}
    ok = (tp.resolve_precision(None, {}, "d") == "fp32" and tp.resolve_precision("tf32", {}, "d") == "tf32"
          and tp.resolve_precision(None, meta, "d") == "bf16" and tp.resolve_precision("bf16", meta, "d") == "bf16")
    ok = ok and tp.resolve_precision("tf32", {"precision": None}, "d") == "tf32"
    verdict(ok, "precision: --precision, else the dump's, else fp32")
    for requested, recorded, name, words in (
            ("fp16", "bf16", "a --precision the dump contradicts is refused", "--precision fp16, but d/meta.json"),
            (None, "fp8", "a dump's unknown precision is refused", "precision 'fp8' is none of"),
            (None, None, "a dump of no one precision wants --precision", "give --precision")):
        try:
            tp.resolve_precision(requested, {"precision": recorded}, "d")
            verdict(False, name, "accepted")
        except tp.DataError as e:
            verdict(words in str(e), name, str(e))


def test_torch():
    try:
        import torch
    except ImportError:
        print("skip - torch_parity: the torch backend against the numpy one: skipped: no PyTorch")
        return
    test_torch_rounding(torch)
    test_torch_trainer(torch)
    test_torch_recipes(torch)


def test_torch_rounding(torch):
    cases = BF16_CASES + TF32_CASES + FP16_CASES
    random = np.random.default_rng(3).standard_normal(4096, dtype=np.float32)
    x = np.concatenate([floats(*(c[0] for c in cases)), random])
    bad = [p for p in tp.PRECISIONS
           if not same_bits(tp.torch_rounding(torch, p)(torch.from_numpy(x)).numpy(), tp.NUMPY_ROUNDING[p](x))]
    verdict(not bad, "PyTorch's rounding is numpy's, bit for bit", f"differs in {bad}")
    rng = np.random.default_rng(4)
    a = tp.round_fp16(rng.standard_normal((8, 21), dtype=np.float32) / 2)
    b = tp.round_fp16(rng.standard_normal((21, 6), dtype=np.float32) / 2)
    # a chunk's float32 sum may differ in its last bit between the two, and then round to the other half: a
    # few ulps of the running sums (below 8 here, ulp 2^-8) apart at most
    error = np.abs(tp.torch_matmul_acc16(torch, torch.from_numpy(a), torch.from_numpy(b)).numpy()
                   - tp.matmul_acc16(a, b)).max()
    verdict(error <= 4 * 2**-8, "PyTorch's FP16 running sum is numpy's", f"{error} apart")


def test_torch_trainer(torch):
    """A few steps of a small MLP in each precision, torch on the CPU against numpy: the autograd Function's
    GEMMs, gradients and update (a rounding flip between the two moves the loss by far less than 1e-3)."""
    rng = np.random.default_rng(5)
    dims = (12, 7, 3)
    params = [(rng.standard_normal((o, i), dtype=np.float32) / 2, rng.standard_normal(o, dtype=np.float32) / 10)
              for i, o in zip(dims[:-1], dims[1:])]
    x, y = rng.standard_normal((40, dims[0]), dtype=np.float32), rng.integers(0, dims[-1], 40)
    order, steps, batch = rng.permutation(40), 4, 10
    sgd = tp.Recipe({"lr": 0.1, "momentum": 0.9, "steps_per_epoch": steps})
    for p in tp.PRECISIONS:
        ours = tp.NumpyTrainer(params, sgd, x, y, p).run_epoch(order, steps, batch, 0)
        judged, mixed = tp.torch_trainers("cpu", params, sgd, x, y, p)
        rel = tp.relative_difference(judged.run_epoch(order, steps, batch, 0), ours.astype(np.float64))
        verdict(rel.max() < 1e-3, f"torch backend in {p}: {steps} steps as numpy's", rel)
        if p == "bf16":
            mixed_losses = mixed.run_epoch(order, steps, batch, 0)
            verdict(np.all(np.isfinite(mixed_losses)) and abs(mixed_losses[0] / ours[0] - 1) < 0.05,
                    "the autocast reference trains from the same weights", mixed_losses)


RECIPES = {  # meta.json's recipe fields, as app/mnist writes them
    "SGD, Nesterov, decoupled decay, warm-up and cosine, smoothing":
        {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01, "schedule": "cosine",
         "lr_warmup": 3, "lr_final": 0.1, "label_smoothing": 0.1},
    "AdamW, decay, one-cycle": {"lr": 0.01, "momentum": 0.0, "optimizer": "adamw", "weight_decay": 0.05,
                                "schedule": "linear", "lr_warmup": 2},
    "SGD without momentum, step decay": {"lr": 0.1, "momentum": 0.0, "schedule": "step", "lr_gamma": 0.5,
                                         "lr_step_epochs": 1},
}


def test_torch_recipes(torch):
    """Each recipe in PyTorch's own optimizers, LambdaLR and label_smoothing (fp32, CPU) against the numpy
    trainer, which follows kernels/optim.h: 12 steps over 3 epochs within 1e-5."""
    rng = np.random.default_rng(7)
    dims = (12, 7, 3)
    params = [(rng.standard_normal((o, i), dtype=np.float32) / 2, rng.standard_normal(o, dtype=np.float32) / 10)
              for i, o in zip(dims[:-1], dims[1:])]
    x, y = rng.standard_normal((40, dims[0]), dtype=np.float32), rng.integers(0, dims[-1], 40)
    steps, batch = 4, 10
    for name, fields in RECIPES.items():
        recipe = tp.Recipe(dict(fields, steps_per_epoch=steps, epochs=3))
        ours, theirs = tp.NumpyTrainer(params, recipe, x, y, "fp32"), tp.torch_trainers("cpu", params, recipe, x, y,
                                                                                         "fp32")[0]
        orders = [rng.permutation(40) for _ in range(3)]
        a = np.concatenate([ours.run_epoch(o, steps, batch, e) for e, o in enumerate(orders)])
        b = np.concatenate([theirs.run_epoch(o, steps, batch, e) for e, o in enumerate(orders)])
        rel = tp.relative_difference(b, a.astype(np.float64))
        verdict(rel.max() < 1e-5, f"PyTorch's {name}: 12 steps as the numpy trainer's", rel)


def test_schedule():
    """Recipe.factor at chosen steps, from the formulas of nn/Kconfig's help."""
    r = tp.Recipe({"lr": 1.0, "momentum": 0.0, "steps_per_epoch": 10, "epochs": 10, "schedule": "cosine",
                   "lr_warmup": 10, "lr_final": 0.2})
    want = {0: 0.1, 9: 1.0, 10: 1.0, 55: 0.6, 99: 0.2 + 0.8 * (1 + np.cos(np.pi * 89 / 90)) / 2}
    got = {t: r.factor(t) for t in want}
    verdict(all(abs(got[t] - want[t]) < 1e-12 for t in want), "warm-up and cosine factors at chosen steps", got)
    r = tp.Recipe({"lr": 1.0, "momentum": 0.0, "steps_per_epoch": 10, "epochs": 6, "schedule": "step",
                   "lr_gamma": 0.5, "lr_step_epochs": 2})
    got = [r.factor(t) for t in (0, 19, 20, 39, 40, 59)]
    verdict(got == [1, 1, 0.5, 0.5, 0.25, 0.25], "step decay halves every 2 epochs", got)


def parity(*args):
    return subprocess.run([sys.executable, os.path.join(TOOLS, "torch_parity.py"), *args],
                          capture_output=True, text=True)


def test_end_to_end(mnist, tmp):
    """The numpy backend on a short host dump; the refusals of a dump that contradicts --precision."""
    dump = os.path.join(tmp, "dump")
    run = subprocess.run([mnist, "--epochs", "1", "--max-steps", str(SHORT_STEPS), "--dump", dump],
                         capture_output=True, text=True)
    if run.returncode != 0:
        verdict(False, "host dump for the numpy backend", run.stdout[-300:] + run.stderr[-300:])
        return
    png = os.path.join(tmp, "parity.png")
    out = parity(dump, "--backend", "numpy", "--judge-steps", "0", "--png", png)
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr
    verdict(out.returncode == 0 and last.startswith("parity (fp32):") and last.endswith("PASS")
            and os.path.getsize(png) > 0,
            f"numpy backend on a {SHORT_STEPS}-step host dump: PASS and a plot", last)

    with open(os.path.join(dump, "meta.json")) as f:
        meta = json.load(f)
    verdict(meta.get("precision") == "fp32", "the host dump records its precision, fp32", str(meta))

    relabelled = os.path.join(tmp, "dump-unset")
    shutil.copytree(dump, relabelled)
    with open(os.path.join(relabelled, "meta.json"), "w") as f:
        json.dump({k: v for k, v in meta.items() if k != "precision"}, f)
    out = parity(relabelled, "--backend", "numpy", "--precision", "bf16")
    lines = out.stdout.strip().splitlines() or [""]
    verdict(tp.NUMERICS["bf16"] in lines[0] and lines[-1].startswith("parity (bf16):")
            and f"(tol {tp.VERDICT['bf16'].tol:.0e})" in lines[-1],
            "--precision bf16 trains with bf16 GEMMs and judges with its tolerance", out.stdout + out.stderr)

    for recorded, args, words in (("bf16", ["--precision", "fp32"], "but"), ("fp8", [], "is none of")):
        bad = os.path.join(tmp, f"dump-{recorded}")
        shutil.copytree(dump, bad)
        with open(os.path.join(bad, "meta.json"), "w") as f:
            json.dump(dict(meta, precision=recorded), f)
        out = parity(bad, "--backend", "numpy", *args)
        lines = out.stderr.strip().splitlines()
        verdict(out.returncode != 0 and len(lines) == 1 and lines[0].startswith("torch_parity: error:")
                and words in lines[0], f"a dump of precision {recorded} with {args or 'no option'}: one error line",
                out.stderr or out.stdout)


def test_digit_width(mnist, tmp):
    """A --digit-width run's dump: numpy scales the digits as the engine did (PASS), and without the width it
    would not (FAIL): the width reaches the comparison."""
    dump = os.path.join(tmp, "dump-w12")
    run = subprocess.run([mnist, "--epochs", "1", "--max-steps", str(SHORT_STEPS), "--digit-width", "12", "--dump",
                          dump], capture_output=True, text=True)
    if run.returncode != 0:
        verdict(False, "host dump at --digit-width 12", run.stdout[-300:] + run.stderr[-300:])
        return
    with open(os.path.join(dump, "meta.json")) as f:
        meta = json.load(f)
    out = parity(dump, "--backend", "numpy", "--judge-steps", "0")
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr
    unscaled = os.path.join(tmp, "dump-w12-as-read")
    shutil.copytree(dump, unscaled)
    with open(os.path.join(unscaled, "meta.json"), "w") as f:
        json.dump(dict(meta, digit_width=0), f)
    wrong = parity(unscaled, "--backend", "numpy", "--judge-steps", "0")
    wrong_last = wrong.stdout.strip().splitlines()[-1] if wrong.stdout.strip() else wrong.stderr
    verdict(meta.get("digit_width") == 12 and out.returncode == 0 and last.endswith("PASS") and
            wrong_last.endswith("FAIL"), f"numpy backend on a {SHORT_STEPS}-step --digit-width 12 dump: PASS; "
            "the same dump read as if at the digits' own width: FAIL", f"{last} / {wrong_last}")


test_rounding()
test_schedule()
test_gemm()
test_precision_choice()
test_torch()
if len(sys.argv) > 1:
    with tempfile.TemporaryDirectory() as tmp:
        test_end_to_end(sys.argv[1], tmp)
        test_digit_width(sys.argv[1], tmp)
