#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/fuzz_idx.c into corpus_idx/ (deterministic)."""
import gzip, os, struct

images = struct.pack(">IIII", 0x803, 2, 28, 28) + bytes(i * 7 % 256 for i in range(2 * 28 * 28))
labels = struct.pack(">II", 0x801, 2) + bytes([3, 7])
seeds = {
    "images-2x28x28": images,
    "labels-2": labels,
    "images-2x28x28.gz": gzip.compress(images, mtime=0),
    "images-truncated": images[:100],
    "labels-bad-magic": struct.pack(">II", 0x802, 2) + bytes([3, 7]),
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_idx")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
