#!/usr/bin/env python3
"""test_images.py DRIVER TMPDIR MNIST_IMAGES: the image decoders and the
digit recipe (data/image*.c, data/digit.c) through test_image_load.

Writes PNG, PGM and PPM files, from MNIST test digits where MNIST_IMAGES
(t10k-images-idx3-ubyte, raw or .gz) exists and synthetic ones, runs the
driver once over all the good files and once per malformed one, and checks:
the decoded gray image exactly against what the formats specify (libpng's
expansions, 16 bits scaled with rounding, Rec. 601 luma, alpha over white);
the digit exactly against ref_digit below, an independent rendering of
digit.h's recipe (weights as matrices, numpy), or against MNIST's own bytes;
errors by exit status 1, one line on stderr and the words it must contain.
Width normalisation (the driver's -w, snn_digits_set_width) against
hand-worked bars and, on the MNIST digits, byte for byte against
tools/lib/digit_width.py, the numpy copy the tools and tests use.
Prints one ok / not ok / skip line per case; exits 0."""
import gzip
import os
import struct
import subprocess
import sys
import zlib

import numpy as np

import imagefiles as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "lib"))
from digit_width import set_digit_width  # noqa: E402

DRIVER, TMP, MNIST_PATH = sys.argv[1:4]
INK_THRESHOLD, MIN_CONTRAST, BOX, SIDE, CENTRE = 32, 32, 20, 28, 14
rng = np.random.default_rng(20240601)


def say(verdict, name, why=""):
    print(f"{verdict} - images: {name}{': ' + why if why else ''}", flush=True)


# ---- what the files must decode to ---------------------------------------

def luma(rgb):
    rgb = np.asarray(rgb, np.int64)
    return (9798 * rgb[..., 0] + 19235 * rgb[..., 1] + 3735 * rgb[..., 2] + 16384) >> 15


def over_white(gray, alpha):
    gray, alpha = np.asarray(gray, np.int64), np.asarray(alpha, np.int64)
    return (gray * alpha + 255 * (255 - alpha) + 127) // 255


def to8(v, maxval):
    return (np.asarray(v, np.int64) * 255 + maxval // 2) // maxval


def ref_digit(gray):
    """digit.h's recipe, written apart from digit.c: the 28x28 bytes, or the
    start of the error message."""
    g = np.asarray(gray, np.int64)
    h, w = g.shape
    border = np.zeros(g.shape, bool)
    border[0, :] = border[-1, :] = border[:, 0] = border[:, -1] = True
    invert = g[border].sum() > 127 * border.sum()
    ink = 255 - g if invert else g
    if g.min() == g.max():
        return "no digit found (the image is uniform)"
    background = int(np.sort(ink[border])[(border.sum() - 1) // 2])
    contrast = int(ink.max()) - background
    if contrast < MIN_CONTRAST:
        return "no digit found (the strongest ink is"
    level = np.where(ink <= background, 0, np.minimum(255, ((ink - background) * 255 + contrast // 2) // contrast))
    ys, xs = np.nonzero(level > INK_THRESHOLD)
    x0, x1, y0, y1 = xs.min(), xs.max(), ys.min(), ys.max()
    fringe = -(-max(x1 - x0 + 1, y1 - y0 + 1) // BOX)
    for _ in range(fringe):
        if x0 > 0 and level[y0:y1 + 1, x0 - 1].any():
            x0 -= 1
    for _ in range(fringe):
        if x1 + 1 < w and level[y0:y1 + 1, x1 + 1].any():
            x1 += 1
    for _ in range(fringe):
        if y0 > 0 and level[y0 - 1, x0:x1 + 1].any():
            y0 -= 1
    for _ in range(fringe):
        if y1 + 1 < h and level[y1 + 1, x0:x1 + 1].any():
            y1 += 1
    box = level[y0:y1 + 1, x0:x1 + 1]
    bh, bw = box.shape
    longer = max(bw, bh)
    out_w, out_h = max(1, (2 * bw * BOX + longer) // (2 * longer)), max(1, (2 * bh * BOX + longer) // (2 * longer))

    def overlaps(n, m):  # (m, n): source pixel i spans [i m, (i+1) m), output pixel j [j n, (j+1) n)
        i, j = np.arange(n)[None, :], np.arange(m)[:, None]
        return np.maximum(np.minimum((i + 1) * m, (j + 1) * n) - np.maximum(i * m, j * n), 0)

    acc = overlaps(bh, out_h) @ box @ overlaps(bw, out_w).T
    scaled = (acc + bw * bh // 2) // (bw * bh)
    mass = int(scaled.sum())
    if mass == 0:
        return "no digit found (the ink of the"

    def place(moment, length):
        return min(max(-((mass - 2 * (CENTRE * mass - moment)) // (2 * mass)), 0), SIDE - length)  # ceil

    ox = place(int((scaled.sum(0) * np.arange(out_w)).sum()), out_w)
    oy = place(int((scaled.sum(1) * np.arange(out_h)).sum()), out_h)
    out = np.zeros((SIDE, SIDE), np.int64)
    out[oy:oy + out_h, ox:ox + out_w] = scaled
    return out


# ---- the cases -----------------------------------------------------------

good = []  # (name, file, check(gray, digit) -> why or "")
bad = []  # (name, file, fragments)


def write(filename, data):
    path = os.path.join(TMP, "in", filename)
    with open(path, "wb") as f:
        f.write(data)
    return path


def expect(name, filename, data, gray=None, digit=None, check=None):
    """gray: the exact decoded image; digit: the exact digit, or "ref" for
    ref_digit(gray); check: a function of (gray, digit) giving why it fails."""
    write(filename, data)

    def judge(got_gray, got_digit):
        if gray is not None:
            want = np.asarray(gray)
            if got_gray.shape != want.shape:
                return f"decoded {got_gray.shape[1]} x {got_gray.shape[0]}, expected {want.shape[1]} x {want.shape[0]}"
            if not np.array_equal(got_gray, want):
                n = int((got_gray != want).sum())
                return f"{n} decoded pixels differ (max by {int(np.abs(got_gray.astype(int) - want).max())})"
        want_digit = ref_digit(got_gray) if isinstance(digit, str) else digit
        if want_digit is not None:
            if isinstance(want_digit, str):
                return f"a digit came out where ref_digit says '{want_digit}'"
            if got_digit is None:
                return "no digit came out"
            if not np.array_equal(got_digit, want_digit):
                return f"{int((got_digit != want_digit).sum())} digit bytes differ from the expected"
        return check(got_gray, got_digit) if check else ""

    good.append((name, filename, judge))


def refuse(name, filename, data, *fragments):
    bad.append((name, write(filename, data) if data is not None else filename, fragments))


def read_pgm(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, w, h, maxval, rest = data.split(maxsplit=4)
    return np.frombuffer(rest, np.uint8).reshape(int(h), int(w))


def run_good():
    """One driver run over every good file. A file whose digit fails still
    has its decoded image checked; the digit's error counts where one is
    expected."""
    paths = [os.path.join(TMP, "in", f) for _, f, _ in good]
    r = subprocess.run([DRIVER, "-o", os.path.join(TMP, "out")] + paths, capture_output=True, text=True)
    errors = r.stderr.splitlines()
    for name, filename, judge in good:
        path = os.path.join(TMP, "in", filename)
        mine = [e for e in errors if e.startswith(f"mnist: error: {path}: ")]
        try:
            gray = read_pgm(os.path.join(TMP, "out", filename + ".gray"))
            digit = None
            if not mine:
                digit = np.fromfile(os.path.join(TMP, "out", filename + ".digit"), np.uint8).reshape(SIDE, SIDE)
        except (OSError, ValueError) as e:
            why = mine[0] if mine else f"no output (driver exit {r.returncode}): {e}"
        else:
            why = judge(gray, digit)
            if why and mine:
                why += f" ({mine[0]})"
        if name is not None:
            say("not ok" if why else "ok", name, why)
    unclaimed = [e for e in errors if not any(e.startswith(f"mnist: error: {p}: ") for p in paths)]
    if r.returncode not in (0, 1) or unclaimed:
        say("not ok", "the driver over the good files", f"exit {r.returncode}: {' | '.join(unclaimed)}")


def run_bad():
    for name, path, fragments in bad:
        r = subprocess.run([DRIVER, "-o", os.path.join(TMP, "out"), path], capture_output=True, text=True)
        lines = r.stderr.splitlines()
        why = ""
        if r.returncode != 1:
            why = f"exit {r.returncode}, expected 1"
        elif len(lines) != 1:
            why = f"{len(lines)} lines on stderr, expected one"
        else:
            for frag in ("mnist: error: " + path + ": ",) + fragments:
                if frag not in lines[0]:
                    why = f"message lacks '{frag}'"
                    break
        say("not ok" if why else "ok", name, why + (f": {' | '.join(lines)}" if why else ""))


# ---- synthetic images ----------------------------------------------------

def stroke_digit(h, w, light=True, ink=0, paper=255):
    """A '7' with anti-aliased edges, drawn 4x supersampled: paper with ink."""
    yy, xx = np.mgrid[0:4 * h, 0:4 * w] / 4.0
    bar = (abs(yy - 0.2 * h) < 0.06 * h) & (xx > 0.25 * w) & (xx < 0.75 * w)
    # the stem: from the bar's right end down to the lower left
    t = (yy - 0.2 * h) / (0.6 * h)
    stem = (t >= 0) & (t <= 1) & (abs(xx - (0.75 * w - t * 0.3 * w)) < 0.05 * w)
    cover = (bar | stem).reshape(h, 4, w, 4).mean(axis=(1, 3))
    return np.rint(paper + (ink - paper) * cover).astype(np.int64)


def synthetic_cases():
    g = rng.integers(0, 256, (23, 37))
    for depth in (1, 2, 4):
        v = rng.integers(0, 1 << depth, (23, 37))
        for il in (False, True):
            expect(f"PNG gray {depth}-bit{' interlaced' if il else ''}: samples widened exactly",
                   f"gray{depth}{'i' if il else ''}.png", F.png(v, F.GRAY, depth, interlace=il),
                   gray=v * (255 // ((1 << depth) - 1)))
    expect("PNG gray 8-bit", "gray8.png", F.png(g), gray=g)
    expect("PNG gray 8-bit, IDAT in 5 chunks", "gray8x5.png", F.png(g, idat_chunks=5), gray=g)
    expect("PNG gray 8-bit interlaced (Adam7, 37 x 23)", "gray8i.png", F.png(g, interlace=True), gray=g)
    g16 = rng.integers(0, 65536, (23, 37))
    expect("PNG gray 16-bit: scaled with rounding", "gray16.png", F.png(g16, F.GRAY, 16), gray=to8(g16, 65535))
    expect("PNG gray 16-bit interlaced", "gray16i.png", F.png(g16, F.GRAY, 16, interlace=True), gray=to8(g16, 65535))
    ga = rng.integers(0, 256, (23, 37, 2))
    expect("PNG gray + alpha 8-bit: over white", "ga8.png", F.png(ga, F.GRAY_ALPHA),
           gray=over_white(ga[..., 0], ga[..., 1]))
    ga16 = rng.integers(0, 65536, (23, 37, 2))
    expect("PNG gray + alpha 16-bit", "ga16.png", F.png(ga16, F.GRAY_ALPHA, 16),
           gray=over_white(to8(ga16[..., 0], 65535), to8(ga16[..., 1], 65535)))
    rgb = rng.integers(0, 256, (23, 37, 3))
    expect("PNG RGB 8-bit: Rec. 601 luma", "rgb8.png", F.png(rgb, F.RGB), gray=luma(rgb))
    expect("PNG RGB 8-bit interlaced", "rgb8i.png", F.png(rgb, F.RGB, interlace=True), gray=luma(rgb))
    gama = [(b"gAMA", struct.pack(">I", 45455)), (b"cHRM", struct.pack(">8I", 31270, 32900, 64000, 33000,
                                                                        30000, 60000, 15000, 6000))]
    expect("PNG RGB with gAMA and cHRM: the same gray (samples as stored)", "rgb8gama.png",
           F.png(rgb, F.RGB, extra_chunks=gama), gray=luma(rgb))
    rgb16 = rng.integers(0, 65536, (23, 37, 3))
    expect("PNG RGB 16-bit", "rgb16.png", F.png(rgb16, F.RGB, 16), gray=luma(to8(rgb16, 65535)))
    rgba = rng.integers(0, 256, (23, 37, 4))
    expect("PNG RGBA 8-bit: luma, then over white", "rgba8.png", F.png(rgba, F.RGBA),
           gray=over_white(luma(rgba), rgba[..., 3]))
    expect("PNG RGBA 8-bit interlaced", "rgba8i.png", F.png(rgba, F.RGBA, interlace=True),
           gray=over_white(luma(rgba), rgba[..., 3]))
    rgba16 = rng.integers(0, 65536, (23, 37, 4))
    expect("PNG RGBA 16-bit", "rgba16.png", F.png(rgba16, F.RGBA, 16),
           gray=over_white(luma(to8(rgba16, 65535)), to8(rgba16[..., 3], 65535)))
    key = g.copy()
    key[::3, ::2] = 77
    expect("PNG gray with a tRNS colour: that colour is white", "graytrns.png",
           F.png(key, trns=struct.pack(">H", 77)), gray=np.where(key == 77, 255, key))
    v2 = rng.integers(0, 4, (23, 37))
    expect("PNG gray 2-bit with a tRNS colour", "gray2trns.png", F.png(v2, F.GRAY, 2, trns=struct.pack(">H", 1)),
           gray=np.where(v2 == 1, 255, v2 * 85))
    krgb = rgb.copy()
    krgb[::2, ::3] = (10, 200, 30)
    expect("PNG RGB with a tRNS colour", "rgbtrns.png", F.png(krgb, F.RGB, trns=struct.pack(">HHH", 10, 200, 30)),
           gray=np.where((krgb == (10, 200, 30)).all(-1), 255, luma(krgb)))
    for depth in (1, 2, 4, 8):
        n = 1 << depth
        pal = rng.integers(0, 256, (n, 3))
        alpha = rng.integers(0, 256, n // 2 or 1)  # tRNS may be shorter than the palette
        idx = rng.integers(0, n, (23, 37))
        full_alpha = np.concatenate([alpha, np.full(n - len(alpha), 255)])
        expect(f"PNG palette {depth}-bit with tRNS", f"pal{depth}.png",
               F.png(idx, F.PALETTE, depth, palette=pal, trns=alpha.astype(np.uint8).tobytes()),
               gray=over_white(luma(pal[idx]), full_alpha[idx]))
    pal = rng.integers(0, 256, (16, 3))
    idx = rng.integers(0, 16, (23, 37))
    expect("PNG palette 4-bit interlaced", "pal4i.png", F.png(idx, F.PALETTE, 4, palette=pal, interlace=True),
           gray=luma(pal[idx]))
    bad_text = bytearray(F.png(g, extra_chunks=[(b"tEXt", b"Comment\0hello")]))
    bad_text[33 + 8 + 13] ^= 1  # the tEXt chunk's CRC: ancillary, dropped with a warning nobody prints
    expect("PNG with a bad CRC in an ancillary chunk decodes", "badtext.png", bytes(bad_text), gray=g)
    expect("PNG with its zlib stream's Adler-32 alone in the last IDAT chunk", "adler-alone.png",
           F.png(g, idat_tail=4), gray=g)
    expect("PNG with an empty IDAT chunk after the zlib stream's end", "empty-idat.png", F.png(g, extra_idat=b""),
           gray=g)

    # netpbm
    expect("PGM P5 8-bit", "p5.pgm", F.pnm(g), gray=g)
    expect("PGM P2 with comments", "p2.pgm", F.pnm(g, plain=True, comment="drawn by hand"), gray=g)
    expect("PGM P5 16-bit (maxval 65535)", "p5-16.pgm", F.pnm(g16, 65535), gray=to8(g16, 65535))
    expect("PGM P2 16-bit (maxval 65535)", "p2-16.pgm", F.pnm(g16, 65535, plain=True), gray=to8(g16, 65535))
    v1000 = rng.integers(0, 1001, (23, 37))
    expect("PGM P5 maxval 1000: scaled with rounding", "p5-1000.pgm", F.pnm(v1000, 1000), gray=to8(v1000, 1000))
    v3 = rng.integers(0, 4, (23, 37))
    expect("PGM P2 maxval 3", "p2-3.pgm", F.pnm(v3, 3, plain=True), gray=to8(v3, 3))
    expect("PGM P5 with a comment between width and height", "p5comment.pgm",
           b"P5 37#w\n#h next\n 23\t255\r" + g.astype(np.uint8).tobytes(), gray=g)
    expect("PGM P5 followed by whitespace", "p5trail.pgm", F.pnm(g) + b"\n\n  \t", gray=g)
    expect("PPM P6 8-bit: the same luma as PNG", "p6.ppm", F.pnm(rgb), gray=luma(rgb))
    expect("PPM P3", "p3.ppm", F.pnm(rgb, plain=True), gray=luma(rgb))
    expect("PPM P6 16-bit", "p6-16.ppm", F.pnm(rgb16, 65535), gray=luma(to8(rgb16, 65535)))

    # digits of every shape
    seven = stroke_digit(80, 100)
    expect("100 x 80 dark 7 on white: the recipe's bytes", "seven.png", F.png(seven), gray=seven, digit="ref")
    expect("100 x 80 same 7, white on black PGM: the same digit", "seven-dark.pgm", F.pnm(255 - seven),
           gray=255 - seven, digit=ref_digit(seven))
    seven4 = np.kron(seven, np.ones((4, 4), np.int64))  # test_images.sh sends it through a pipe too
    expect("400 x 320 same 7 in a 128 KB PGM: the recipe's bytes", "seven-x4.pgm", F.pnm(seven4), gray=seven4,
           digit="ref")
    blue = np.stack([seven, seven, np.full_like(seven, 255)], -1)  # blue ink on white
    expect("100 x 80 blue 7 on white RGB: the luma's digit", "seven-blue.png", F.png(blue, F.RGB),
           gray=luma(blue), digit="ref")
    noisy = np.clip(stroke_digit(80, 100, ink=110, paper=200) + rng.integers(-12, 13, (80, 100)), 0, 255)

    def centred(gray, digit):
        ys, xs = np.nonzero(digit)
        if max(ys.max() - ys.min(), xs.max() - xs.min()) + 1 > BOX + 2:
            return f"the ink spans {xs.max() - xs.min() + 1} x {ys.max() - ys.min() + 1}, noise widened the box"
        return ""
    expect("pencil 7 on noisy gray paper: the noise stays out of the box", "seven-noisy.pgm", F.pnm(noisy),
           gray=noisy, digit="ref", check=centred)
    bar = np.zeros((10, 3000), np.int64)
    bar[3:7, 500:2500] = 255
    expect("3000 x 10 bar: 20 x 1 at (4, 14)", "bar3000x10.pgm", F.pnm(bar), gray=bar,
           digit=np.pad(np.full((1, 20), 255), ((14, 13), (4, 4))))
    expect("10 x 3000 bar, dark on white PNG: the recipe's bytes", "bar10x3000.png", F.png(255 - bar.T),
           digit="ref")
    line = np.zeros((1, 50), np.int64)
    line[0, 5:30] = 200
    expect("1 x 50 line", "line1x50.pgm", F.pnm(line), gray=line, digit="ref")
    big = np.full((3000, 4000), 235, np.int64)
    big[500:2500, 1500:2500] = np.kron(stroke_digit(200, 100, ink=30, paper=235), np.ones((10, 10), np.int64))
    expect("4000 x 3000 photo-sized PNG", "big.png", F.png(big), gray=big, digit="ref")

    refuse("uniform image", "white.png", F.png(np.full((50, 50), 255)), "no digit found (the image is uniform)")
    refuse("1 x 1 image", "one.pgm", F.pnm(np.full((1, 1), 0)), "no digit found (the image is uniform)")
    faint = np.full((30, 30), 100)
    faint[10:20, 14:16] = 112
    refuse("low contrast", "faint.pgm", F.pnm(faint),
           "no digit found (the strongest ink is 12 levels from the background, 32 needed)")
    sparse = np.zeros((2, 12000), np.int64)
    sparse[0, 10] = sparse[1, 11990] = 255
    refuse("ink too thin to survive the scaling", "sparse.pgm", F.pnm(sparse), "no digit found (the ink of the",
           "is too thin to show at 20 x 1")


def mnist_cases(digits):
    """Each digit in six files; their digits are compared with each other
    once the driver has run: returns the function that does it."""
    n = len(digits)
    up = [np.kron(d, np.ones((4, 4), np.int64)) for d in digits]
    gray_palette = np.stack([np.arange(256)] * 3, -1)
    outputs = {}

    def keep(filename):
        def judge(gray, digit):
            outputs[filename] = (gray, digit)
            return ""
        return judge

    for i, d in enumerate(digits):
        inv = 255 - up[i]
        for suffix, data in ((".pgm", F.pnm(d)), ("-x4.pgm", F.pnm(up[i])),
                             ("-x4-inv-rgb.png", F.png(np.stack([inv] * 3, -1), F.RGB)),
                             ("-transparent.png", F.png(np.stack([0 * d, 0 * d, 0 * d, d], -1), F.RGBA)),
                             ("-16.png", F.png(d * 257, F.GRAY, 16)),
                             ("-pal-i.png", F.png(255 - d, F.PALETTE, 8, palette=255 - gray_palette,
                                                  interlace=True))):
            write(f"mnist{i}{suffix}", data)
            good.append((None, f"mnist{i}{suffix}", keep(f"mnist{i}{suffix}")))

    def verdicts():
        if len(outputs) != 6 * n:
            say("not ok", "MNIST cases", f"{6 * n - len(outputs)} of {6 * n} files gave no digit")
            return
        diffs = np.array([np.abs(outputs[f"mnist{i}.pgm"][1].astype(int) - d).mean() for i, d in enumerate(digits)])
        exact = int((diffs == 0).sum())
        worst = float(diffs.max())
        why = f"mean |difference| up to {worst:.3f} (at most 1 expected)" if worst > 1 else ""
        say("not ok" if why else "ok", f"{n} MNIST digits come back nearly unchanged ({exact} exactly, "
            f"mean |difference| {diffs.mean():.3f}, at most {worst:.3f})", why)

        def same(suffix, base, what):
            differ = [i for i in range(n) if not np.array_equal(outputs[f"mnist{i}{suffix}"][1],
                                                                outputs[f"mnist{i}{base}"][1])]
            say("not ok" if differ else "ok", f"{what} ({n} digits)",
                f"digits {differ[:10]} differ" if differ else "")
        same("-x4-inv-rgb.png", "-x4.pgm", "MNIST 4x, inverted, as RGB PNG: exactly the 4x gray PGM's digit")
        same("-x4.pgm", ".pgm", "MNIST 4x (nearest): exactly the 28 x 28's digit")
        same("-transparent.png", ".pgm", "MNIST as black ink on a transparent canvas: exactly the gray's digit")
        same("-16.png", ".pgm", "MNIST as 16-bit PNG: exactly the 8-bit's digit")
        same("-pal-i.png", ".pgm", "MNIST as an inverted palette, interlaced: exactly the gray's digit")
        inv_ok = all(np.array_equal(outputs[f"mnist{i}-x4-inv-rgb.png"][0], 255 - up[i]) for i in range(n))
        say("ok" if inv_ok else "not ok", "MNIST 4x inverted RGB PNG decodes to exactly 255 - v",
            "" if inv_ok else "decoded pixels differ")
    return verdicts


def malformed_cases():
    g = rng.integers(0, 256, (40, 50))
    p = F.png(g)
    idat = p.index(b"IDAT") - 4
    idat_len = struct.unpack(">I", p[idat:idat + 4])[0]
    refuse("empty file", "empty.png", b"", "empty file")
    refuse("a text file", "notes.txt", b"these are my digits\n", "not a PNG, PGM or PPM image")
    refuse("a JPEG", "photo.png", b"\xff\xd8\xff\xe0\0\x10JFIF\0", "not a PNG, PGM or PPM image (it looks like JPEG")
    refuse("PBM is not read", "bits.pbm", b"P4\n8 1\n\xff", "not a PNG, PGM or PPM image (it looks like PBM")
    refuse("truncated PNG (cut mid IDAT)", "cut-idat.png", p[:idat + 8 + idat_len // 2],
           "truncated PNG: the data ends inside the IDAT chunk")
    refuse("truncated PNG (cut in the signature)", "cut-sig.png", p[:6],
           "truncated PNG: the data ends inside the signature (6 bytes)")
    refuse("truncated PNG (no IEND)", "no-iend.png", p[:-12], "truncated PNG: the data ends before the IEND chunk")
    crc = bytearray(p)
    crc[idat + 8 + idat_len] ^= 0x55
    refuse("PNG with a corrupted IDAT CRC", "crc-idat.png", bytes(crc), "corrupt PNG (libpng: IDAT: CRC error)")
    crc = bytearray(p)
    crc[8 + 8 + 13] ^= 1
    refuse("PNG with a corrupted IHDR CRC", "crc-ihdr.png", bytes(crc), "corrupt PNG (libpng: IHDR: CRC error)")
    body = bytearray(zlib.compress(b"\0" * 51 * 40))
    body[2] ^= 0xff  # the first deflate block header, with a CRC made to match
    refuse("PNG with corrupt deflate data", "bad-zlib.png",
           p[:idat] + F.chunk(b"IDAT", bytes(body)) + F.chunk(b"IEND", b""), "corrupt PNG (libpng: IDAT: ")
    # The image data damaged under valid chunk CRCs: libpng finds these after
    # the last row, and calls some of them warnings.
    refuse("PNG whose zlib stream fails its Adler-32", "adler.png", F.png(g, adler_xor=1),
           "corrupt PNG (libpng: IDAT: incorrect data check)")
    refuse("PNG whose Adler-32 fails, alone in the last IDAT chunk", "adler-tail.png",
           F.png(g, adler_xor=1, idat_tail=4), "corrupt PNG (libpng: IDAT: incorrect data check)")
    refuse("PNG whose zlib stream holds a row more than the image", "too-much.png", F.png(g, raw_extra=bytes(51)),
           "corrupt PNG (libpng: IDAT: Too much image data)")
    refuse("PNG with bytes after the zlib stream in its IDAT chunk", "after-stream.png",
           F.png(g, after_stream=b"junk"), "corrupt PNG (libpng: IDAT: Extra compressed data)")
    extra = F.png(g, extra_idat=b"junk")
    refuse("PNG with an IDAT chunk after the zlib stream's end", "extra-idat.png", extra,
           f"corrupt PNG: an IDAT chunk at byte {len(extra) - 12 - 16}, after the end of the image data")
    refuse("PNG signature damaged (text-mode transfer)", "ascii.png", b"\x89PNG\n\x1a\n" + p[8:],
           "corrupt PNG (libpng: ")

    def ihdr(w, h, depth=8, ctype=0):
        return (b"\x89PNG\r\n\x1a\n" + F.chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0)) +
                F.chunk(b"IDAT", zlib.compress(b"\0" * 64)) + F.chunk(b"IEND", b""))
    refuse("PNG of 1000000 x 1000000 pixels", "huge.png", ihdr(1000000, 1000000),
           "the image is 1000000 x 1000000 pixels, too large (at most 16384 on a side and 67108864 pixels)")
    refuse("PNG 16385 pixels wide", "wide.png", ihdr(16385, 1), "the image is 16385 x 1 pixels, too large")
    refuse("PNG of 8192 x 8193 (over 64 Mpixels)", "many.png", ihdr(8192, 8193), "8192 x 8193 pixels, too large")
    refuse("PNG 3000000000 pixels wide (over 2^31)", "wider.png", ihdr(3000000000, 1), "corrupt PNG (libpng: ")
    refuse("PNG of width 0", "zero.png", ihdr(0, 5), "corrupt PNG (libpng: Invalid IHDR data: Image width is zero")
    refuse("PNG with bit depth 3", "depth3.png", ihdr(5, 5, 3), "corrupt PNG (libpng: Invalid IHDR data")
    refuse("PNG with too little image data", "short-data.png", ihdr(50, 50), "corrupt PNG (libpng: ")

    pgm = F.pnm(g)
    refuse("truncated PGM (P5)", "cut.pgm", pgm[:-100], "truncated PGM: the raster has 1900 of 2000 bytes")
    refuse("truncated PGM (P2)", "cut-p2.pgm", F.pnm(g, plain=True)[:-50],
           "truncated PGM: the raster ends after ")
    refuse("truncated PPM (P6)", "cut.ppm", F.pnm(np.stack([g] * 3, -1))[:-1],
           "truncated PPM: the raster has 5999 of 6000 bytes")
    refuse("truncated PGM header", "cut-header.pgm", b"P5\n50 40\n", "truncated PGM header: it ends before the maxval")
    refuse("PGM without a raster", "no-raster.pgm", b"P5\n50 40\n255", "truncated PGM: the file ends after the header")
    over = bytearray(F.pnm(np.minimum(g, 200), 200))
    over[-1 - 7] = 201
    refuse("PGM P5 sample above maxval", "over.pgm", bytes(over),
           "sample 201 at column 42, row 39 exceeds the maxval 200")
    refuse("PGM P2 sample above maxval", "over-p2.pgm", b"P2 2 2 1000 0 1 70000 3\n",
           "sample 70000 at column 0, row 1 exceeds the maxval 1000")
    refuse("PGM P5 16-bit sample above maxval", "over16.pgm", b"P5 1 1 300\n\x01\x2d",
           "sample 301 at column 0, row 0 exceeds the maxval 300")
    refuse("PGM maxval 0", "max0.pgm", b"P5 1 1 0\n\0", "bad PGM header: maxval 0 is out of range (1 to 65535)")
    refuse("PGM maxval 65536", "max65536.pgm", b"P2 1 1 65536 0",
           "bad PGM header: maxval 65536 is out of range (1 to 65535)")
    refuse("PGM with trailing data", "trailing.pgm", pgm + b"\nP5 1 1 255\n\0",
           f"unexpected data after the image at byte {len(pgm) + 1} (one image per file is read)")
    refuse("PGM with letters for a width", "letters.pgm", b"P5\nabc 4\n255\n",
           "bad PGM header: expected the width at byte 3, found 'a'")
    refuse("PGM without whitespace after the magic", "glued.pgm", b"P528 28 255\n",
           "bad PGM header: no whitespace before the width at byte 2")
    refuse("PGM with a 25-digit width", "digits.pgm", b"P5 1234567890123456789012345 1 255\n",
           "bad PGM header: the width 12345678901234567890... is too large")
    refuse("PGM 20000 pixels wide", "wide.pgm", b"P5 20000 1 255\n", "the image is 20000 x 1 pixels, too large")
    refuse("PGM P2 with a letter in the raster", "letter-p2.pgm", b"P2 2 1 255\n1 x\n",
           "bad PGM raster: expected a decimal sample at byte 13, found 'x'")
    refuse("PGM P5 with a comment after the maxval", "comment-raster.pgm", b"P5 1 1 255#c\n\0",
           "bad PGM header: expected one whitespace byte after the maxval, at byte 10")
    refuse("missing file", os.path.join(TMP, "in", "nowhere.png"), None, "cannot open: No such file or directory")
    refuse("a directory", os.path.join(TMP, "in"), None, "read error: Is a directory")


def hex_digits(args):
    """The driver's digits (28 x 28 arrays) for args, or the reason there are none."""
    r = subprocess.run([DRIVER, *args], capture_output=True, text=True)
    lines = r.stdout.splitlines()
    if r.returncode or len(lines) % 29:
        return None, f"driver exit {r.returncode}: {r.stderr.strip()[:200]}"
    return [np.array([[int(row[2 * x:2 * x + 2], 16) for x in range(SIDE)] for row in lines[i + 1:i + 29]])
            for i in range(0, len(lines), 29)], ""


def width_cases(mnist_files):
    """-w WIDTH: bars worked by hand, then the MNIST digits against numpy's copy at widths from 1 to 28."""
    bar = np.zeros((SIDE, SIDE), np.int64)
    bar[4:24, 12:16] = 255  # 4 x 20: the digit recipe leaves it where it is
    path = write("bar4.pgm", F.pnm(bar))
    for width, cols, value in ((8, range(10, 18), 255), (2, range(13, 15), 255), (4, range(12, 16), 255),
                               (3, range(13, 16), 255)):
        want = np.zeros((SIDE, SIDE), np.int64)
        for c in cols:
            want[4:24, c] = value
        got, why = hex_digits(["-w", str(width), path])
        why = why or ("" if np.array_equal(got[0], want) else f"columns {np.nonzero(got[0].any(axis=0))[0]}")
        say("not ok" if why else "ok", f"-w {width}: a 4-wide bar at columns 12-15 becomes columns {cols.start}-"
            f"{cols.stop - 1}, every pixel 255", why)
    ramp = np.zeros((SIDE, SIDE), np.int64)
    ramp[4:24, 14], ramp[4:24, 15] = 255, 1  # 2 wide: one pixel of (255 + 1) / 2, rounded half up
    got, why = hex_digits(["-w", "1", write("ramp.pgm", F.pnm(ramp))])
    why = why or ("" if got[0][4:24].tolist() == [[0] * 15 + [128] + [0] * 12] * 20 else str(got[0][10]))
    say("not ok" if why else "ok", "-w 1: columns of 255 and 1 make one column of 128 at the right of the two", why)
    if not mnist_files:
        return
    base, why = hex_digits(mnist_files)
    for width in (1, 6, 10, 14, 17, 20, 24, 28):
        got, why = (None, why) if why else hex_digits(["-w", str(width), *mnist_files])
        if not why:
            want = set_digit_width(np.array(base, np.uint8).reshape(len(base), -1), width)
            differ = [i for i in range(len(base)) if not np.array_equal(got[i].reshape(-1), want[i])]
            why = f"digits {differ[:10]} differ" if differ else ""
        say("not ok" if why else "ok", f"-w {width}: {len(mnist_files)} MNIST digits as "
            "tools/lib/digit_width.py scales them, byte for byte", why)


def driver_cases():
    """The driver's own contract: hex output, and going on after a failure."""
    g = np.zeros((30, 30), np.int64)
    g[5:25, 12:18] = 255
    a, b = write("hex.pgm", F.pnm(g)), write("flat.pgm", F.pnm(np.zeros((4, 4), np.int64)))
    r = subprocess.run([DRIVER, a, b, a], capture_output=True, text=True)
    lines = r.stdout.splitlines()
    want = ref_digit(g)
    hexes = ["".join(f"{v:02x}" for v in row) for row in want]
    why = ""
    if r.returncode != 1:
        why = f"exit {r.returncode}, expected 1 (one image failed)"
    elif len(r.stderr.splitlines()) != 1 or "flat.pgm: no digit found" not in r.stderr:
        why = f"stderr: {r.stderr.strip()}"
    elif lines[:29] != [f"{a}: 30 x 30"] + hexes or lines[29] != f"{b}: 4 x 4" or lines[30:] != lines[:29]:
        why = "stdout is not the header and 28 hex rows per image"
    say("not ok" if why else "ok", "driver: hex digits, and the next image after a failing one", why)


def main():
    os.makedirs(os.path.join(TMP, "in"))
    os.makedirs(os.path.join(TMP, "out"))
    synthetic_cases()
    verdicts = None
    path = MNIST_PATH if os.path.exists(MNIST_PATH) else MNIST_PATH + ".gz"
    if os.path.exists(path):
        with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
            data = f.read()
        digits = np.frombuffer(data, np.uint8, offset=16).reshape(-1, 28, 28)
        # every 97th test digit: all ten classes, a few writers' hands
        verdicts = mnist_cases([d.astype(np.int64) for d in digits[::97][:100]])
    else:
        say("skip", "MNIST digits", f"skipped: no {MNIST_PATH} (run 'make data')")
    malformed_cases()
    run_good()
    if verdicts:
        verdicts()
    run_bad()
    driver_cases()
    width_cases([os.path.join(TMP, "in", f"mnist{i}.pgm") for i in range(100)] if verdicts else [])


main()
