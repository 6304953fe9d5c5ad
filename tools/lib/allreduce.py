"""When data-parallel training pays: the time to all-reduce a step's gradients, from a measured table, and the
speed-up it leaves of a step on N GPUs at the same global batch (tools/roofline.py's columns).

The table: BF16 all-reduce between 2 x H200 of one host (NVLink NV18, NCCL 2.28.9 through PyTorch, one
process a GPU; issue 44), bytes -> microseconds, the smallest eager (its launch included). Between its
points the time is linear in the bytes; past the last, at the last segment's rate; below the first, the
first's. For N GPUs a ring all-reduce moves 2(N - 1)/N of the bytes a GPU holds over each GPU's links, 1x
for two: the N-GPU time is read at the bytes scaled by (N - 1) / (N / 2), an extrapolation above two GPUs
that no measurement has checked yet.

A step on N GPUs: each computes 1/N of the batch, T1 / N (an upper bound on the gain: smaller per-GPU
batches use a GPU less well), then the gradients are all-reduced. Without overlap the step is T1 / N + AR;
with the all-reduce overlapped by the backward pass (about 2/3 of a step: the input and weight gradients
against the forward's one GEMM a layer), only what exceeds the backward's time shows:
T1 / N + max(0, AR - 2/3 T1 / N).

The engine's own data-parallel step (arch/cuda/dp.cu) was slower than either: on 4 x H200 its all-reduce did
not overlap the backward pass, and every rank updated every parameter in a pass of its own after the last
all-reduce (the one-GPU step fuses the update into the weight gradient's epilogue). engine_speedup models
that, T1 / (T1 / N + AR + the update pass), within 11 % of the measured steps (docs/PERF.md v30). Counting
both whole is what v44 measured: removed from the 2-GPU step in turn, each took nearly its whole time off it
(the GPUs run at their power limit, so running beside the GEMMs hides nothing). Since v45 the BF16 gradients
are written by the weight gradient's GEMM, without a copy to BF16 on the communication stream, and part of
the all-reduce and the update hides after all: on 2 H200s the model predicts 0.90x, 0.76x, 1.50x, 1.50x and
1.53x where 1.18x, 0.80x, 1.75x, 1.73x and 1.67x were measured (784-16384x2 b2048, 784-4096x4 b1024, then
784-8192x3, 784-16384x2 and 784-4096x4 at batch 8192). Pessimistic by up to 24 %, not refitted: five boards
do not say how much hides where (the overhead measured is 0.44-0.91 of the two counted whole)."""

# (bytes, us) of one BF16 all-reduce on 2 x H200
MEASURED_2GPU = [(4096, 39.0), (1 << 20, 55.0), (16 << 20, 75.0), (64 << 20, 249.0), (256 << 20, 893.0)]
BACKWARD_SHARE = 2.0 / 3.0
REDUCE_BYTES = {"bf16": 2, "fp32": 4}  # a gradient element as all-reduced


def allreduce_us(nbytes, gpus, table=MEASURED_2GPU):
    """Microseconds to all-reduce nbytes over `gpus` GPUs of one host (1: none)."""
    if gpus < 2:
        return 0.0
    b = nbytes * (gpus - 1) / (gpus / 2)
    if b <= table[0][0]:
        return table[0][1]
    for (b0, t0), (b1, t1) in zip(table, table[1:]):
        if b <= b1:
            return t0 + (t1 - t0) * (b - b0) / (b1 - b0)
    (b0, t0), (b1, t1) = table[-2:]
    return t1 + (t1 - t0) * (b - b1) / (b1 - b0)


def speedup(step_us, grad_bytes, gpus):
    """(without overlap, overlapped): the predicted speed-up of a step of step_us on one GPU, on `gpus`."""
    share = step_us / gpus
    ar = allreduce_us(grad_bytes, gpus)
    return step_us / (share + ar), step_us / (share + max(0.0, ar - BACKWARD_SHARE * share))


def update_us(params, reduce, moments, hbm_tbps=3.0):
    """Microseconds of the data-parallel update pass over every parameter at HBM's rate: its gradient as
    all-reduced, the parameter and each moment read and written, the 16-bit twin written. (In BF16 the weight
    gradient's GEMM writes what is all-reduced: no copy.)"""
    per = REDUCE_BYTES[reduce] + 8 + 8 * moments + 2
    return params * per / (hbm_tbps * 1e6)


def engine_speedup(step_us, grad_bytes, gpus, update):
    """The speed-up of the engine's data-parallel step, its all-reduce and update pass counted whole."""
    return step_us / (step_us / gpus + allreduce_us(grad_bytes, gpus) + update)
