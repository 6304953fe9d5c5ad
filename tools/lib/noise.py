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
