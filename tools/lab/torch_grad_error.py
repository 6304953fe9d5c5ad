#!/usr/bin/env python3
"""How far one step's gradients under PyTorch's own mixed precision lie from
its FP32 step, per layer: the reference figure for the free-running lines of
tests/gpu/test_step.c, which measure the same for our GPU step.

    tools/lab/torch_grad_error.py [--hidden-layers 4] [--width 784] [--batch 64]
                                  [--dtype bf16|fp16] [--seed 2024] [--device cuda|cpu]

The net and batch are test_step.c's kind, not its values: PyTorch's
nn.Linear initialisation, ReLU between layers, mean cross-entropy; random
pixels normalised as the engine does ((p/255 - 0.1307)/0.3081) and random
labels. FP32 with TF32 off against torch.autocast to --dtype (FP32 master
weights). Prints the relative L2 error ||g_mixed - g_fp32|| / ||g_fp32|| of
each layer's weight and bias gradient."""
import argparse

import torch


def gradients(model, x, y, dtype):
    model.zero_grad()
    with torch.autocast(x.device.type, dtype=dtype, enabled=dtype is not None):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hidden-layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=784)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(a.seed)
    dims = [784] + [a.width] * a.hidden_layers + [10]
    layers = []
    for i in range(len(dims) - 1):
        layers += [torch.nn.Linear(dims[i], dims[i + 1])] + ([torch.nn.ReLU()] if i + 2 < len(dims) else [])
    model = torch.nn.Sequential(*layers).to(a.device)
    pixels = torch.randint(0, 256, (a.batch, 784), device=a.device, dtype=torch.float32)
    x = (pixels / 255 - 0.1307) / 0.3081
    y = torch.randint(0, 10, (a.batch,), device=a.device)
    ref = gradients(model, x, y, None)
    mixed = gradients(model, x, y, {"bf16": torch.bfloat16, "fp16": torch.float16}[a.dtype])
    print(f"# PyTorch {torch.__version__}, {a.device}, {'-'.join(map(str, dims))}, batch {a.batch}, "
          f"autocast {a.dtype} against FP32")
    for l in range(len(dims) - 1):
        err = [((m - r).norm() / r.norm()).item() for m, r in zip(mixed[2 * l:2 * l + 2], ref[2 * l:2 * l + 2])]
        print(f"layer {l}: weight gradient {err[0]:.2e}, bias gradient {err[1]:.2e}")


if __name__ == "__main__":
    main()
