"""PNG, PGM and PPM files as bytes, from numpy arrays, for test_images.py and
the image fuzz corpus. Only numpy, zlib and struct: every PNG colour type and
bit depth, palettes, tRNS, Adam7 interlacing, IDAT split into chunks; and
damaged image data under valid chunk CRCs (a bad Adler-32, data past the
image's end)."""
import struct
import zlib

import numpy as np

GRAY, RGB, PALETTE, GRAY_ALPHA, RGBA = 0, 2, 3, 4, 6
CHANNELS = {GRAY: 1, RGB: 3, PALETTE: 1, GRAY_ALPHA: 2, RGBA: 4}
# Adam7 passes: x0, y0, dx, dy
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def scanlines(samples, depth):
    """Rows of samples (h, w*channels) as filter-type-0 scanlines."""
    h = samples.shape[0]
    if depth == 16:
        rows = samples.astype(">u2").view(np.uint8).reshape(h, -1)
    elif depth == 8:
        rows = samples.astype(np.uint8)
    else:  # 1, 2, 4 bits: packed, leftmost sample in the high bits
        per = 8 // depth
        w = samples.shape[1]
        padded = np.zeros((h, -(-w // per) * per), np.uint16)
        padded[:, :w] = samples
        shifts = np.arange(per - 1, -1, -1) * depth
        rows = (padded.reshape(h, -1, per) << shifts).sum(axis=2).astype(np.uint8)
    return b"".join(b"\0" + r.tobytes() for r in rows)


def png(pixels, color_type=GRAY, depth=8, palette=None, trns=None, interlace=False, idat_chunks=1,
        extra_chunks=(), idat_tail=0, adler_xor=0, raw_extra=b"", after_stream=b"", extra_idat=None):
    """pixels: (h, w) for gray and palette indices, else (h, w, channels).
    idat_tail: the zlib stream's last bytes in an IDAT chunk of their own.
    Damage, every chunk CRC still valid: adler_xor flips bits of the zlib
    stream's Adler-32 (its last byte); raw_extra is filtered data past the
    image's rows, inside the stream; after_stream, bytes after the stream
    in its last IDAT chunk; extra_idat, an IDAT chunk after the stream's."""
    pixels = np.asarray(pixels)
    h, w = pixels.shape[:2]
    samples = pixels.reshape(h, w * CHANNELS[color_type])
    if interlace:
        raw = b""
        for x0, y0, dx, dy in ADAM7:
            sub = pixels[y0::dy, x0::dx]
            if sub.size:
                raw += scanlines(sub.reshape(sub.shape[0], -1), depth)
    else:
        raw = scanlines(samples, depth)
    z = bytearray(zlib.compress(raw + raw_extra, 9))
    z[-1] ^= adler_xor
    z = bytes(z)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, int(interlace)))
    for kind, data in extra_chunks:
        out += chunk(kind, data)
    if palette is not None:
        out += chunk(b"PLTE", np.asarray(palette, np.uint8).tobytes())
    if trns is not None:
        out += chunk(b"tRNS", trns)
    body, tail = (z[:-idat_tail], z[-idat_tail:]) if idat_tail else (z, b"")
    step = -(-len(body) // idat_chunks)
    pieces = [body[i:i + step] for i in range(0, len(body), step)] + ([tail] if tail else [])
    pieces[-1] += after_stream
    for piece in pieces:
        out += chunk(b"IDAT", piece)
    if extra_idat is not None:
        out += chunk(b"IDAT", extra_idat)
    return out + chunk(b"IEND", b"")


def pnm(pixels, maxval=255, plain=False, comment=None):
    """PGM for (h, w), PPM for (h, w, 3); samples at most maxval."""
    pixels = np.asarray(pixels)
    h, w = pixels.shape[:2]
    color = pixels.ndim == 3
    magic = {(False, False): "P5", (False, True): "P2", (True, False): "P6", (True, True): "P3"}[(color, plain)]
    head = magic + "\n" + (f"# {comment}\n" if comment else "") + f"{w} {h}\n{maxval}\n"
    if plain:
        rows = pixels.reshape(h, -1)
        body = "".join(" ".join(str(int(v)) for v in r) + "\n" for r in rows).encode()
    else:
        body = pixels.astype(">u2" if maxval > 255 else np.uint8).tobytes()
    return head.encode() + body
