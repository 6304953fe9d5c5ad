"""The engine's counter-based draws (kernels/noise.h) in numpy, bit for bit: Philox4x32-10, augmentation's
translations and dropout's masks, for the PyTorch parity (tools/torch_parity.py) and the tests. The masks
and offsets are what the engine draws, not copies of them: a draw is a function of the run's seed, the epoch
(from 0), the step in it, and what it is for."""

import numpy as np

IMAGE_SIDE = 28
DRAW_SHIFT, DRAW_DROPOUT = 0, 1  # the fourth counter word (+ the layer for dropout)
MASK32 = np.uint64(0xFFFFFFFF)


def philox(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of counters (arrays or scalars, broadcast) under key (k0, k1): four uint32 arrays."""
    c = [np.asarray(v, dtype=np.uint64) & MASK32 for v in (c0, c1, c2, c3)]
    c0, c1, c2, c3 = np.broadcast_arrays(*c)
    k0, k1 = np.uint64(k0) & MASK32, np.uint64(k1) & MASK32
    for _ in range(10):
        p0, p1 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = ((p1 >> np.uint64(32)) ^ c1 ^ k0, p1 & MASK32, (p0 >> np.uint64(32)) ^ c3 ^ k1,
                          p0 & MASK32)
        k0, k1 = (k0 + np.uint64(0x9E3779B9)) & MASK32, (k1 + np.uint64(0xBB67AE85)) & MASK32
    return [v.astype(np.uint32) for v in (c0, c1, c2, c3)]


def below(x, n):
    """An integer in [0, n) from 32 random bits: the high word of x n."""
    return ((x.astype(np.uint64) * np.uint64(n)) >> np.uint64(32)).astype(np.int64)


class Noise:
    """A run's draws: its seed, the largest translation (CONFIG_TRAIN_AUGMENT_SHIFT) and the dropout
    probability (CONFIG_TRAIN_DROPOUT)."""

    def __init__(self, seed, shift=0, dropout=0.0):
        self.key = (seed & 0xFFFFFFFF, seed >> 32)
        self.shift, self.dropout = shift, dropout
        self.threshold = int(dropout * 16777216.0 + 0.5)  # as snn_config.h rounds it, in double
        self.scale = np.float32(1.0 / (1.0 - dropout))

    def shifts(self, epoch, step, rows):
        """(dx, dy) of each row of a training step's batch, each in [-shift, shift]."""
        r = philox(np.arange(rows), step, epoch, DRAW_SHIFT, *self.key)
        n = 2 * self.shift + 1
        return below(r[0], n) - self.shift, below(r[1], n) - self.shift

    def translate(self, x, epoch, step, background):
        """The batch x [rows][784] with each image moved by its row's draw, `background` moving in."""
        if not self.shift:
            return x
        dx, dy = self.shifts(epoch, step, len(x))
        side = np.arange(IMAGE_SIDE)
        src_y = side[None, :, None] - dy[:, None, None]  # [rows][y][1]: the pixel read, before the bounds
        src_x = side[None, None, :] - dx[:, None, None]
        inside = (src_y >= 0) & (src_y < IMAGE_SIDE) & (src_x >= 0) & (src_x < IMAGE_SIDE)
        images = x.reshape(len(x), IMAGE_SIDE, IMAGE_SIDE)
        rows = np.arange(len(x))[:, None, None]
        moved = images[rows, np.clip(src_y, 0, IMAGE_SIDE - 1), np.clip(src_x, 0, IMAGE_SIDE - 1)]
        return np.where(inside, moved, x.dtype.type(background)).reshape(len(x), -1)

    def keep(self, epoch, step, layer, rows, width):
        """Dropout's mask of hidden layer `layer`'s output [rows][width]: True where the unit survives."""
        index = np.arange(rows * width, dtype=np.uint64)
        r = philox(index // np.uint64(4), step, epoch, DRAW_DROPOUT + layer, *self.key)
        word = np.choose((index % np.uint64(4)).astype(np.int64), r)
        return ((word >> np.uint32(8)) >= self.threshold).reshape(rows, width)

    def dropout_factor(self, epoch, step, layer, rows, width):
        """The mask as float32 factors: 0 or 1 / (1 - p)."""
        return np.where(self.keep(epoch, step, layer, rows, width), self.scale, np.float32(0.0))


# ---- distortions (kernels/distort.h), in float32 with its fused multiply-adds as float64 rounded once more:
# the same bytes as the engine's but for a rare double rounding, a grey level apart

DRAW_AFFINE, DRAW_ELASTIC = 16, 17
F = np.float32


def fma(a, b, c):
    """a b + c rounded to float32 from its float64 value (a float32 product is exact in float64)."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(F)


def uniform16(bits):
    """16 random bits as a float32 uniform in (-1, 1), exact."""
    return (2 * (bits.astype(np.int64) & 0xFFFF) + 1).astype(F) * F(1.0 / 65536.0) - F(1.0)


def _series(x2, denominators):
    """Horner's rule in fma over the coefficients 1 / d, each a float32 division as C's 1.0f / d:
    ((c0 (-x2) + c1) (-x2) + ...)."""
    s = np.full_like(x2, F(1.0) / F(denominators[0]))
    for d in denominators[1:]:
        s = fma(s, -x2, F(1.0) / F(d))
    return s


def sin_(a):
    return _series(a * a, [6227020800, 39916800, 362880, 5040, 120, 6, 1]) * a


def cos_(a):
    return _series(a * a, [479001600, 3628800, 40320, 720, 24, 2, 1])


def exp_neg(x):
    y = x * F(1.0 / 16.0)
    e = _series(y, [40320, 5040, 720, 120, 24, 6, 2, 1, 1])
    for _ in range(4):
        e = e * e
    return e


class Distortion:
    """A build's distortions: the affine map's largest rotation (degrees), scale change, shear and translation,
    the elastic field's alpha and sigma (None: off), as meta.json gives them."""

    def __init__(self, key, affine=None, elastic=None):
        self.key = key
        self.affine, self.elastic = affine, elastic
        if elastic:
            self.alpha, sigma = F(elastic["alpha"]), F(elastic["sigma"])
            self.radius = int(4.0 * elastic["sigma"] + 0.5)
            k = np.arange(-self.radius, self.radius + 1).astype(F)
            z = k * (F(1.0) / sigma)
            self.w = exp_neg(F(0.5) * z * z)
            s = F(0.0)
            for v in self.w:
                s = F(s + v)
            self.sum = s

    def maps(self, epoch, step, rows):
        """Each row's (m00, m01, m10, m11, cx, cy), float32 arrays: (cx, cy) the centre plus the translation."""
        c = F(0.5 * (IMAGE_SIDE - 1))
        if not self.affine:
            one, zero, centre = np.ones(rows, F), np.zeros(rows, F), np.full(rows, c)
            return one, zero, zero, one, centre, centre
        r = philox(np.arange(rows), step, epoch, DRAW_AFFINE, *self.key)
        theta = F(self.affine["rotate"] * 0.017453292519943295) * uniform16(r[0])
        s = fma(F(self.affine["scale"]), uniform16(r[0] >> np.uint32(16)), F(1.0))
        h = F(self.affine["shear"]) * uniform16(r[1])
        sn, cs = sin_(theta), cos_(theta)
        t = F(self.affine["translate"])
        return (s * cs, s * fma(h, cs, -sn), s * sn, s * fma(h, sn, cs), fma(t, uniform16(r[1] >> np.uint32(16)), c),
                fma(t, uniform16(r[2]), c))

    def _smooth(self, f, along_x):
        """One pass over fields f [rows][28][28]: the weighted sum k = -R .. R in order, 0 beyond the image."""
        acc = np.zeros_like(f)
        n = IMAGE_SIDE
        for i, k in enumerate(range(-self.radius, self.radius + 1)):
            moved = np.zeros_like(f)
            inside = np.zeros(f.shape, bool)
            lo, hi = max(0, -k), min(n, n - k)  # the outputs whose neighbour k away is inside
            if lo < hi:
                if along_x:
                    moved[:, :, lo:hi], inside[:, :, lo:hi] = f[:, :, lo + k:hi + k], True
                else:
                    moved[:, lo:hi, :], inside[:, lo:hi, :] = f[:, lo + k:hi + k, :], True
            acc = np.where(inside, fma(self.w[i], moved, acc), acc)
        return acc / self.sum

    def fields(self, epoch, step, rows):
        """Each row's displacement (dx, dy) [rows][28][28]: alpha G * u, or zeros."""
        shape = (rows, IMAGE_SIDE, IMAGE_SIDE)
        if not self.elastic:
            return np.zeros(shape, F), np.zeros(shape, F)
        quads = IMAGE_SIDE * IMAGE_SIDE // 4
        r = philox(np.arange(rows)[:, None] * quads + np.arange(quads)[None, :], step, epoch, DRAW_ELASTIC,
                   *self.key)
        words = np.stack(r, axis=-1).reshape(rows, -1)  # [rows][pixel]: word i of quad q is pixel 4q + i
        ux, uy = uniform16(words).reshape(shape), uniform16(words >> np.uint32(16)).reshape(shape)
        return (self.alpha * self._smooth(self._smooth(ux, True), False),
                self.alpha * self._smooth(self._smooth(uy, True), False))

    def apply(self, images, epoch, step):
        """The batch's byte images [rows][784] distorted as the engine's step `step` of epoch `epoch` does."""
        rows = len(images)
        m00, m01, m10, m11, cx, cy = (v[:, None, None] for v in self.maps(epoch, step, rows))
        dx, dy = self.fields(epoch, step, rows)
        c = F(0.5 * (IMAGE_SIDE - 1))
        side = np.arange(IMAGE_SIDE).astype(F)
        qx = (side[None, None, :] + dx) - c
        qy = (side[None, :, None] + dy) - c
        sx, sy = fma(m00, qx, fma(m01, qy, cx)), fma(m10, qx, fma(m11, qy, cy))
        ok = (sx > F(-1.0)) & (sx < F(IMAGE_SIDE)) & (sy > F(-1.0)) & (sy < F(IMAGE_SIDE))
        sx, sy = np.where(ok, sx, F(0.0)), np.where(ok, sy, F(0.0))
        x0, y0 = np.floor(sx), np.floor(sy)
        fx, fy = sx - x0, sy - y0
        img = images.reshape(rows, IMAGE_SIDE, IMAGE_SIDE)
        b = np.arange(rows)[:, None, None]

        def at(dxi, dyi):
            xx, yy = x0.astype(np.int64) + dxi, y0.astype(np.int64) + dyi
            inside = (xx >= 0) & (xx < IMAGE_SIDE) & (yy >= 0) & (yy < IMAGE_SIDE)
            return np.where(inside, img[b, np.clip(yy, 0, IMAGE_SIDE - 1), np.clip(xx, 0, IMAGE_SIDE - 1)], 0).astype(F)

        v0, v1, v2, v3 = at(0, 0), at(1, 0), at(0, 1), at(1, 1)
        top, bottom = fma(fx, v1 - v0, v0), fma(fx, v3 - v2, v2)
        r = fma(fy, bottom - top, top) + F(0.5)
        out = np.where(r <= 0, 0, np.where(r >= 255, 255, r.astype(np.int64)))
        return np.where(ok, out, 0).astype(np.uint8).reshape(rows, -1)
