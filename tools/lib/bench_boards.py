"""The boards the benchmarks run by set name: tools/bench.py --configs SET, and the rows tools/roofline.py
prints when none is asked for."""

# the launch-bound boards: small models, where a step is a chain of short kernels
BENCHMARK = ["h100_128x1_b64", "h100_784x4_b64", "h100_128x3_b32", "h100_1024x3_b32", "h100_8192x3_b32"]
# wide layers, large batches (issue 23)
THROUGHPUT = ["h100_2048x3_b256", "h100_4096x4_b1024", "h100_16384x2_b2048", "h100_8192x3_b32"]
SETS = {"benchmark": BENCHMARK, "throughput": THROUGHPUT}
