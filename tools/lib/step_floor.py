"""The hardware floor of a training step and epoch, from the model's shape alone: what tools/roofline.py
prints, what tools/bench.py puts beside each epoch, and the parameter count tools/make/tune.py weighs a
resident fused step by.

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
    backward's chain, the update) at the peaks' phase_us each.
Steps per epoch: floor(60000 / B), the last partial batch dropped.
"""

TRAIN_SAMPLES = 60000
PRECISIONS = {"bf16": 2, "fp16": 2, "fp16_acc16": 2, "tf32": 4, "fp32": 4}  # bytes of a GEMM operand
# H100's L2 is two partitions, and weights that every SM reads are kept in
# both, so half of it holds the state (the 784x4 fits, 1024x3 not).
L2_USABLE = 0.5
# The H100's figures (tools/roofline.py's defaults).
DEFAULT_PEAKS = {"peak_tflops": 790.0, "hbm_tbps": 3.0, "l2_tbps": 6.0, "l2_mb": 50.0, "phase_us": 0.5}
# Per GPU (tools/roofline.py --gpu): the H200 is the H100's chip with faster HBM and a larger L2, as measured
# on the lent machines (a device-to-device copy at 4.3 TB/s, 60 MB of L2; docs/PERF.md v48).
GPU_PEAKS = {"h100": DEFAULT_PEAKS, "h200": dict(DEFAULT_PEAKS, hbm_tbps=4.3, l2_mb=60.0)}


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
    """A board's layer widths, [784, hidden..., 10], from its Kconfig values (sym: a symbol's name -> str):
    hidden layer k's NN_HIDDEN_WIDTH_k, or where that is 0 NN_HIDDEN_WIDTH."""
    layers = range(1, int(sym("NN_HIDDEN_LAYERS")) + 1)
    return [784] + [int(sym(f"NN_HIDDEN_WIDTH_{k}")) or int(sym("NN_HIDDEN_WIDTH")) for k in layers] + [10]


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
