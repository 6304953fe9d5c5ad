/* Distortions of a training image (nn/Kconfig: TRAIN_AUGMENT_AFFINE, TRAIN_AUGMENT_ELASTIC), drawn by the
 * counter-based generator (kernels/noise.h). Output pixel p = (x, y) of row `row` of a step's batch is the
 * source image read (bilinear, 0 beyond its edge, rounded to a byte) at
 *
 *     src = c + M (q - c) + t,   q = p + alpha (G * u)(p) / S
 *
 * with c the centre (13.5, 13.5); M = s Rot(theta) [[1, h], [0, 1]] and t the row's affine draws (identity
 * and 0 without TRAIN_AUGMENT_AFFINE); u the row's elastic field, each pixel's two components uniform in
 * [-1, 1]; G the Gaussian of width sigma to 4 sigma, applied along x then along y with 0 beyond the image,
 * and S the sum of its weights (q = p without TRAIN_AUGMENT_ELASTIC). Every operation is a float add,
 * multiply or fused multiply-add written out, and the sine, cosine and exponential are this file's
 * polynomials, never a library's: the host and every GPU target compute the same bits, step by step, however
 * they split the work (the host a whole image at a time, a GPU block a pixel a thread). tools/lib/noise.py
 * computes the same in numpy, within a rounding. */
#ifndef SNN_DISTORT_H
#define SNN_DISTORT_H

#include <math.h>
#include <stdint.h>

#include "kernels/noise.h"
#include "snn_config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SNN_PIXELS (SNN_IMAGE_ROWS * SNN_IMAGE_COLS)
/* What a draw is for (the fourth counter word; noise.h's dropout takes 1 + its layer, up to 9). */
enum { SNN_DRAW_AFFINE = 16, SNN_DRAW_ELASTIC = 17 };

/* 16 random bits as a float uniform in (-1, 1): (2b + 1) / 65536 - 1, exact. */
SNN_HD float snn_uniform16(uint32_t b) { return (float)(2 * (b & 0xFFFFu) + 1) * (1.0f / 65536.0f) - 1.0f; }

/* c[0] (-x)^(n-1) + c[1] (-x)^(n-2) + ... + c[n-1], by Horner's rule in fused multiply-adds. */
SNN_HD float snn_series(float x, const float *c, int n)
{
    float s = c[0];
    for (int i = 1; i < n; i++)
        s = fmaf(s, -x, c[i]);
    return s;
}

/* sin and cos of |a| <= pi / 2 by their Taylor series to a^13 and a^12 (error below 6e-8). */
SNN_HD float snn_sin(float a)
{
    const float c[] = {1.0f / 6227020800.0f,
                       1.0f / 39916800.0f,
                       1.0f / 362880.0f,
                       1.0f / 5040.0f,
                       1.0f / 120.0f,
                       1.0f / 6.0f,
                       1.0f};
    return snn_series(a * a, c, 7) * a;
}
SNN_HD float snn_cos(float a)
{
    const float c[] = {
        1.0f / 479001600.0f, 1.0f / 3628800.0f, 1.0f / 40320.0f, 1.0f / 720.0f, 1.0f / 24.0f, 0.5f, 1.0f};
    return snn_series(a * a, c, 7);
}

/* exp(-x) for 0 <= x <= 12.5 (8 for sigma at least 0.7): exp(-x / 16) by its Taylor series to the 8th power,
 * squared four times (relative error below 2e-7 to 8, 1e-5 at 12.5); the same bits everywhere. */
SNN_HD float snn_exp_neg(float x)
{
    const float c[] = {1.0f / 40320.0f, 1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f,
                       1.0f / 6.0f,     0.5f,           1.0f,          1.0f};
    float e = snn_series(x * (1.0f / 16.0f), c, 9);
    e = e * e;
    e = e * e;
    e = e * e;
    return e * e;
}

/* ---- the affine map ---------------------------------------------------------------------------------- */

/* src = (m00 (qx - c) + m01 (qy - c) + cx, m10 (qx - c) + m11 (qy - c) + cy): (cx, cy) = c + t, the point the
 * centre reads, each a fused multiply-add of the draw (so that no compiler forms one of its own). */
typedef struct {
    float m00, m01, m10, m11, cx, cy;
} snn_affine;

#define SNN_IMAGE_CENTRE (0.5f * (float)(SNN_IMAGE_COLS - 1))

/* Row `row`'s map in step `step` of epoch `epoch`: one Philox call, five of its 16-bit halves. */
SNN_HD snn_affine snn_affine_of(const uint32_t key[2], int32_t epoch, int32_t step, int32_t row)
{
    snn_affine a = {1.0f, 0.0f, 0.0f, 1.0f, SNN_IMAGE_CENTRE, SNN_IMAGE_CENTRE};
    if (!SNN_AFFINE)
        return a;
    const snn_philox_out r =
        snn_philox((uint32_t)row, (uint32_t)step, (uint32_t)epoch, SNN_DRAW_AFFINE, key[0], key[1]);
    const float theta = SNN_AFFINE_ROTATE * snn_uniform16(r.v[0]);
    const float s = fmaf(SNN_AFFINE_SCALE, snn_uniform16(r.v[0] >> 16), 1.0f);
    const float h = SNN_AFFINE_SHEAR * snn_uniform16(r.v[1]);
    const float sn = snn_sin(theta), cs = snn_cos(theta);
    a.m00 = s * cs;
    a.m01 = s * fmaf(h, cs, -sn);
    a.m10 = s * sn;
    a.m11 = s * fmaf(h, sn, cs);
    a.cx = fmaf(SNN_AFFINE_TRANSLATE, snn_uniform16(r.v[1] >> 16), SNN_IMAGE_CENTRE);
    a.cy = fmaf(SNN_AFFINE_TRANSLATE, snn_uniform16(r.v[2]), SNN_IMAGE_CENTRE);
    return a;
}

/* ---- the elastic field --------------------------------------------------------------------------------- */

/* The raw field of pixels 4 quad .. 4 quad + 3 of row `row`: u[2 i] (x) and u[2 i + 1] (y) of each, from one
 * Philox call's eight 16-bit halves. */
SNN_HD void snn_elastic_raw4(const uint32_t key[2], int32_t epoch, int32_t step, int32_t row, int quad,
                             float u[8])
{
    const snn_philox_out r = snn_philox((uint32_t)(row * (SNN_PIXELS / 4) + quad), (uint32_t)step,
                                        (uint32_t)epoch, SNN_DRAW_ELASTIC, key[0], key[1]);
    for (int i = 0; i < 4; i++) {
        u[2 * i] = snn_uniform16(r.v[i]);
        u[2 * i + 1] = snn_uniform16(r.v[i] >> 16);
    }
}

/* The Gaussian's weight k pixels from the centre, |k| <= SNN_ELASTIC_RADIUS, and the sum S of the weights
 * w[k + R] = snn_gauss(k), k from -R to R. */
SNN_HD float snn_gauss(int k)
{
    const float z = (float)k * (1.0f / SNN_ELASTIC_SIGMA);
    return snn_exp_neg(0.5f * z * z);
}
SNN_HD float snn_gauss_sum(const float *w)
{
    float s = 0.0f;
    for (int k = -SNN_ELASTIC_RADIUS; k <= SNN_ELASTIC_RADIUS; k++)
        s += w[k + SNN_ELASTIC_RADIUS];
    return s;
}

/* One pass of the smoothing at pixel p of a field f (SNN_PIXELS floats, row-major): the sum of the pixels
 * k = -R .. R away along x (along_x) or y, in that order, each times w[k + R] = snn_gauss(k), 0 beyond the
 * image (the loop runs over the k inside it alone: R = 16 on a 28-pixel side leaves 3 taps in 10 out); over S. */
SNN_HD float snn_smooth(const float *f, int p, int along_x, const float *w, float sum)
{
    const int R = SNN_ELASTIC_RADIUS, at = along_x ? p % SNN_IMAGE_COLS : p / SNN_IMAGE_COLS;
    const int side = along_x ? SNN_IMAGE_COLS : SNN_IMAGE_ROWS, stride = along_x ? 1 : SNN_IMAGE_COLS;
    const int lo = at < R ? -at : -R, hi = at + R >= side ? side - 1 - at : R;
    float acc = 0.0f;
    for (int k = lo; k <= hi; k++)
        acc = fmaf(w[k + R], f[p + k * stride], acc);
    return acc / sum;
}

/* ---- resampling ------------------------------------------------------------------------------------- */

/* The image px read at (sx, sy) in pixel coordinates (pixel (x, y) at x, y), bilinear between its four
 * neighbours, 0 beyond the edge; rounded to the nearest byte. */
SNN_HD uint8_t snn_bilinear(const uint8_t *px, float sx, float sy)
{
    if (!(sx > -1.0f && sx < (float)SNN_IMAGE_COLS && sy > -1.0f && sy < (float)SNN_IMAGE_ROWS))
        return 0; /* no neighbour inside (or not a number) */
    const float x0 = floorf(sx), y0 = floorf(sy), fx = sx - x0, fy = sy - y0;
    const int ix = (int)x0, iy = (int)y0;
    float v[4];
    for (int i = 0; i < 4; i++) {
        const int xx = ix + i % 2, yy = iy + i / 2;
        v[i] = xx >= 0 && xx < SNN_IMAGE_COLS && yy >= 0 && yy < SNN_IMAGE_ROWS
                   ? (float)px[yy * SNN_IMAGE_COLS + xx]
                   : 0.0f;
    }
    const float top = fmaf(fx, v[1] - v[0], v[0]), bottom = fmaf(fx, v[3] - v[2], v[2]);
    const float r = fmaf(fy, bottom - top, top) + 0.5f;
    return r <= 0.0f ? 0 : r >= 255.0f ? 255 : (uint8_t)r;
}

/* Output pixel p of the distorted image px: its elastic displacement (dx, dy) (0, 0 without it) and the
 * row's affine map a. */
SNN_HD uint8_t snn_distorted_pixel(const uint8_t *px, int p, float dx, float dy, snn_affine a)
{
    const float qx = (float)(p % SNN_IMAGE_COLS) + dx - SNN_IMAGE_CENTRE;
    const float qy = (float)(p / SNN_IMAGE_COLS) + dy - SNN_IMAGE_CENTRE;
    const float sx = fmaf(a.m00, qx, fmaf(a.m01, qy, a.cx)), sy = fmaf(a.m10, qx, fmaf(a.m11, qy, a.cy));
    return snn_bilinear(px, sx, sy);
}

/* Row `row`'s elastic displacement: dx and dy (SNN_PIXELS floats each) = alpha (G * u) / S, along x, then
 * along y; scratch holds 2 SNN_PIXELS floats. One thread; a GPU block computes the same pixel by pixel. */
SNN_HD void snn_elastic_field(const uint32_t key[2], int32_t epoch, int32_t step, int32_t row, float *dx,
                              float *dy, float *scratch)
{
    float *hx = scratch, *hy = scratch + SNN_PIXELS, w[2 * SNN_ELASTIC_RADIUS + 1];
    for (int k = -SNN_ELASTIC_RADIUS; k <= SNN_ELASTIC_RADIUS; k++)
        w[k + SNN_ELASTIC_RADIUS] = snn_gauss(k);
    const float sum = snn_gauss_sum(w);
    for (int q = 0; q < SNN_PIXELS / 4; q++) {
        float u[8];
        snn_elastic_raw4(key, epoch, step, row, q, u);
        for (int i = 0; i < 4; i++) {
            dx[4 * q + i] = u[2 * i];
            dy[4 * q + i] = u[2 * i + 1];
        }
    }
    for (int p = 0; p < SNN_PIXELS; p++) {
        hx[p] = snn_smooth(dx, p, 1, w, sum);
        hy[p] = snn_smooth(dy, p, 1, w, sum);
    }
    for (int p = 0; p < SNN_PIXELS; p++) {
        dx[p] = SNN_ELASTIC_ALPHA * snn_smooth(hx, p, 0, w, sum);
        dy[p] = SNN_ELASTIC_ALPHA * snn_smooth(hy, p, 0, w, sum);
    }
}

/* The whole image, one thread: out (SNN_PIXELS bytes) from px, row `row` of step `step` of epoch `epoch`;
 * scratch holds 4 SNN_PIXELS floats. The host's gather. */
SNN_HD void snn_distort_image(const uint8_t *px, uint8_t *out, const uint32_t key[2], int32_t epoch,
                              int32_t step, int32_t row, float *scratch)
{
    float *dx = scratch, *dy = scratch + SNN_PIXELS;
    const snn_affine a = snn_affine_of(key, epoch, step, row);
    if (SNN_ELASTIC)
        snn_elastic_field(key, epoch, step, row, dx, dy, scratch + 2 * SNN_PIXELS);
    for (int p = 0; p < SNN_PIXELS; p++)
        out[p] = snn_distorted_pixel(px, p, SNN_ELASTIC ? dx[p] : 0.0f, SNN_ELASTIC ? dy[p] : 0.0f, a);
}

/* Whether a gather with these draws distorts its images: a training step's, where the build distorts. */
SNN_HD int snn_noise_distorts(snn_noise n) { return SNN_DISTORTS && n.epoch != NULL; }

#ifdef __cplusplus
}
#endif
#endif
