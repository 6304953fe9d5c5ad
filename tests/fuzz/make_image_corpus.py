#!/usr/bin/env python3
"""Writes the seed corpus of tests/fuzz/fuzz_image.c into corpus_image/
(deterministic): tiny images of each format and PNG colour type."""
import base64
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "host"))
import imagefiles as F  # noqa: E402

digit = np.zeros((8, 6), np.int64)
digit[1:7, 2:4] = 255  # a "1"
digit[1, 1] = 128
rgb = np.stack([digit, 255 - digit, digit // 2], -1)
seeds = {
    "gray8.png": F.png(255 - digit),
    "gray1-interlaced.png": F.png(digit // 255, F.GRAY, 1, interlace=True),
    "gray16.png": F.png(digit * 257, F.GRAY, 16),
    "rgba8.png": F.png(np.concatenate([rgb, digit[..., None]], -1), F.RGBA),
    "palette4-trns.png": F.png(digit % 16, F.PALETTE, 4, palette=[(i * 17, 0, 255 - i * 17) for i in range(16)],
                               trns=bytes([0, 128])),
    "p5.pgm": F.pnm(digit),
    "p2-1000.pgm": F.pnm(digit * 1000 // 255, 1000, plain=True, comment="a one"),
    "p6.ppm": F.pnm(rgb),
    "p3.ppm": F.pnm(rgb, plain=True),
    # found by the fuzzer: a palette PNG whose tEXt chunk claims 1.9 GB (libpng allocated it whole); bad-*:
    # seeds that must be refused
    "bad-text-length-1.9g.png": base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAYAAAAIBAMAAAAo6JMLAAAAMHBMVEUAAP8RAO4iAN0zAMxEALtVAFaZ/2aI/3dxAHeZAGaqAFW7AETM"
        "ADHdACLuABH/AABthrbpAAAAAnRSTlMAUDYrThhzc3NzdEVYdHNzc3NoAA=="),
    # a zlib stream whose Adler-32 fails, alone in the last IDAT chunk (libpng warns, after the last row)
    "bad-adler32-last-idat.png": F.png(255 - digit, adler_xor=1, idat_tail=4),
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_image")
os.makedirs(out, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
