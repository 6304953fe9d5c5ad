"""Width normalisation of digits (data/digit.h, snn_digits_set_width; mnist --digit-width) in numpy, byte for
byte: for tools/torch_parity.py, tools/torch_time_to_acc.py and the tests. Integer arithmetic, as the engine's."""

import numpy as np

IMAGE_SIDE = 28


def width_matrix(x0, w, width):
    """The columns of a digit whose nonzero box starts at column x0 and is w wide, scaled to width (data/digit.h,
    snn_digits_set_width) as one integer matrix: output column X = sum over x of A[X, x] * column x, divided by w
    and rounded half up. In units where a source pixel is `width` long and an output pixel w long."""
    a = np.zeros((IMAGE_SIDE, IMAGE_SIDE), dtype=np.int64)
    at = x0 - (width - w) // 2
    for j in range(width):
        if 0 <= at + j < IMAGE_SIDE:
            x = j * w // width
            while x * width < (j + 1) * w:
                a[at + j, x0 + x] += min((x + 1) * width, (j + 1) * w) - max(x * width, j * w)
                x += 1
    return a


def set_digit_width(images, width):
    """The digits (uint8 [n][784]) each scaled to `width` pixels wide as the engine's --digit-width does; width 0:
    as they are."""
    if not width:
        return images
    digits = images.reshape(-1, IMAGE_SIDE, IMAGE_SIDE)
    out = np.zeros_like(digits)
    columns = digits.any(axis=1)
    inked = columns.any(axis=1)
    x0 = columns.argmax(axis=1)
    w = IMAGE_SIDE - columns[:, ::-1].argmax(axis=1) - x0
    for first, wide in sorted(set(zip(x0[inked].tolist(), w[inked].tolist()))):
        sel = inked & (x0 == first) & (w == wide)
        cols = digits[sel].astype(np.int64) @ width_matrix(first, wide, width).T
        out[sel] = ((cols + wide // 2) // wide).astype(np.uint8)
    return out.reshape(images.shape)
