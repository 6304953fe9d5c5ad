#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/fuzz_idx.c into corpus_idx/ (deterministic):
raw files, and gzip files ending every way the reader tells apart."""
import gzip, os, struct

images = struct.pack(">IIII", 0x803, 2, 28, 28) + bytes(i * 7 % 256 for i in range(2 * 28 * 28))
labels = struct.pack(">II", 0x801, 2) + bytes([3, 7])


def gz(data):
    return gzip.compress(data, mtime=0)


seeds = {
    "images-2x28x28": images,
    "labels-2": labels,
    "images-2x28x28.gz": gz(images),
    "images-truncated": images[:100],
    "labels-bad-magic": struct.pack(">II", 0x802, 2) + bytes([3, 7]),
    # gzip ends: whole, cut in the trailer and in the deflate data, more
    # members, and what may not follow a member
    "labels-2.gz": gz(labels),
    "labels-2-no-length.gz": gz(labels)[:-4],
    "images-2x28x28-cut.gz": gz(images)[:-9],
    "labels-2-two-members.gz": gz(labels[:5]) + gz(labels[5:]),
    "labels-2-empty-member.gz": gz(labels) + gz(b""),
    "labels-2-trailing-member.gz": gz(labels) + gz(b"xyz"),
    "labels-2-junk.gz": gz(labels) + b"junk",
    "labels-2-magic-only.gz": gz(labels) + b"\x1f\x8b",
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_idx")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
