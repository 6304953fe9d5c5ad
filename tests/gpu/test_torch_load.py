#!/usr/bin/env python3
"""test_torch_load.py WEIGHTS DATA_DIR FP32_ACC DEVICE_ACC: a staticnn --save file
loaded by safetensors.torch.load_file into the PyTorch module its metadata
names, as the README tells a user to. In FP32 the module's test accuracy must
equal staticnn's --eval of the same file in FP32 (FP32_ACC, percent: the host
engine) to 0.01 point: the same weights, read the same way. In the precision
the metadata names (autocast for bf16/fp16, TF32 allowed for tf32) it must be
within 0.05 point of the device's --eval (DEVICE_ACC): rounded GEMMs summed in
another order flip a few borderline images. Prints one ok / not ok / skip line."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from torch_parity import read_idx  # noqa: E402

NAME = "safetensors.torch loads the weights into the documented nn.Sequential"


def main():
    path, data, fp32_acc, device_acc = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    try:
        import torch
        from safetensors import safe_open
        from safetensors.torch import load_file
    except ImportError as e:
        print(f"skip - {NAME}: skipped: {e}")
        return
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    dims = [int(d) for d in meta["shape"].split("-")]  # as the README builds it: no eval of file contents
    layers = []
    for n_in, n_out in zip(dims, dims[1:]):
        layers += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    said = "torch.nn.Sequential(" + ", ".join(
        f"torch.nn.Linear({a}, {b})" + (", torch.nn.ReLU()" if i + 2 < len(dims) else "")
        for i, (a, b) in enumerate(zip(dims, dims[1:]))) + ")"
    if said != meta["module"]:
        print(f"not ok - {NAME}: the metadata's module is {meta['module']}, its shape says {said}")
        return
    model.load_state_dict(load_file(path))  # strict: every name and shape must match
    images = read_idx(data, "t10k-images-idx3-ubyte", (10000, 28, 28)).reshape(10000, 784)
    labels = read_idx(data, "t10k-labels-idx1-ubyte", (10000,))
    x = (torch.tensor(images, dtype=torch.float32) / 255 - float(meta["pixel_mean"])) / float(meta["pixel_std"])
    y = torch.tensor(labels, dtype=torch.long)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, x, y = model.to(device), x.to(device), y.to(device)
    precision = meta.get("precision", "fp32")

    def accuracy(precision):
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp16_acc16": torch.float16}.get(precision)
        with torch.no_grad(), torch.autocast(device, dtype=dtype or torch.float32, enabled=dtype is not None):
            return 100 * (model(x).argmax(1) == y).float().mean().item()

    acc, fp32 = accuracy(precision), accuracy("fp32")
    ok = abs(fp32 - fp32_acc) <= 0.01 + 1e-9 and abs(acc - device_acc) <= 0.05 + 1e-9
    print(f"{'ok' if ok else 'not ok'} - {NAME} ({meta['module']}): test accuracy {fp32:.2f}% in fp32 "
          f"(staticnn host engine {fp32_acc:.2f}%), {acc:.2f}% in {precision} (staticnn on the device {device_acc:.2f}%)")


if __name__ == "__main__":
    main()
