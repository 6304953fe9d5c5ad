/* Every CUDA kernel against its host reference (host_*, kernels/host/), on
 * seeded random data in [-1, 1] (never zero) of awkward sizes: none a
 * multiple of a tile, from 1 up. One line per case: "ok - <name>" or
 * "not ok - <name>: <why>"; on a machine without a GPU one line
 * "skip - gpu kernels: skipped: no GPU" and exit 0.
 *
 * Checks, per case:
 * - tolerance: relative error ||gpu - host|| / ||host|| below SNN_TOL_GEMM for
 *   the GEMM roles in the configured precision (tests/gpu/tolerance.h: FP32
 *   1e-5, as the SIMT GEMM sums in k order like the host; TF32 and FP16 5e-3,
 *   BF16 2e-2, FP16 with FP16 accumulation 3e-2), 1e-5 for the other kernels;
 * - every output element written: outputs are poisoned with NaN (0xff bytes)
 *   before each call, and any non-finite result fails the case;
 * - determinism: each kernel runs twice and must give bitwise-identical
 *   results (the update from the same starting state);
 * With CONFIG_GEMM_TWINS the GEMM roles run twice: without 16-bit twins (the
 * mma.sync kernels on FP32 operands) and with every buffer twinned
 * (kernels/cuda/twin.cuh), so that the roles whose strides the twins serve
 * run on them: on wgmma (CONFIG_GEMM_WGMMA) or mma.sync (the case's name
 * says which kernel ran); the twins the epilogues write must then equal the
 * FP32 results rounded. In TF32, wgmma reads the FP32 operands themselves:
 * the forward cases it takes say so, twins or not. Tensor-core builds bind
 * a split-K workspace, as the engine does, so the GEMMs whose tiles leave SMs idle split their k range
 * (the case's name says into how many slices); the shapes include some that
 * split in every role. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "arch/runtime.h"
#include "kernels/cuda/gemm/bias.h"
#include "kernels/cuda/gemm/tile.cuh"
#include "kernels/cuda/gemm_bf16_grad.h"
#include "kernels/cuda/gemm_dropout.h"
#include "kernels/cuda/gemm_path.h"
#include "kernels/cuda/gemm_split_k.h"
#include "kernels/cuda/twin.cuh"
#include "kernels/ops.h"
#include "snn_check.h"
#include "tests/scaled_math_cases.h"
#include "tests/test_util.h"
#include "snn_config.h"
#include "tests/gpu/tolerance.h"

#define TOL_FP32 1e-5

static int n_failed;
static double case_err = -1.0; /* the largest relative error of the current case (-1: none) */
/* each role's configured GEMM tile, in its cases' names */
static char tile_fwd[64], tile_dgrad[64], tile_wgrad[64];
#define TILE_NAME(buf, T)                                                                                          \
    snprintf(buf, sizeof buf, "b%dx%dx%d_w%dx%dx%d_s%d", T::BM, T::BN, T::BK, T::WM, T::WN, T::WK, CONFIG_GEMM_STAGES)

/* ---- reporting --------------------------------------------------------------- */

static void report(const char *name, const char *why)
{
    if (why[0]) {
        printf("not ok - %s: %s\n", name, why);
        n_failed++;
    } else {
        if (case_err >= 0.0)
            printf("ok - %s (relative error %.1e)\n", name, case_err);
        else
            printf("ok - %s\n", name);
    }
    case_err = -1.0;
    fflush(stdout);
}

/* ---- data -------------------------------------------------------------------- */

static float *host_floats(long n)
{
    return (float *)snn_xmalloc(sizeof(float) * (size_t)(n ? n : 1), "test data");
}

static float *random_floats(long n, float scale)
{
    float *p = host_floats(n);
    for (long i = 0; i < n; i++)
        p[i] = scale * rng_uniform();
    return p;
}

static float *copy_floats(const float *src, long n)
{
    float *p = host_floats(n);
    memcpy(p, src, sizeof(float) * (size_t)n);
    return p;
}

/* ---- device buffers (on the engine's stream, so in order with the kernels) ----- */

/* A device copy of n floats; `misalign` shifts it by one float, so that the
 * kernels must take their unaligned (scalar) load path. In twin mode it also
 * has a 16-bit twin, bound and written from it. */
static int twin_mode;

typedef struct {
    void *base;
    float *p;
    SnnTwin *twin;
    long n;
} dbuf;

/* d's twin as the ops take it (kernels/ops_proto.h), NULL outside twin mode. */
static snn_twin *tw(dbuf d) { return (snn_twin *)d.twin; }

static void dev_upload(dbuf d, const float *src)
{
    snn_rt_upload(d.p, src, sizeof(float) * (size_t)d.n);
    cuda_write_twin(tw(d), d.p, d.n);
}

static dbuf dev_floats(const float *src, long n, int misalign)
{
    dbuf d = {NULL, NULL, NULL, n};
    d.base = snn_rt_alloc(sizeof(float) * (size_t)(n + 1));
    d.p = (float *)d.base + (misalign ? 1 : 0);
    if (twin_mode) {
        d.twin = (SnnTwin *)snn_rt_alloc(sizeof(SnnTwin) * (size_t)(n + 1) + 16) + (misalign ? 1 : 0);
    }
    if (src)
        dev_upload(d, src);
    return d;
}

static void dev_free(dbuf d)
{
    if (d.twin) {
        snn_rt_free(d.twin - (d.p != d.base));
    }
    snn_rt_free(d.base);
}

/* In twin mode: the twin of an output holds its FP32 values rounded. */
static void check_twin(char *why, const char *what, dbuf d, const float *values)
{
    if (!d.twin)
        return;
    SnnTwin *got = (SnnTwin *)snn_xmalloc(sizeof(SnnTwin) * (size_t)(d.n ? d.n : 1), "twin");
    snn_rt_download(got, d.twin, sizeof(SnnTwin) * (size_t)d.n);
    for (long i = 0; i < d.n; i++) {
#if defined(CONFIG_PRECISION_BF16)
        const SnnTwin want = __float2bfloat16_rn(values[i]);
#else
        const SnnTwin want = __float2half_rn(values[i]);
#endif
        if (memcmp(&want, &got[i], sizeof want) != 0) {
            set_why(why, "%s's 16-bit twin [%ld] is not its value %g rounded", what, i, (double)values[i]);
            break;
        }
    }
    free(got);
}

/* What the last GEMM ran on: " (mma.sync ...)" in twin mode, " (wgmma)"
 * where it took wgmma, and " split-K N slices" when it split its k range. */
static cuda_gemm_counts path_before;
static void path_start(void) { path_before = cuda_gemm_counts_now(); }
static const char *path_taken(void)
{
    static char path[128];
    const cuda_gemm_path p = cuda_gemm_path_since(path_before);
    path[0] = 0;
    if (p.wgmma) /* with twins, or in TF32 on the FP32 operands */
        strcpy(path, " (wgmma)");
#ifdef CONFIG_GEMM_TWINS
    else if (twin_mode)
        strcpy(path, p.mma_twins ? " (mma.sync on twins)" : " (mma.sync on FP32: strides the twins cannot serve)");
#endif
    if (p.split_slices)
        snprintf(path + strlen(path), sizeof path - strlen(path), " split-K %d slices", p.split_slices);
    return path;
}

static void poison(void *p, size_t bytes) /* 0xffffffff: a NaN as float, -1 as int32 */
{
    CUDA_CHECK(cudaMemsetAsync(p, 0xff, bytes, snn_stream()));
}

/* ---- comparisons ---------------------------------------------------------------- */

/* ||gpu - host|| / ||host|| over n floats; the first non-finite GPU element
 * where the host's is finite fails the check (a NaN poison left unwritten). */
static void compare(char *why, const char *what, const float *gpu, const float *host, long n, double tol)
{
    double diff = 0.0, ref = 0.0;
    for (long i = 0; i < n; i++) {
        if (!isfinite(gpu[i]) && isfinite(host[i])) {
            set_why(why, "%s[%ld] = %g, host %g (not written?)", what, i, (double)gpu[i], (double)host[i]);
            return;
        }
        double d = (double)gpu[i] - (double)host[i];
        diff += d * d;
        ref += (double)host[i] * host[i];
    }
    double rel = ref > 0.0 ? sqrt(diff / ref) : sqrt(diff);
    if (rel > case_err)
        case_err = rel;
    if (!(rel < tol))
        set_why(why, "%s: relative error %.3g exceeds %.0e", what, rel, tol);
}

static void same_bits(char *why, const char *what, const void *a, const void *b, size_t bytes)
{
    if (memcmp(a, b, bytes) != 0) {
        const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
        size_t i = 0;
        while (x[i] == y[i])
            i++;
        set_why(why, "%s: not the same bits (from byte %zu)", what, i);
    }
}

/* ---- GEMM roles ------------------------------------------------------------------ */

typedef struct {
    int M, N, K;
} shape;

/* drop_layer >= 0: a training step's dropout of that hidden layer after the ReLU (layer 2: as data-parallel
 * rank 1 of a batch of 2 x M draws its rows'), every dropped element exactly 0. */
static void test_forward(shape s, int bias, int relu, int misalign, int drop_layer)
{
    char name[256], why[256] = "";
    snprintf(name, sizeof name, "gemm_%s %s linear_forward M=%d N=%d K=%d%s%s%s", SNN_PRECISION_NAME, tile_fwd,
             s.M, s.N, s.K, bias ? " bias" : "", relu ? " relu" : "", misalign ? " misaligned" : "");
    if (drop_layer >= 0)
        snprintf(name + strlen(name), sizeof name - strlen(name), " dropout layer %d", drop_layer);
    long ny = (long)s.M * s.N;
    float *x = random_floats((long)s.M * s.K, 1.0f), *w = random_floats((long)s.N * s.K, 1.0f);
    float *b = random_floats(s.N, 1.0f), *ref = host_floats(ny), *y1 = host_floats(ny), *y2 = host_floats(ny);
    int32_t clock[2] = {7, 2}; /* the step, its epoch */
    snn_drop hdrop = {snn_noise_of_seed(99, &clock[1]), &clock[0], drop_layer, 0};
    hdrop.noise.row0 = drop_layer == 2 ? s.M : 0;
    int32_t *dclock = (int32_t *)snn_rt_alloc(sizeof clock);
    snn_rt_upload(dclock, clock, sizeof clock);
    snn_drop ddrop = hdrop;
    ddrop.step = dclock, ddrop.noise.epoch = dclock + 1;
    host_linear_forward(ref, NULL, x, NULL, w, NULL, bias ? b : NULL, s.M, s.N, s.K, relu,
                        drop_layer >= 0 ? &hdrop : NULL);

    dbuf dx = dev_floats(x, (long)s.M * s.K, misalign), dw = dev_floats(w, (long)s.N * s.K, misalign);
    dbuf db = dev_floats(b, s.N, 0), dy = dev_floats(NULL, ny, misalign);
    float *out[2] = {y1, y2};
    path_start();
    for (int run = 0; run < 2; run++) {
        poison(dy.p, sizeof(float) * (size_t)ny);
        cuda_linear_forward(dy.p, tw(dy), dx.p, tw(dx), dw.p, tw(dw), bias ? db.p : NULL, s.M, s.N, s.K, relu,
                            drop_layer >= 0 ? &ddrop : NULL);
        snn_rt_download(out[run], dy.p, sizeof(float) * (size_t)ny);
    }
    compare(why, "y", y1, ref, ny, SNN_TOL_GEMM);
    for (long i = 0; i < ny && drop_layer >= 0 && !why[0]; i++)
        if (!snn_dropout_keeps(hdrop.noise.key, clock[1], clock[0], drop_layer,
                               (uint32_t)(hdrop.noise.row0 * s.N + i)) &&
            y1[i] != 0.0f)
            set_why(why, "y[%ld] = %g where dropout drops it", i, y1[i]);
    same_bits(why, "y", y1, y2, sizeof(float) * (size_t)ny);
    check_twin(why, "y", dy, y1);
    strncat(name, path_taken(), sizeof name - strlen(name) - 1);
    report(name, why);

    dev_free(dx), dev_free(dw), dev_free(db), dev_free(dy);
    snn_rt_free(dclock);
    free(x), free(w), free(b), free(ref), free(y1), free(y2);
}

/* dropout's two masks, as the engine binds them (main) */
static uint8_t *masks;
static long masks_bytes;

/* Hidden layers 0 and 1 forward with dropout as a training step runs them (M x N from K, then M x width from
 * N; rank1: as data-parallel rank 1 of a batch of 2 x M): the first GEMM draws the second's mask beside it
 * where it runs on wgmma at the small tile, and only there (large: a first GEMM that takes the config's tile
 * on every SM count up to 144), and the second reads it. The masks poisoned before each run; the first's
 * output checked against the host's forward, the second's against the host's forward of the first's. */
static void test_forward_pair(shape s, int width, int misalign, int rank1, int large)
{
    char name[256], why[256] = "";
    snprintf(name, sizeof name, "gemm_%s %s linear_forward M=%d N=%d K=%d then %d wide, dropout%s%s",
             SNN_PRECISION_NAME, tile_fwd, s.M, s.N, s.K, width, misalign ? " misaligned" : "",
             rank1 ? " rank 1" : "");
    const long ny = (long)s.M * s.N, nz = (long)s.M * width;
    float *x = random_floats((long)s.M * s.K, 1.0f), *w = random_floats((long)s.N * s.K, 1.0f);
    float *w2 = random_floats((long)width * s.N, 1.0f), *b = random_floats(s.N, 1.0f);
    float *b2 = random_floats(width, 1.0f), *y = host_floats(ny), *ref = host_floats(nz),
          *yref = host_floats(ny);
    float *z[2] = {host_floats(nz), host_floats(nz)};
    int32_t clock[2] = {7, 2}; /* the step, its epoch */
    snn_drop h0 = {snn_noise_of_seed(99, &clock[1]), &clock[0], 0, width};
    h0.noise.row0 = rank1 ? s.M : 0;
    snn_drop h1 = h0;
    h1.layer = 1, h1.next_width = 0;
    int32_t *dclock = (int32_t *)snn_rt_alloc(sizeof clock);
    snn_rt_upload(dclock, clock, sizeof clock);
    snn_drop d0 = h0, d1 = h1;
    d0.step = d1.step = dclock, d0.noise.epoch = d1.noise.epoch = dclock + 1;

    dbuf dx = dev_floats(x, (long)s.M * s.K, misalign), dw = dev_floats(w, (long)s.N * s.K, misalign);
    dbuf dw2 = dev_floats(w2, (long)width * s.N, misalign), db = dev_floats(b, s.N, 0);
    dbuf db2 = dev_floats(b2, width, 0), dy = dev_floats(NULL, ny, misalign),
         dz = dev_floats(NULL, nz, misalign);
    int first_wgmma = 0, ahead = 0;
    for (int run = 0; run < 2; run++) {
        poison(dz.p, sizeof(float) * (size_t)nz);
        poison(masks, (size_t)masks_bytes);
        path_start();
        cuda_linear_forward(dy.p, tw(dy), dx.p, tw(dx), dw.p, tw(dw), db.p, s.M, s.N, s.K, 1, &d0);
        first_wgmma = cuda_gemm_path_since(path_before).wgmma;
        path_start();
        cuda_linear_forward(dz.p, tw(dz), dy.p, tw(dy), dw2.p, tw(dw2), db2.p, s.M, width, s.N, 1, &d1);
        ahead = cuda_gemm_path_since(path_before).mask_ahead;
        snn_rt_download(z[run], dz.p, sizeof(float) * (size_t)nz);
    }
    snn_rt_download(y, dy.p, sizeof(float) * (size_t)ny);
    host_linear_forward(yref, NULL, x, NULL, w, NULL, b, s.M, s.N, s.K, 1, &h0);
    compare(why, "y", y, yref, ny, SNN_TOL_GEMM);
    host_linear_forward(ref, NULL, y, NULL, w2, NULL, b2, s.M, width, s.N, 1, &h1);
    compare(why, "z", z[0], ref, nz, SNN_TOL_GEMM);
    for (long i = 0; i < nz && !why[0]; i++)
        if (!snn_dropout_keeps(h1.noise.key, clock[1], clock[0], 1, (uint32_t)(h1.noise.row0 * width + i)) &&
            z[0][i] != 0.0f)
            set_why(why, "z[%ld] = %g where dropout drops it", i, z[0][i]);
    same_bits(why, "z", z[0], z[1], sizeof(float) * (size_t)nz);
    if (!why[0] && ahead != (first_wgmma && !large))
        set_why(why, "the second mask %s drawn beside the first GEMM, which ran %s wgmma%s",
                ahead ? "was" : "was not", first_wgmma ? "on" : "off", large ? " at the config's tile" : "");
    strncat(name, ahead ? " (wgmma, the second mask drawn beside it)" : " (the masks drawn apart)",
            sizeof name - strlen(name) - 1);
    report(name, why);

    dev_free(dx), dev_free(dw), dev_free(dw2), dev_free(db), dev_free(db2), dev_free(dy), dev_free(dz);
    snn_rt_free(dclock);
    free(x), free(w), free(w2), free(b), free(b2), free(y), free(yref), free(ref), free(z[0]), free(z[1]);
}

/* scale: the kept units' of a dropout (1: none). */
static void test_backward_input(shape s, int mask, int misalign, float scale)
{
    char name[256], why[256] = "";
    snprintf(name, sizeof name, "gemm_%s %s linear_backward_input M=%d N=%d K=%d%s%s scale %g", SNN_PRECISION_NAME,
             tile_dgrad, s.M, s.N, s.K, mask ? " mask" : "", misalign ? " misaligned" : "", scale);
    long nx = (long)s.M * s.K;
    float *dy = random_floats((long)s.M * s.N, 1.0f), *w = random_floats((long)s.N * s.K, 1.0f);
    float *act = random_floats(nx, 1.0f), *ref = host_floats(nx), *g1 = host_floats(nx), *g2 = host_floats(nx);
    host_linear_backward_input(ref, NULL, dy, NULL, w, NULL, mask ? act : NULL, scale, s.M, s.N, s.K);

    dbuf ddy = dev_floats(dy, (long)s.M * s.N, misalign), dw = dev_floats(w, (long)s.N * s.K, misalign);
    dbuf dact = dev_floats(act, nx, 0), ddx = dev_floats(NULL, nx, misalign);
    float *out[2] = {g1, g2};
    path_start();
    for (int run = 0; run < 2; run++) {
        poison(ddx.p, sizeof(float) * (size_t)nx);
        cuda_linear_backward_input(ddx.p, tw(ddx), ddy.p, tw(ddy), dw.p, tw(dw), mask ? dact.p : NULL, scale, s.M,
                                   s.N, s.K);
        snn_rt_download(out[run], ddx.p, sizeof(float) * (size_t)nx);
    }
    compare(why, "dx", g1, ref, nx, SNN_TOL_GEMM);
    same_bits(why, "dx", g1, g2, sizeof(float) * (size_t)nx);
    check_twin(why, "dx", ddx, g1);
    strncat(name, path_taken(), sizeof name - strlen(name) - 1);
    report(name, why);

    dev_free(ddy), dev_free(dw), dev_free(dact), dev_free(ddx);
    free(dy), free(w), free(act), free(ref), free(g1), free(g2);
}

/* The step's factors the update cases run at (kernels/optim.h), on the host and in device memory. */
static snn_rate rate_host;
static snn_rate *rate_dev;

static void rate_init(void)
{
    rate_host = snn_rate_at(7, 5, 40);
    rate_dev = (snn_rate *)snn_rt_alloc(sizeof(snn_rate));
    snn_rt_upload(rate_dev, &rate_host, sizeof(snn_rate));
}

/* Optimizer state of n floats per moment (AdamW's second moment non-negative), on the host. */
static void random_state(float *st[2], long n)
{
    for (int k = 0; k < 2; k++) {
        st[k] = random_floats(n, 1.0f);
        for (long i = 0; k == 1 && i < n; i++)
            st[k][i] = fabsf(st[k][i]) * 0.01f;
    }
}

static void test_backward_weight_update(shape s, int misalign)
{
    char name[256], why[256] = "";
    snprintf(name, sizeof name, "gemm_%s %s linear_backward_weight_update M=%d N=%d K=%d%s", SNN_PRECISION_NAME,
             tile_wgrad, s.M, s.N, s.K, misalign ? " misaligned" : "");
    static const char *const sname[2] = {"state 0", "state 1"};
    const int S = SNN_OPTIM_MOMENTS;
    long nw = (long)s.N * s.K;
    float *dy = random_floats((long)s.M * s.N, 1.0f), *x = random_floats((long)s.M * s.K, 1.0f);
    float *w0 = random_floats(nw, 1.0f), *b0 = random_floats(s.N, 1.0f), *sw0[2], *sb0[2];
    random_state(sw0, nw);
    random_state(sb0, s.N);
    /* the host reference, on copies */
    float *w = copy_floats(w0, nw), *b = copy_floats(b0, s.N);
    snn_state hsw = {{copy_floats(sw0[0], nw), copy_floats(sw0[1], nw)}};
    snn_state hsb = {{copy_floats(sb0[0], s.N), copy_floats(sb0[1], s.N)}};
    host_linear_backward_weight_update(w, NULL, hsw, b, hsb, dy, NULL, x, NULL, s.M, s.N, s.K, &rate_host);

    dbuf ddy = dev_floats(dy, (long)s.M * s.N, misalign), dxx = dev_floats(x, (long)s.M * s.K, misalign);
    dbuf dw = dev_floats(NULL, nw, misalign), db = dev_floats(NULL, s.N, 0), dsw[2], dsb[2];
    snn_state sw = {{NULL, NULL}}, sb = {{NULL, NULL}};
    for (int k = 0; k < S; k++) {
        dsw[k] = dev_floats(NULL, nw, misalign), dsb[k] = dev_floats(NULL, s.N, 0);
        sw.m[k] = dsw[k].p, sb.m[k] = dsb[k].p;
    }
    float *gw[2] = {host_floats(nw), host_floats(nw)}, *gb[2] = {host_floats(s.N), host_floats(s.N)};
    float *gsw[2][2], *gsb[2][2];
    path_start();
    for (int run = 0; run < 2; run++) { /* each from the same starting state */
        dev_upload(dw, w0);
        snn_rt_upload(db.p, b0, sizeof(float) * (size_t)s.N);
        for (int k = 0; k < S; k++) {
            snn_rt_upload(sw.m[k], sw0[k], sizeof(float) * (size_t)nw);
            snn_rt_upload(sb.m[k], sb0[k], sizeof(float) * (size_t)s.N);
        }
        cuda_linear_backward_weight_update(dw.p, tw(dw), sw, db.p, sb, ddy.p, tw(ddy), dxx.p, tw(dxx), s.M, s.N,
                                           s.K, rate_dev);
        snn_rt_download(gw[run], dw.p, sizeof(float) * (size_t)nw);
        snn_rt_download(gb[run], db.p, sizeof(float) * (size_t)s.N);
        for (int k = 0; k < S; k++) {
            gsw[run][k] = host_floats(nw), gsb[run][k] = host_floats(s.N);
            snn_rt_download(gsw[run][k], sw.m[k], sizeof(float) * (size_t)nw);
            snn_rt_download(gsb[run][k], sb.m[k], sizeof(float) * (size_t)s.N);
        }
    }
    for (int k = 0; k < S; k++) {
        compare(why, sname[k], gsw[0][k], hsw.m[k], nw, SNN_TOL_GEMM);
        compare(why, sname[k], gsb[0][k], hsb.m[k], s.N, TOL_FP32);
        same_bits(why, sname[k], gsw[0][k], gsw[1][k], sizeof(float) * (size_t)nw);
        same_bits(why, sname[k], gsb[0][k], gsb[1][k], sizeof(float) * (size_t)s.N);
    }
    compare(why, "w", gw[0], w, nw, SNN_TOL_GEMM);
    compare(why, "b", gb[0], b, s.N, TOL_FP32);
    same_bits(why, "w", gw[0], gw[1], sizeof(float) * (size_t)nw);
    same_bits(why, "b", gb[0], gb[1], sizeof(float) * (size_t)s.N);
    check_twin(why, "w", dw, gw[1]);
    /* the bias kernel alone from the same state: the bits of the update beside the GEMM (wgmma's side job) */
    snn_rt_upload(db.p, b0, sizeof(float) * (size_t)s.N);
    for (int k = 0; k < S; k++)
        snn_rt_upload(sb.m[k], sb0[k], sizeof(float) * (size_t)s.N);
    gemm_bias_update(db.p, sb, ddy.p, s.M, s.N, rate_dev);
    float *kb = host_floats(s.N), *ksb = host_floats(s.N);
    snn_rt_download(kb, db.p, sizeof(float) * (size_t)s.N);
    same_bits(why, "b against the bias kernel's", gb[0], kb, sizeof(float) * (size_t)s.N);
    for (int k = 0; k < S; k++) {
        snn_rt_download(ksb, sb.m[k], sizeof(float) * (size_t)s.N);
        same_bits(why, "bias state against the bias kernel's", gsb[0][k], ksb, sizeof(float) * (size_t)s.N);
    }
    free(kb), free(ksb);
    strncat(name, path_taken(), sizeof name - strlen(name) - 1);
    report(name, why);

    dev_free(ddy), dev_free(dxx), dev_free(dw), dev_free(db);
    for (int k = 0; k < S; k++) {
        dev_free(dsw[k]), dev_free(dsb[k]);
        for (int run = 0; run < 2; run++)
            free(gsw[run][k]), free(gsb[run][k]);
    }
    for (int run = 0; run < 2; run++)
        free(gw[run]), free(gb[run]);
    for (int k = 0; k < 2; k++)
        free(sw0[k]), free(sb0[k]), free(hsw.m[k]), free(hsb.m[k]);
    free(dy), free(x), free(w0), free(b0), free(w), free(b);
}

#ifdef CONFIG_DP_REDUCE_BF16
/* cuda_linear_backward_weight_bf16 of dY and X, whole and in ranges of 64 output rows (dY's columns at ldy =
 * N, as a data-parallel step's buckets): each gradient the BF16 rounding (to nearest even) of the FP32 GEMM's
 * gw, bit for bit (the same sums); whole, the bias gradient gb's bits. */
static void weight_grad_bf16(char *why, shape s, const float *gw, const float *gb, dbuf ddy, dbuf dxx)
{
    const long nw = (long)s.N * s.K;
    uint16_t *d16 = (uint16_t *)snn_rt_alloc(sizeof(uint16_t) * (size_t)nw);
    dbuf dgb = dev_floats(NULL, s.N, 0);
    uint16_t *got = (uint16_t *)snn_xmalloc(sizeof(uint16_t) * (size_t)nw, "BF16 gradients");
    float *got_b = host_floats(s.N);
    for (int ranges = 0; ranges < 2 && !why[0]; ranges++) {
        poison(d16, sizeof(uint16_t) * (size_t)nw);
        poison(dgb.p, sizeof(float) * (size_t)s.N);
        for (int r0 = 0; r0 < s.N; r0 += ranges ? 64 : s.N) {
            const int n = ranges && s.N - r0 > 64 ? 64 : s.N - r0;
            cuda_linear_backward_weight_bf16(d16 + (long)r0 * s.K, dgb.p + r0, ddy.p + r0,
                                             tw(ddy) ? tw(ddy) + r0 : NULL, s.N, dxx.p, tw(dxx), s.M, n, s.K);
        }
        snn_rt_download(got, d16, sizeof(uint16_t) * (size_t)nw);
        snn_rt_download(got_b, dgb.p, sizeof(float) * (size_t)s.N);
        for (long i = 0; i < nw; i++) {
            uint32_t u;
            memcpy(&u, &gw[i], sizeof u);
            const uint16_t want =
                (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16); /* to nearest, ties to even */
            if (got[i] != want) {
                set_why(why, "BF16 gw[%ld]%s = 0x%04x, the FP32 GEMM's %g rounds to 0x%04x", i,
                        ranges ? " by row ranges" : "", got[i], (double)gw[i], want);
                break;
            }
        }
        if (!ranges && !why[0] && memcmp(got_b, gb, sizeof(float) * (size_t)s.N) != 0)
            set_why(why, "the bias gradient beside the BF16 weight gradient differs from the FP32 run's");
    }
    snn_rt_free(d16);
    dev_free(dgb);
    free(got), free(got_b);
}
#endif

/* The weight-gradient GEMM alone (the benchmarks' weight-gradient rows, data parallelism's buckets),
 * against the host's forward GEMM of the transposed operands, dY^T . (X^T)^T; the bias gradient beside it
 * against the host's; and the same in ranges of 64 output rows (dY's columns, ldy = N), as a data-parallel
 * step computes a wide layer's. */
static void test_weight_grad(shape s)
{
    char name[256], why[256] = "";
    snprintf(name, sizeof name, "gemm_%s %s linear_weight_grad M=%d N=%d K=%d, bias, 64-row ranges",
             SNN_PRECISION_NAME, tile_wgrad, s.M, s.N, s.K);
    long nw = (long)s.N * s.K;
    float *gb = host_floats(s.N), *hgb = host_floats(s.N), *hgw = host_floats(nw), *parts = host_floats(nw + s.N);
    float *dy = random_floats((long)s.M * s.N, 1.0f), *x = random_floats((long)s.M * s.K, 1.0f);
    float *dyt = host_floats((long)s.M * s.N), *xt = host_floats((long)s.M * s.K), *ref = host_floats(nw);
    float *g[2] = {host_floats(nw), host_floats(nw)};
    for (int m = 0; m < s.M; m++) {
        for (int n = 0; n < s.N; n++)
            dyt[(long)n * s.M + m] = dy[(long)m * s.N + n];
        for (int k = 0; k < s.K; k++)
            xt[(long)k * s.M + m] = x[(long)m * s.K + k];
    }
    host_linear_forward(ref, NULL, dyt, NULL, xt, NULL, NULL, s.N, s.K, s.M, 0, NULL);

    dbuf ddy = dev_floats(dy, (long)s.M * s.N, 0), dxx = dev_floats(x, (long)s.M * s.K, 0);
    dbuf dg = dev_floats(NULL, nw + s.N, 0);
    path_start();
    for (int run = 0; run < 2; run++) {
        poison(dg.p, sizeof(float) * (size_t)(nw + s.N));
        cuda_linear_backward_weight(dg.p, run ? dg.p + nw : NULL, ddy.p, tw(ddy), s.N, dxx.p, tw(dxx), s.M, s.N,
                                    s.K);
        snn_rt_download(g[run], dg.p, sizeof(float) * (size_t)nw);
    }
    snn_rt_download(gb, dg.p + nw, sizeof(float) * (size_t)s.N);
    host_linear_backward_weight(hgw, hgb, dy, NULL, s.N, x, NULL, s.M, s.N, s.K);
    compare(why, "gw", g[0], ref, nw, SNN_TOL_GEMM);
    compare(why, "gb", gb, hgb, s.N, 1e-5);
    gemm_bias_grad(dg.p + nw, ddy.p, s.N, s.M, s.N); /* the bias kernel alone: the bits of the side job's */
    float *kgb = host_floats(s.N);
    snn_rt_download(kgb, dg.p + nw, sizeof(float) * (size_t)s.N);
    same_bits(why, "gb against the bias kernel's", gb, kgb, sizeof(float) * (size_t)s.N);
    free(kgb);
    same_bits(why, "gw", g[0], g[1], sizeof(float) * (size_t)nw);
    poison(dg.p, sizeof(float) * (size_t)(nw + s.N));
    for (int r0 = 0; r0 < s.N; r0 += 64) {
        const int n = s.N - r0 < 64 ? s.N - r0 : 64;
        cuda_linear_backward_weight(dg.p + (long)r0 * s.K, dg.p + nw + r0, ddy.p + r0,
                                    tw(ddy) ? tw(ddy) + r0 : NULL, s.N, dxx.p, tw(dxx), s.M, n, s.K);
    }
    snn_rt_download(parts, dg.p, sizeof(float) * (size_t)(nw + s.N));
    compare(why, "gw by row ranges", parts, ref, nw, SNN_TOL_GEMM);
    compare(why, "gb by row ranges", parts + nw, hgb, s.N, 1e-5);
    same_bits(why, "gb by row ranges", parts + nw, gb, sizeof(float) * (size_t)s.N);
#ifdef CONFIG_DP_REDUCE_BF16
    weight_grad_bf16(why, s, g[0], gb, ddy, dxx);
    strncat(name, "; BF16 out", sizeof name - strlen(name) - 1);
#endif
    strncat(name, path_taken(), sizeof name - strlen(name) - 1);
    report(name, why);

    dev_free(ddy), dev_free(dxx), dev_free(dg);
    free(dy), free(x), free(dyt), free(xt), free(ref), free(g[0]), free(g[1]), free(gb), free(hgb), free(hgw);
    free(parts);
}

/* cuda_apply_update on n parameters p, state s0 and gradients g (FP32) or g16 (BF16), on device copies one
 * float past 16-byte alignment where misalign is set: the parameters into out_p, the state into out_s. */
static void device_update(long n, int misalign, const float *p, float *const s0[2], const float *g,
                          const uint16_t *g16, const snn_rate *drate, float *out_p, float *out_s[2],
                          char *why)
{
    dbuf dp = dev_floats(p, n, misalign), dg = dev_floats(g, n, misalign);
    dbuf ds[2] = {dev_floats(s0[0], n, misalign), dev_floats(s0[1], n, misalign)};
    uint16_t *dg16 = NULL;
    if (g16) {
        dg16 = (uint16_t *)snn_rt_alloc(sizeof(uint16_t) * (size_t)(n + 1)) + misalign;
        snn_rt_upload(dg16, g16, sizeof(uint16_t) * (size_t)n);
    }
    cuda_apply_update(
        dp.p, tw(dp),
        (snn_state){{SNN_OPTIM_MOMENTS > 0 ? ds[0].p : NULL, SNN_OPTIM_MOMENTS > 1 ? ds[1].p : NULL}},
        g16 ? NULL : dg.p, dg16, n, drate, NULL);
    snn_rt_download(out_p, dp.p, sizeof(float) * (size_t)n);
    check_twin(why, "p", dp, out_p);
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        snn_rt_download(out_s[k], ds[k].p, sizeof(float) * (size_t)n);
    dev_free(dp), dev_free(dg), dev_free(ds[0]), dev_free(ds[1]);
    if (dg16)
        snn_rt_free(dg16 - misalign);
}

/* The optimizer's update from stored gradients (the update pass's, data parallelism's), against the host's:
 * from FP32 or BF16 gradients, on arrays that allow 16-byte loads (four elements a thread, a tail of n % 4
 * one a thread in the same launch) and on arrays one float past that (one at a time throughout), which must
 * give the same bits. */
static void test_apply_update(long n, int from_bf16)
{
    char name[256], why[256] = "";
    snprintf(name, sizeof name, "apply_update n=%ld (tail %ld)%s, aligned and misaligned", n, n % 4,
             from_bf16 ? " from BF16 gradients" : "");
    const snn_rate rate = snn_rate_at(3, 10, 100);
    float *p = random_floats(n, 1.0f), *g = random_floats(n, 1.0f), *hp = host_floats(n);
    float *s0[2] = {random_floats(n, 1.0f), random_floats(n, 1.0f)}, *hs[2] = {host_floats(n), host_floats(n)};
    float *out_p[2] = {host_floats(n), host_floats(n)};
    float *out_s[2][2] = {{host_floats(n), host_floats(n)}, {host_floats(n), host_floats(n)}};
    uint16_t *g16 = (uint16_t *)snn_xmalloc(sizeof(uint16_t) * (size_t)n, "BF16 gradients");
    for (long i = 0; i < n; i++) {
        s0[1][i] = fabsf(s0[1][i]) * 0.01f; /* AdamW's second moment */
        g16[i] = __bfloat16_as_ushort(__float2bfloat16_rn(g[i]));
    }
    snn_rate *drate = (snn_rate *)snn_rt_alloc(sizeof(snn_rate));
    snn_rt_upload(drate, &rate, sizeof(rate));
    memcpy(hp, p, sizeof(float) * (size_t)n);
    for (int k = 0; k < 2; k++)
        memcpy(hs[k], s0[k], sizeof(float) * (size_t)n);
    host_apply_update(
        hp, NULL, (snn_state){{SNN_OPTIM_MOMENTS > 0 ? hs[0] : NULL, SNN_OPTIM_MOMENTS > 1 ? hs[1] : NULL}},
        from_bf16 ? NULL : g, from_bf16 ? g16 : NULL, n, &rate, NULL);
    for (int misalign = 0; misalign < 2; misalign++)
        device_update(n, misalign, p, s0, g, from_bf16 ? g16 : NULL, drate, out_p[misalign], out_s[misalign],
                      why);
    compare(why, "p", out_p[0], hp, n, 1e-5);
    same_bits(why, "p, aligned and misaligned", out_p[0], out_p[1], sizeof(float) * (size_t)n);
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++) {
        compare(why, k ? "state 1" : "state 0", out_s[0][k], hs[k], n, 1e-5);
        same_bits(why, "state, aligned and misaligned", out_s[0][k], out_s[1][k], sizeof(float) * (size_t)n);
    }
    report(name, why);
    snn_rt_free(drate);
    free(p), free(g), free(g16), free(hp), free(s0[0]), free(s0[1]), free(hs[0]), free(hs[1]);
    for (int a = 0; a < 2; a++)
        free(out_p[a]), free(out_s[a][0]), free(out_s[a][1]);
}

#ifdef CONFIG_GEMM_TWINS
/* v as a twin holds it (round to nearest even), as a float. */
static float twin_rounded(float v)
{
#if defined(CONFIG_PRECISION_BF16)
    return __bfloat162float(__float2bfloat16_rn(v));
#else
    return __half2float(__float2half_rn(v));
#endif
}

static float *twin_rounded_copy(const float *src, long n)
{
    float *r = host_floats(n);
    for (long i = 0; i < n; i++)
        r[i] = twin_rounded(src[i]);
    return r;
}

/* The output layer's step (kernels/cuda/output.cu) on M rows of K inputs, as its four ops, each against the
 * host's op on the GPU's inputs (the twins' roundings, the GPU's logits and their gradients): the same
 * products summed in another order; with dx, its column sums (the bias gradient below) the bias kernel's
 * bits on the GPU's dx. Twice from the same state, the same bits; misaligned: the one-element loads.
 * with_dx 0: an output layer that is the model's only layer (no input gradient). */
static void test_output_step(int M, int K, int misalign, int with_dx)
{
    enum { STEP = 2 };
    const int N = SNN_CLASSES, S = SNN_OPTIM_MOMENTS;
    char name[256], why[256] = "";
    snprintf(name, sizeof name, "output_step M=%d K=%d%s%s", M, K, misalign ? " misaligned" : "",
             with_dx ? "" : " without input gradient");
    const long nx = (long)M * K, nw = (long)N * K, nz = (long)M * N;
    float *x = random_floats(nx, 1.0f), *w0 = random_floats(nw, 1.0f), *b0 = random_floats(N, 1.0f);
    /* moments from 0, as a run's first step: the first then holds the gradient (SGD's momentum) or
     * (1 - beta1) times it (AdamW's), so a gradient off by one row in a thousand shows */
    float *sw0[2] = {host_floats(nw), host_floats(nw)}, *sb0[2] = {host_floats(N), host_floats(N)};
    for (int k = 0; k < 2; k++) {
        memset(sw0[k], 0, sizeof(float) * (size_t)nw);
        memset(sb0[k], 0, sizeof(float) * N);
    }
    uint8_t *y = (uint8_t *)snn_xmalloc((size_t)M, "labels");
    for (int i = 0; i < M; i++)
        y[i] = (uint8_t)(rng_next() % N);
    const float scale = 1.25f;
    const int32_t hstep = STEP;

    dbuf dx_in = dev_floats(x, nx, misalign), dw = dev_floats(NULL, nw, misalign),
         db = dev_floats(NULL, N, 0);
    dbuf dz = dev_floats(NULL, nz, 0), ddz = dev_floats(NULL, nz, 0), ddx = dev_floats(NULL, nx, misalign);
    dbuf dsums = dev_floats(NULL, K, misalign), dref = dev_floats(NULL, K, 0);
    dbuf dloss = dev_floats(NULL, STEP + 1, 0), dsw[2], dsb[2];
    snn_state sw = {{NULL, NULL}}, sb = {{NULL, NULL}};
    for (int k = 0; k < S; k++) {
        dsw[k] = dev_floats(NULL, nw, misalign), dsb[k] = dev_floats(NULL, N, 0);
        sw.m[k] = dsw[k].p, sb.m[k] = dsb[k].p;
    }
    int32_t *dcorrect = (int32_t *)snn_rt_alloc(sizeof(int32_t) * (STEP + 1));
    int32_t *dstep = (int32_t *)snn_rt_alloc(sizeof(int32_t));
    uint8_t *dy = (uint8_t *)snn_rt_alloc((size_t)M);
    snn_rt_upload(dy, y, (size_t)M);
    snn_rt_upload(dstep, &hstep, sizeof hstep);

    float *z[2], *g[2], *gx[2], *gw[2], *gb[2], *sums[2], *gsw[2][2] = {}, *gsb[2][2] = {}, loss[2];
    int32_t correct[2];
    for (int run = 0; run < 2; run++) {
        dev_upload(dw, w0);
        snn_rt_upload(db.p, b0, sizeof(float) * N);
        for (int k = 0; k < S; k++) {
            snn_rt_upload(sw.m[k], sw0[k], sizeof(float) * (size_t)nw);
            snn_rt_upload(sb.m[k], sb0[k], sizeof(float) * N);
        }
        poison(dz.p, sizeof(float) * (size_t)nz), poison(ddz.p, sizeof(float) * (size_t)nz);
        poison(ddx.p, sizeof(float) * (size_t)nx), poison(dloss.p, sizeof(float) * (STEP + 1));
        poison(dcorrect, sizeof(int32_t) * (STEP + 1)), poison(dsums.p, sizeof(float) * (size_t)K);
        cuda_output_step(dz.p, ddz.p, tw(ddz), dloss.p, dcorrect, with_dx ? ddx.p : NULL,
                         with_dx ? tw(ddx) : NULL, dx_in.p, tw(dx_in), dw.p, tw(dw), sw, db.p, sb, dy, dstep,
                         scale, M, K, rate_dev, with_dx ? dsums.p : NULL);
        z[run] = host_floats(nz), g[run] = host_floats(nz), gx[run] = host_floats(nx);
        gw[run] = host_floats(nw), gb[run] = host_floats(N), sums[run] = host_floats(K);
        snn_rt_download(sums[run], dsums.p, sizeof(float) * (size_t)K);
        snn_rt_download(z[run], dz.p, sizeof(float) * (size_t)nz);
        snn_rt_download(g[run], ddz.p, sizeof(float) * (size_t)nz);
        snn_rt_download(gx[run], ddx.p, sizeof(float) * (size_t)nx);
        snn_rt_download(gw[run], dw.p, sizeof(float) * (size_t)nw);
        snn_rt_download(gb[run], db.p, sizeof(float) * N);
        snn_rt_download(&loss[run], dloss.p + STEP, sizeof(float));
        snn_rt_download(&correct[run], dcorrect + STEP, sizeof(int32_t));
        for (int k = 0; k < S; k++) {
            gsw[run][k] = host_floats(nw), gsb[run][k] = host_floats(N);
            snn_rt_download(gsw[run][k], sw.m[k], sizeof(float) * (size_t)nw);
            snn_rt_download(gsb[run][k], sb.m[k], sizeof(float) * N);
        }
    }
    /* each op on the GPU's inputs */
    float *xr = twin_rounded_copy(x, nx), *wr = twin_rounded_copy(w0, nw), *gr = twin_rounded_copy(g[0], nz);
    float *want_z = host_floats(nz), *want_g = host_floats(nz), *want_x = host_floats(nx);
    float hloss[STEP + 1];
    int32_t hcorrect[STEP + 1];
    host_linear_forward(want_z, NULL, xr, NULL, wr, NULL, b0, M, N, K, 0, NULL);
    compare(why, "logits", z[0], want_z, nz, SNN_TOL_STEP_OP);
    host_softmax_xent(want_g, NULL, hloss, hcorrect, z[0], y, &hstep, M);
    compare(why, "dlogits", g[0], want_g, nz, TOL_FP32);
    compare(why, "loss", &loss[0], &hloss[STEP], 1, TOL_FP32);
    if (correct[0] != hcorrect[STEP])
        set_why(why, "correct = %d, host %d on the GPU's logits", correct[0], hcorrect[STEP]);
    check_twin(why, "dlogits", ddz, g[0]);
    if (with_dx) {
        host_linear_backward_input(want_x, NULL, gr, NULL, wr, NULL, x, scale, M, N, K);
        compare(why, "dx", gx[0], want_x, nx, SNN_TOL_STEP_OP);
        check_twin(why, "dx", ddx, gx[0]);
        float *want_s = host_floats(K);
        host_bias_grad(want_s, gx[0], K, M, K);
        compare(why, "dx's column sums", sums[0], want_s, K, TOL_FP32);
        gemm_bias_grad(dref.p, ddx.p, K, M, K);
        snn_rt_download(want_s, dref.p, sizeof(float) * (size_t)K);
        same_bits(why, "dx's column sums against the bias kernel's", sums[0], want_s,
                  sizeof(float) * (size_t)K);
        same_bits(why, "dx's column sums", sums[0], sums[1], sizeof(float) * (size_t)K);
        free(want_s);
    } else {
        for (long i = 0; i < nx; i++)
            if (!isnan(gx[0][i])) {
                set_why(why, "dx written although NULL was passed");
                break;
            }
    }
    float *hw = copy_floats(w0, nw), *hb = copy_floats(b0, N);
    snn_state hsw = {{copy_floats(sw0[0], nw), copy_floats(sw0[1], nw)}};
    snn_state hsb = {{copy_floats(sb0[0], N), copy_floats(sb0[1], N)}};
    const snn_state none = {{NULL, NULL}};
    host_linear_backward_weight_update(hw, NULL, hsw, NULL, none, gr, NULL, xr, NULL, M, N, K, &rate_host);
    host_bias_update(hb, hsb, g[0], M, N, &rate_host); /* from the FP32 gradients, as the GPU's */
    compare(why, "w", gw[0], hw, nw, SNN_TOL_STEP_OP);
    compare(why, "b", gb[0], hb, N, TOL_FP32);
    float *step_gpu = host_floats(nw), *step_host = host_floats(nw); /* the updates (plain SGD's: lr x g) */
    for (long i = 0; i < nw; i++)
        step_gpu[i] = gw[0][i] - w0[i], step_host[i] = hw[i] - w0[i];
    compare(why, "w's update", step_gpu, step_host, nw, SNN_TOL_STEP_OP);
    free(step_gpu), free(step_host);
    for (int k = 0; k < S; k++) {
        compare(why, k ? "state 1" : "state 0", gsw[0][k], hsw.m[k], nw, SNN_TOL_STEP_OP);
        compare(why, k ? "bias state 1" : "bias state 0", gsb[0][k], hsb.m[k], N, TOL_FP32);
        same_bits(why, "state", gsw[0][k], gsw[1][k], sizeof(float) * (size_t)nw);
        same_bits(why, "bias state", gsb[0][k], gsb[1][k], sizeof(float) * N);
    }
    check_twin(why, "w", dw, gw[1]);
    same_bits(why, "logits", z[0], z[1], sizeof(float) * (size_t)nz);
    same_bits(why, "dlogits", g[0], g[1], sizeof(float) * (size_t)nz);
    same_bits(why, "dx", gx[0], gx[1], sizeof(float) * (size_t)nx);
    same_bits(why, "w", gw[0], gw[1], sizeof(float) * (size_t)nw);
    same_bits(why, "b", gb[0], gb[1], sizeof(float) * N);
    same_bits(why, "loss", &loss[0], &loss[1], sizeof(float));
    if (correct[0] != correct[1])
        set_why(why, "correct: second run differs from the first (not deterministic)");
    report(name, why);

    dev_free(dx_in), dev_free(dw), dev_free(db), dev_free(dz), dev_free(ddz), dev_free(ddx), dev_free(dloss);
    dev_free(dsums), dev_free(dref);
    for (int k = 0; k < S; k++)
        dev_free(dsw[k]), dev_free(dsb[k]);
    snn_rt_free(dcorrect), snn_rt_free(dstep), snn_rt_free(dy);
    for (int run = 0; run < 2; run++) {
        free(z[run]), free(g[run]), free(gx[run]), free(gw[run]), free(gb[run]), free(sums[run]);
        for (int k = 0; k < S; k++)
            free(gsw[run][k]), free(gsb[run][k]);
    }
    for (int k = 0; k < 2; k++)
        free(sw0[k]), free(sb0[k]), free(hsw.m[k]), free(hsb.m[k]);
    free(x), free(w0), free(b0), free(y), free(xr), free(wr), free(gr), free(want_z), free(want_g),
        free(want_x);
    free(hw), free(hb);
}
#endif

/* ---- elementwise kernels -------------------------------------------------------- */

/* augment: a training step's gather of epoch 3 (translated under CONFIG_TRAIN_AUGMENT_SHIFT, distorted under
 * TRAIN_AUGMENT_AFFINE or _ELASTIC: then the same bits as the host's, kernels/distort.h); 2: as data-parallel
 * rank 1 of 3 gathers its share of a batch of 3 x rows. */
static void test_gather(int count, int rows, int step, int with_order, int augment)
{
    char name[256], why[256] = "";
    snprintf(name, sizeof name, "gather_batch rows=%d step=%d of %d images%s%s%s", rows, step, count,
             with_order ? " shuffled" : "", augment ? " augmented" : "", augment == 2 ? " as rank 1 of 3" : "");
    long npx = (long)count * SNN_INPUT_DIM, nx = (long)rows * SNN_INPUT_DIM;
    uint8_t *images = (uint8_t *)snn_xmalloc((size_t)npx, "images");
    uint8_t *labels = (uint8_t *)snn_xmalloc((size_t)count, "labels");
    int32_t *order = (int32_t *)snn_xmalloc(sizeof(int32_t) * (size_t)count, "order");
    for (long i = 0; i < npx; i++)
        images[i] = (uint8_t)(rng_next() >> 56);
    for (int i = 0; i < count; i++) {
        labels[i] = (uint8_t)(rng_next() % SNN_CLASSES);
        order[i] = i;
    }
    for (int i = count - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)(rng_next() % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    int32_t hstep = step, epoch = 3;
    const snn_noise none = {};
    snn_noise hnoise = snn_noise_of_seed(0x5eed0000002aull, &epoch);
    if (augment == 2)
        hnoise.row0 = rows, hnoise.batch = 3 * rows;
    float *ref = host_floats(nx), *x1 = host_floats(nx), *x2 = host_floats(nx);
    uint8_t *yref = (uint8_t *)snn_xmalloc((size_t)rows, "labels"), *y1 = (uint8_t *)snn_xmalloc((size_t)rows, "y"),
            *y2 = (uint8_t *)snn_xmalloc((size_t)rows, "y");
    host_gather_batch(ref, NULL, yref, images, labels, with_order ? order : NULL, &hstep, rows,
                      SNN_PIXEL_MEAN, SNN_PIXEL_STD, augment ? hnoise : none, 0, NULL);

    uint8_t *dimages = (uint8_t *)snn_rt_alloc((size_t)npx), *dlabels = (uint8_t *)snn_rt_alloc((size_t)count);
    int32_t *dorder = (int32_t *)snn_rt_alloc(sizeof(int32_t) * (size_t)count);
    int32_t *dstep = (int32_t *)snn_rt_alloc(sizeof(int32_t)), *depoch = (int32_t *)snn_rt_alloc(sizeof(int32_t));
    snn_noise dnoise = hnoise;
    dnoise.epoch = depoch;
    snn_rt_upload(depoch, &epoch, sizeof(epoch));
    float *dx = (float *)snn_rt_alloc(sizeof(float) * (size_t)nx);
    uint8_t *dy = (uint8_t *)snn_rt_alloc((size_t)rows);
    snn_rt_upload(dimages, images, (size_t)npx);
    snn_rt_upload(dlabels, labels, (size_t)count);
    snn_rt_upload(dorder, order, sizeof(int32_t) * (size_t)count);
    snn_rt_upload(dstep, &hstep, sizeof(int32_t));
    float *xs[2] = {x1, x2};
    uint8_t *ys[2] = {y1, y2};
    for (int run = 0; run < 2; run++) {
        poison(dx, sizeof(float) * (size_t)nx);
        poison(dy, (size_t)rows);
        cuda_gather_batch(dx, NULL, dy, dimages, dlabels, with_order ? dorder : NULL, dstep, rows,
                          SNN_PIXEL_MEAN, SNN_PIXEL_STD, augment ? dnoise : none, 0, NULL);
        snn_rt_download(xs[run], dx, sizeof(float) * (size_t)nx);
        snn_rt_download(ys[run], dy, (size_t)rows);
    }
    compare(why, "x", x1, ref, nx, TOL_FP32);
    for (long k = 0; augment && SNN_DISTORTS && k < nx; k++)
        if (memcmp(&x1[k], &ref[k], sizeof(float)) != 0) {
            set_why(why, "distorted x[%ld] = %.9g, the host's %.9g: not the same bits", k, x1[k], ref[k]);
            break;
        }
    for (int i = 0; i < rows; i++)
        if (y1[i] != yref[i]) {
            set_why(why, "y[%d] = %d, host %d", i, y1[i], yref[i]);
            break;
        }
    same_bits(why, "x", x1, x2, sizeof(float) * (size_t)nx);
    same_bits(why, "y", y1, y2, (size_t)rows);
    report(name, why);

    snn_rt_free(dimages), snn_rt_free(dlabels), snn_rt_free(dorder), snn_rt_free(dstep), snn_rt_free(depoch),
        snn_rt_free(dx), snn_rt_free(dy);
    free(images), free(labels), free(order), free(ref), free(x1), free(x2), free(yref), free(y1), free(y2);
}

/* A training step's gather of rows rows (rank1: as data-parallel rank 1 of a batch of 2 x rows), beside which
 * the first hidden layer's mask is drawn for width units: its bits against the host's draws; then that
 * layer's forward, which must read it rather than draw its own, against the host's of the gathered rows. */
static void test_gather_mask(int rows, int width, int rank1)
{
    char name[256], why[256] = "";
    snprintf(name, sizeof name,
             "gather_batch rows=%d with the mask of a first layer %d wide%s, then its forward", rows, width,
             rank1 ? " as rank 1 of 2" : "");
    /* step 0: the batch is the first 2 x rows images, this process's rows from noise.row0 */
    const long npx = 2L * rows * SNN_INPUT_DIM, n = (long)rows * width, bytes = (n + 7) / 8;
    uint8_t *images = (uint8_t *)snn_xmalloc((size_t)npx, "images");
    uint8_t *labels = (uint8_t *)snn_xmalloc(2 * (size_t)rows, "labels");
    for (long i = 0; i < npx; i++)
        images[i] = (uint8_t)(rng_next() >> 56);
    for (int i = 0; i < 2 * rows; i++)
        labels[i] = (uint8_t)(rng_next() % SNN_CLASSES);
    int32_t clock[2] = {0, 3}; /* the step, its epoch */
    snn_noise noise = snn_noise_of_seed(0x5eed0000002bull, &clock[1]);
    noise.row0 = rank1 ? rows : 0, noise.batch = 2 * rows;
    const uint32_t first = (uint32_t)noise.row0 * (uint32_t)width;
    int32_t *dclock = (int32_t *)snn_rt_alloc(sizeof clock);
    snn_rt_upload(dclock, clock, sizeof clock);
    snn_noise dnoise = noise;
    dnoise.epoch = dclock + 1;
    uint8_t *dimages = (uint8_t *)snn_rt_alloc((size_t)npx),
            *dlabels = (uint8_t *)snn_rt_alloc(2 * (size_t)rows);
    uint8_t *dy = (uint8_t *)snn_rt_alloc((size_t)rows);
    snn_rt_upload(dimages, images, (size_t)npx);
    snn_rt_upload(dlabels, labels, 2 * (size_t)rows);
    float *w = random_floats((long)width * SNN_INPUT_DIM, 1.0f), *y = host_floats(n), *ref = host_floats(n);
    float *x = host_floats((long)rows * SNN_INPUT_DIM);
    dbuf dx = dev_floats(NULL, (long)rows * SNN_INPUT_DIM, 0),
         dw = dev_floats(w, (long)width * SNN_INPUT_DIM, 0);
    dbuf dout = dev_floats(NULL, n, 0);
    uint8_t *bits = (uint8_t *)snn_xmalloc((size_t)bytes, "mask");

    /* zeros, not poison's ones: at a drop rate of 0.1 a byte of all kept units is the likeliest */
    CUDA_CHECK(cudaMemsetAsync(masks, 0, (size_t)masks_bytes, snn_stream()));
    cuda_gather_batch(dx.p, NULL, dy, dimages, dlabels, NULL, dclock, rows, SNN_PIXEL_MEAN, SNN_PIXEL_STD,
                      dnoise, width, NULL);
    snn_rt_download(bits, masks, (size_t)bytes); /* layer 0's: the first of the two */
    for (long e = 0; e < n && !why[0]; e++) {
        const int got = bits[e / 8] >> e % 8 & 1;
        if (got != snn_dropout_keeps(noise.key, clock[1], clock[0], 0, first + (uint32_t)e))
            set_why(why, "mask bit %ld is %d, not the host's draw", e, got);
    }
    const snn_drop drop = {dnoise, dclock, 0, 0};
    path_start();
    cuda_linear_forward(dout.p, NULL, dx.p, NULL, dw.p, NULL, NULL, rows, width, SNN_INPUT_DIM, 1, &drop);
    if (!why[0] && !cuda_gemm_path_since(path_before).mask_ahead)
        set_why(why, "the forward did not read the mask drawn beside the gather");
    snn_rt_download(y, dout.p, sizeof(float) * (size_t)n);
    snn_rt_download(x, dx.p, sizeof(float) * (size_t)rows * SNN_INPUT_DIM);
    const snn_drop hdrop = {noise, &clock[0], 0, 0};
    host_linear_forward(ref, NULL, x, NULL, w, NULL, NULL, rows, width, SNN_INPUT_DIM, 1, &hdrop);
    compare(why, "y", y, ref, n, SNN_TOL_GEMM);
    for (long e = 0; e < n && !why[0]; e++)
        if (!snn_dropout_keeps(noise.key, clock[1], clock[0], 0, first + (uint32_t)e) && y[e] != 0.0f)
            set_why(why, "y[%ld] = %g where dropout drops it", e, y[e]);
    report(name, why);

    dev_free(dx), dev_free(dw), dev_free(dout);
    snn_rt_free(dclock), snn_rt_free(dimages), snn_rt_free(dlabels), snn_rt_free(dy);
    free(images), free(labels), free(w), free(y), free(ref), free(x), free(bits);
}

static void test_softmax_xent(int rows, int with_grad)
{
    enum { SLOTS = 5, STEP = 3 };
    char name[256], why[256] = "";
    snprintf(name, sizeof name, "softmax_xent rows=%d%s", rows, with_grad ? " with dlogits" : " loss only");
    long nz = (long)rows * SNN_CLASSES;
    float *logits = random_floats(nz, 4.0f);
    uint8_t *y = (uint8_t *)snn_xmalloc((size_t)rows, "labels");
    for (int i = 0; i < rows; i++)
        y[i] = (uint8_t)(rng_next() % SNN_CLASSES);
    int32_t hstep = STEP, ref_correct[SLOTS] = {0}, correct[2][SLOTS];
    float ref_loss[SLOTS] = {0}, loss[2][SLOTS];
    float *ref_d = host_floats(nz), *d[2] = {host_floats(nz), host_floats(nz)};
    host_softmax_xent(with_grad ? ref_d : NULL, NULL, ref_loss, ref_correct, logits, y, &hstep, rows);

    dbuf dz = dev_floats(logits, nz, 0), dd = dev_floats(NULL, nz, 0), dloss = dev_floats(NULL, SLOTS, 0);
    int32_t *dcorrect = (int32_t *)snn_rt_alloc(sizeof(int32_t) * SLOTS);
    int32_t *dstep = (int32_t *)snn_rt_alloc(sizeof(int32_t));
    uint8_t *dy = (uint8_t *)snn_rt_alloc((size_t)rows);
    snn_rt_upload(dy, y, (size_t)rows);
    snn_rt_upload(dstep, &hstep, sizeof(int32_t));
    for (int run = 0; run < 2; run++) {
        poison(dd.p, sizeof(float) * (size_t)nz);
        poison(dloss.p, sizeof(float) * SLOTS);
        poison(dcorrect, sizeof(int32_t) * SLOTS);
        cuda_softmax_xent(with_grad ? dd.p : NULL, with_grad ? tw(dd) : NULL, dloss.p, dcorrect, dz.p, dy, dstep, rows);
        snn_rt_download(d[run], dd.p, sizeof(float) * (size_t)nz);
        snn_rt_download(loss[run], dloss.p, sizeof(float) * SLOTS);
        snn_rt_download(correct[run], dcorrect, sizeof(int32_t) * SLOTS);
    }
    compare(why, "loss[step]", &loss[0][STEP], &ref_loss[STEP], 1, TOL_FP32);
    if (correct[0][STEP] != ref_correct[STEP])
        set_why(why, "correct[step] = %d, host %d", correct[0][STEP], ref_correct[STEP]);
    for (int i = 0; i < SLOTS; i++)
        if (i != STEP && (!isnan(loss[0][i]) || correct[0][i] != -1))
            set_why(why, "wrote loss/correct slot %d, not only slot *step = %d", i, STEP);
    if (with_grad)
        compare(why, "dlogits", d[0], ref_d, nz, TOL_FP32);
    else
        for (long i = 0; i < nz; i++)
            if (!isnan(d[0][i])) {
                set_why(why, "dlogits written although NULL was passed (?)");
                break;
            }
    same_bits(why, "loss", loss[0], loss[1], sizeof loss[0]);
    same_bits(why, "correct", correct[0], correct[1], sizeof correct[0]);
    same_bits(why, "dlogits", d[0], d[1], sizeof(float) * (size_t)nz);
    report(name, why);

    dev_free(dz), dev_free(dd), dev_free(dloss);
    snn_rt_free(dcorrect), snn_rt_free(dstep), snn_rt_free(dy);
    free(logits), free(y), free(ref_d), free(d[0]), free(d[1]);
}

static void test_step_advance(void)
{
    char why[256] = "";
    int32_t h = 41, got = 0;
    int32_t *d = (int32_t *)snn_rt_alloc(sizeof(int32_t));
    snn_rt_upload(d, &h, sizeof h);
    for (int i = 0; i < 3; i++) {
        cuda_step_advance(d);
        host_step_advance(&h);
    }
    snn_rt_download(&got, d, sizeof got);
    if (got != h)
        set_why(why, "*step = %d after 3 calls from 41, host %d", got, h);
    report("step_advance", why);
    snn_rt_free(d);
}

__global__ void scaled_math_kernel(float *r, float *q, const float *x, const float *m, const float *d, long n)
{
    const long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) {
        r[i] = snn_sqrtf_scaled(x[i]);
        q[i] = snn_divf_scaled(m[i], d[i]);
    }
}

/* The optimizer's square root and division on the device (kernels/optim.h), scaled off sqrt.rn's and div.rn's
 * slow paths, against the host's IEEE sqrtf and '/' (the bits, a subnormal quotient within 2^-149), subnormals
 * kept (the host's flush turned off for the reference, as the GPU does not flush). */
static void test_scaled_math(void)
{
    char why[256] = "";
    const long n = SCALED_MATH_CASES;
    float *h = host_floats(5 * n), *x = h, *m = h + n, *d = h + 2 * n, *r = h + 3 * n, *q = h + 4 * n;
    scaled_math_cases(x, m, d);
    float *dev = (float *)snn_rt_alloc(sizeof(float) * 5 * (size_t)n);
    snn_rt_upload(dev, h, sizeof(float) * 3 * (size_t)n);
    scaled_math_kernel<<<(unsigned)((n + 255) / 256), 256, 0, snn_stream()>>>(dev + 3 * n, dev + 4 * n, dev, dev + n,
                                                                             dev + 2 * n, n);
    CUDA_CHECK_LAUNCH();
    snn_rt_download(r, dev + 3 * n, sizeof(float) * 2 * (size_t)n);
    const unsigned env = subnormals_kept();
    scaled_math_compare("on the GPU", x, m, d, r, q, why);
    subnormals_restore(env);
    report("optimizer's scaled sqrt and division on the GPU: IEEE's bits (a subnormal quotient within 2^-149)", why);
    snn_rt_free(dev);
    free(h);
}

/* The sweep's division operands, case i: its first 2^31 cases every pair of bit patterns a hash gives
 * (|m| and d over the whole finite range, d from subnormal to infinity); the next 2^32 every significand of
 * d twice, 256 numerators each time, within 2^40 of it, so that most quotients are normal. */
static __device__ void sweep_operands(uint64_t i, float *m, float *d)
{
    uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 31)) * 0xbf58476d1ce4e5b9ull, h ^= h >> 29;
    const uint32_t lo = (uint32_t)h, hi = (uint32_t)(h >> 32);
    if (i < (1ull << 31)) {
        *m = __uint_as_float(lo % 0x7f800000u | (hi & 0x80000000u)); /* finite, either sign */
        *d = __uint_as_float(hi % 0x7f800000u + 1u);                 /* (0, infinity] */
        return;
    }
    const uint32_t sig = (uint32_t)(i >> 8) & 0x007fffffu;
    const int e = (int)(hi % 254u) + 1, em = min(max(e + (int)(lo >> 24) % 81 - 40, 1), 254);
    *d = __uint_as_float((uint32_t)e << 23 | sig);
    *m = __uint_as_float((lo & 0x807fffffu) | (uint32_t)em << 23);
}

/* Case i of the sweep against sqrt.rn and div.rn: the first 2^31 cases every x in [0, 2^128] by its bits
 * (and -0), then the divisions; a mismatch counted, the first by index kept. */
__global__ void scaled_math_sweep_kernel(unsigned long long *bad, unsigned long long *first, uint64_t cases)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < cases;
         i += (uint64_t)gridDim.x * blockDim.x) {
        int wrong;
        if (i < (1ull << 31)) {
            const float x = __uint_as_float(i <= 0x7f800000u ? (uint32_t)i : 0x80000000u);
            wrong = __float_as_uint(snn_sqrtf_scaled(x)) != __float_as_uint(__fsqrt_rn(x));
        } else {
            float m, d;
            sweep_operands(i - (1ull << 31), &m, &d);
            wrong = !scaled_quotient_ok(snn_divf_scaled(m, d), __fdiv_rn(m, d));
        }
        if (wrong) {
            atomicAdd(bad, 1ull);
            atomicMin(first, (unsigned long long)i);
        }
    }
}

/* The same on the device alone, 2^33 cases against the GPU's own sqrt.rn and div.rn: every x >= 0 and 6 G
 * divisions (the operands' ranges: sweep_operands). The fast paths the update takes without a branch must
 * be exact wherever the scaled operands fall, not only on the sample above. */
static void test_scaled_math_sweep(void)
{
    char why[256] = "";
    const uint64_t cases = 1ull << 33;
    unsigned long long h[2] = {0, ~0ull};
    unsigned long long *dev = (unsigned long long *)snn_rt_alloc(sizeof h);
    snn_rt_upload(dev, h, sizeof h);
    scaled_math_sweep_kernel<<<4096, 256, 0, snn_stream()>>>(dev, dev + 1, cases);
    CUDA_CHECK_LAUNCH();
    snn_rt_download(h, dev, sizeof h);
    if (h[0])
        set_why(why, "%llu of %llu cases wrong, the first case %llu (%s)", h[0], (unsigned long long)cases,
                h[1], h[1] < (1ull << 31) ? "sqrt" : "division");
    report("optimizer's sqrt and division, 2^33 cases on the GPU: div.rn's and sqrt.rn's bits", why);
    snn_rt_free(dev);
}

/* The clock on the device against the host's, at every step of a short run that crosses epochs: schedule
 * at each epoch's start, then each step a training gather (one row) writing its step's factors and an update
 * (one parameter) moving the step on (the factors within 1e-6: the GPU's cosf and powf are not the host's).
 */
static void test_clock(void)
{
    char why[256] = "";
    struct {
        int32_t epoch, step;
        snn_rate rate;
    } h = {0, 0, {0, 0, 0, 0}}, got;
    auto *d = (decltype(h) *)snn_rt_alloc(sizeof h);
    snn_rt_upload(d, &h, sizeof h);
    const snn_clock dc = {&d->epoch, &d->step, &d->rate, 4, 12}, hc = {&h.epoch, &h.step, &h.rate, 4, 12};
    uint8_t images[4 * SNN_INPUT_DIM] = {0}, labels[4] = {0}, y;
    float x[SNN_INPUT_DIM], p = 0.5f, g = 0.25f, hm[2] = {0, 0};
    uint8_t *dimages = (uint8_t *)snn_rt_alloc(sizeof images),
            *dlabels = (uint8_t *)snn_rt_alloc(sizeof labels);
    uint8_t *dy = (uint8_t *)snn_rt_alloc(1);
    float *dx = (float *)snn_rt_alloc(sizeof x), *dp = (float *)snn_rt_alloc(4 * sizeof(float));
    snn_rt_upload(dimages, images, sizeof images);
    snn_rt_upload(dlabels, labels, sizeof labels);
    const float init[4] = {p, g, 0, 0}; /* the parameter, its gradient, its moments */
    snn_rt_upload(dp, init, sizeof init);
    const snn_noise none = {};
    for (int epoch = 0; epoch < 3; epoch++) {
        h.epoch = epoch, h.step = 0;
        snn_rt_upload(d, &h, 2 * sizeof(int32_t));
        cuda_schedule(dc);
        host_schedule(hc);
        for (int s = 0; s < 4; s++) {
            h.rate = (snn_rate){NAN, NAN, NAN, NAN}; /* so that each gather must write its step's */
            snn_rt_upload(&d->rate, &h.rate, sizeof h.rate);
            cuda_gather_batch(dx, NULL, dy, dimages, dlabels, NULL, dc.step, 1, 0.0f, 1.0f, none, 0, &dc);
            host_gather_batch(x, NULL, &y, images, labels, NULL, hc.step, 1, 0.0f, 1.0f, none, 0, &hc);
            snn_rt_download(&got, d, sizeof got);
            const float a[4] = {got.rate.lr, got.rate.keep, got.rate.step, got.rate.rsq};
            const float b[4] = {h.rate.lr, h.rate.keep, h.rate.step, h.rate.rsq};
            for (int i = 0; i < 4; i++)
                if (!(fabsf(a[i] - b[i]) <= 1e-6f * fabsf(b[i])))
                    set_why(why, "epoch %d step %d: factor %d is %.9g, the host's %.9g", epoch, s, i, a[i], b[i]);
            cuda_apply_update(dp, NULL, (snn_state){{dp + 2, dp + 3}}, dp + 1, NULL, 1, &d->rate, dc.step);
            host_apply_update(&p, NULL, (snn_state){{&hm[0], &hm[1]}}, &g, NULL, 1, &h.rate, hc.step);
            snn_rt_download(&got, d, sizeof got);
            if (got.step != h.step || got.epoch != h.epoch || h.step != s + 1)
                set_why(
                    why,
                    "epoch %d step %d: after the update the clock reads epoch %d step %d, the host's %d %d",
                    epoch, s, got.epoch, got.step, h.epoch, h.step);
        }
    }
    report("the clock: schedule, a training gather's factors, the update's advance, 3 epochs of 4 steps",
           why);
    snn_rt_free(d), snn_rt_free(dimages), snn_rt_free(dlabels), snn_rt_free(dy), snn_rt_free(dx),
        snn_rt_free(dp);
}

/* snn_rt_run_step: a step that reads its step counter from device memory
 * gives the same results called directly and replayed (as a graph with
 * CONFIG_CUDA_GRAPH: warm-up, capture, replays), with two distinct steps, the
 * second captured beforehand by snn_rt_prepare_step, which runs nothing. */
typedef struct {
    float *x, *w, *y;
    int32_t *step;
    const uint8_t *images, *labels;
    uint8_t *lab;
    int rows, N;
} step_ctx;

static void test_step_fn(void *p)
{
    step_ctx *c = (step_ctx *)p;
    const snn_noise none = {};
    cuda_gather_batch(c->x, NULL, c->lab, c->images, c->labels, NULL, c->step, c->rows, SNN_PIXEL_MEAN,
                      SNN_PIXEL_STD, none, 0, NULL);
    cuda_linear_forward(c->y, NULL, c->x, NULL, c->w, NULL, NULL, c->rows, c->N, SNN_INPUT_DIM, 1, NULL);
    cuda_step_advance(c->step);
}

static void test_run_step(void)
{
    char why[256] = "";
    enum { ROWS = 7, N = 13, STEPS = 5, CTXS = 2 };
    const int count = ROWS * STEPS;
    uint8_t *images = (uint8_t *)snn_xmalloc((size_t)count * SNN_INPUT_DIM, "images");
    uint8_t labels[ROWS * STEPS];
    for (long i = 0; i < (long)count * SNN_INPUT_DIM; i++)
        images[i] = (uint8_t)(rng_next() >> 56);
    for (int i = 0; i < count; i++)
        labels[i] = (uint8_t)(i % SNN_CLASSES);
    float *w = random_floats((long)N * SNN_INPUT_DIM, 0.05f);
    uint8_t *dimages = (uint8_t *)snn_rt_alloc((size_t)count * SNN_INPUT_DIM), *dlabels = (uint8_t *)snn_rt_alloc(count);
    snn_rt_upload(dimages, images, (size_t)count * SNN_INPUT_DIM);
    snn_rt_upload(dlabels, labels, (size_t)count);
    dbuf dw = dev_floats(w, (long)N * SNN_INPUT_DIM, 0);

    step_ctx ctx[CTXS];
    float *ys[CTXS][STEPS];
    for (int c = 0; c < CTXS; c++) {
        int32_t zero = 0;
        ctx[c].x = (float *)snn_rt_alloc(sizeof(float) * ROWS * SNN_INPUT_DIM);
        ctx[c].y = (float *)snn_rt_alloc(sizeof(float) * ROWS * N);
        ctx[c].lab = (uint8_t *)snn_rt_alloc(ROWS);
        ctx[c].step = (int32_t *)snn_rt_alloc(sizeof(int32_t));
        ctx[c].w = dw.p;
        ctx[c].images = dimages;
        ctx[c].labels = dlabels;
        ctx[c].rows = ROWS;
        ctx[c].N = N;
        snn_rt_upload(ctx[c].step, &zero, sizeof zero);
    }
    snn_rt_prepare_step(test_step_fn, &ctx[1]);
    int32_t prepared_step = -1;
    snn_rt_download(&prepared_step, ctx[1].step, sizeof prepared_step);
    if (prepared_step != 0)
        set_why(why, "snn_rt_prepare_step moved the step counter to %d: it ran the step", prepared_step);
    /* the two contexts interleaved, each through snn_rt_run_step */
    for (int s = 0; s < STEPS; s++)
        for (int c = 0; c < CTXS; c++) {
            snn_rt_run_step(test_step_fn, &ctx[c]);
            ys[c][s] = host_floats(ROWS * N);
            snn_rt_download(ys[c][s], ctx[c].y, sizeof(float) * ROWS * N);
        }
    /* the reference: the same step called directly */
    step_ctx direct = ctx[0];
    int32_t zero = 0, final_step = -1;
    snn_rt_upload(direct.step, &zero, sizeof zero);
    float *ref = host_floats(ROWS * N);
    for (int s = 0; s < STEPS; s++) {
        test_step_fn(&direct);
        snn_rt_download(ref, direct.y, sizeof(float) * ROWS * N);
        for (int c = 0; c < CTXS; c++)
            if (memcmp(ref, ys[c][s], sizeof(float) * ROWS * N) != 0)
                set_why(why, "context %d, call %d: output differs from the step run directly", c, s + 1);
    }
    snn_rt_download(&final_step, ctx[1].step, sizeof final_step);
    if (final_step != STEPS)
        set_why(why, "step counter %d after %d calls", final_step, STEPS);
    report(
#ifdef CONFIG_CUDA_GRAPH
        "snn_rt_run_step: two steps, warm-up, capture and graph replays (or a prepared graph's) match direct "
        "calls",
#else
        "snn_rt_run_step: two steps match direct calls (CONFIG_CUDA_GRAPH off)",
#endif
        why);

    for (int c = 0; c < CTXS; c++) {
        snn_rt_free(ctx[c].x), snn_rt_free(ctx[c].y), snn_rt_free(ctx[c].lab), snn_rt_free(ctx[c].step);
        for (int s = 0; s < STEPS; s++)
            free(ys[c][s]);
    }
    dev_free(dw);
    snn_rt_free(dimages), snn_rt_free(dlabels);
    free(images), free(w), free(ref);
}

/* Every GEMM role on each shape, plus the variants (no bias, no ReLU, no
 * mask, misaligned operands). */
static void test_gemm_roles(const shape *shapes, int n)
{
    for (int i = 0; i < n; i++)
        test_forward(shapes[i], 1, 1, 0, -1);
    test_forward((shape){100, 129, 17}, 0, 1, 0, -1);
    test_forward((shape){100, 129, 17}, 1, 0, 0, -1);
    test_forward((shape){64, 256, 784}, 1, 1, 1, -1);
    if (SNN_DROPOUT) { /* the forward GEMM compiles its dropout where the build drops units */
        test_forward((shape){37, 71, 50}, 1, 1, 0, 1);
        test_forward((shape){256, 1024, 784}, 1, 1, 0, 2);
        test_forward((shape){33, 100, 2600}, 1, 1, 1, 1);
        test_forward_pair((shape){37, 71, 50}, 33, 0, 0, 0);
        test_forward_pair((shape){512, 1024, 784}, 1024, 0, 0, 0);
        test_forward_pair((shape){256, 1000, 784}, 1024, 1, 1, 0);
        /* the next mask's first element 129 x 101 */
        test_forward_pair((shape){129, 2048, 520}, 101, 0, 1, 0);
        test_forward_pair((shape){1100, 4096, 256}, 100, 0, 0, 1);
    }
    for (int i = 0; i < n; i++)
        test_backward_input(shapes[i], 1, 0, 1.0f);
    test_backward_input((shape){100, 129, 17}, 0, 0, 1.0f);
    test_backward_input((shape){64, 10, 256}, 1, 1, 1.0f);
    test_backward_input((shape){256, 10, 1024}, 1, 0, 1.25f);
    for (int i = 0; i < n; i++)
        test_backward_weight_update(shapes[i], 0);
    test_backward_weight_update((shape){64, 256, 784}, 1);
    /* a GEMM k long and M x N small, which splits k in tensor-core builds: (M, N, K) = (3, 10, 4100) and
     * (33, 100, 2600) in each role's GEMM, misaligned too */
    test_forward((shape){3, 10, 4100}, 1, 1, 0, -1);
    test_forward((shape){33, 100, 2600}, 1, 1, 1, -1);
    test_backward_input((shape){3, 4100, 10}, 1, 0, 1.0f);
    test_backward_input((shape){33, 2600, 100}, 1, 1, 1.25f);
    test_backward_weight_update((shape){4100, 3, 10}, 0);
    test_backward_weight_update((shape){2600, 33, 100}, 1);
    test_weight_grad(shapes[0]);
    test_weight_grad((shape){64, 256, 784});
    test_weight_grad((shape){3, 4100, 10});
    test_weight_grad((shape){37, 300, 129});
    test_weight_grad((shape){2600, 33, 100}); /* k = the batch long enough to split */
    /* tails of 0-3 after a four-wide part (10250: the 99 % boards' last layer), alone (2, 3), past the grid's
     * 4096-block cap; from BF16 gradients with a tail */
    test_apply_update(1, 0);
    test_apply_update(2, 0);
    test_apply_update(3, 0);
    test_apply_update(4096, 0);
    test_apply_update(4097, 0);
    test_apply_update(10250, 0);
    test_apply_update(100003, 0);
    test_apply_update(4 * 256 * 4096 + 4 * 1000 + 3, 0);
    test_apply_update(4099, 1);
    test_apply_update(100003, 1);
}

/* ---- main ------------------------------------------------------------------------ */

/* --quick: the GEMM roles on a few awkward shapes and the MLP's, on both operand kinds; the autotuner's check
 * of a candidate (tools/make/tune.py), in seconds. */
int main(int argc, char **argv)
{
    const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (argc > 1 && !quick) {
        fprintf(stderr, "usage: test_kernels [--quick]\n");
        return 2;
    }
    if (!snn_rt_gpu_present()) {
        printf("skip - gpu kernels: skipped: no GPU\n");
        return 0;
    }
    snn_device_info info;
    snn_rt_init(&info, 0);
    rate_init();
    TILE_NAME(tile_fwd, GemmTileFwd);
    TILE_NAME(tile_dgrad, GemmTileDgrad);
    TILE_NAME(tile_wgrad, GemmTileWgrad);
    printf("# %s on %s (cc %d.%d), GEMM tiles forward %s, input gradient %s, weight gradient %s, %s GEMMs: "
           "tolerance %.0e (relative, L2; %.0e for the rest)\n",
           SNN_TARGET_NAME, info.name, info.cc / 10, info.cc % 10, tile_fwd, tile_dgrad, tile_wgrad,
           SNN_PRECISION_NAME, SNN_TOL_GEMM, TOL_FP32);
#ifdef CONFIG_GEMM_TENSOR_CORES
    /* a split-K workspace, as the engine binds one (16 Mi floats, more than any config's: these shapes are not
     * the config's): the GEMMs whose tiles leave SMs idle split their k range */
    const long ws_floats = 16L << 20;
    float *ws = (float *)snn_rt_alloc(sizeof(float) * (size_t)ws_floats);
    cuda_gemm_split_k_bind(ws, ws_floats);
#endif
    /* dropout's two masks, as the engine binds them, for 8 Mi elements each (a forward GEMM of these shapes
     * has at most about 4.5 Mi) */
    masks_bytes = 2L << 20;
    masks = (uint8_t *)snn_rt_alloc((size_t)masks_bytes);
    cuda_gemm_dropout_bind(masks, masks_bytes);

    /* Shapes: every size cubed; each dimension swept with the others awkward;
     * the MLP's own (batch 64 and 1000, 784 -> 256 -> 10). */
    static const int sizes[] = {1, 3, 17, 64, 100, 129, 257, 515};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    shape shapes[64];
    int n = 0;
    for (int i = 0; i < nsizes; i++)
        shapes[n++] = (shape){sizes[i], sizes[i], sizes[i]};
    for (int i = 0; i < nsizes; i++) {
        shapes[n++] = (shape){sizes[i], 129, 100};
        shapes[n++] = (shape){100, sizes[i], 129};
        shapes[n++] = (shape){129, 100, sizes[i]};
    }
    static const shape mlp[] = {{64, 256, 784}, {64, 10, 256}, {64, 784, 256}, {1000, 256, 784}, {1000, 10, 256}};
    for (size_t i = 0; i < sizeof mlp / sizeof mlp[0]; i++)
        shapes[n++] = mlp[i];
    static const shape quick_shapes[] = {{17, 129, 100}, {100, 129, 17}, {64, 256, 784}};

    if (quick)
        test_gemm_roles(quick_shapes, (int)(sizeof quick_shapes / sizeof quick_shapes[0]));
    else
        test_gemm_roles(shapes, n);
#ifdef CONFIG_GEMM_TWINS
    /* the same with twins: every N and K a multiple of 8 (16-byte rows), M awkward; some K a multiple of
     * every block tile's k (the copies without zero fill), with M and N awkward too */
    static const shape tma_shapes[] = {{1, 8, 8},        {17, 136, 104}, {100, 8, 520},    {129, 264, 8},
                                       {257, 200, 72},   {515, 64, 40},  {64, 256, 784},   {64, 784, 256},
                                       {1000, 256, 784}, {64, 10, 256},  {32, 1024, 1024}, {600, 1032, 72},
                                       {515, 136, 128}};
    static const shape quick_tma_shapes[] = {{17, 136, 104}, {1000, 256, 784}, {32, 1024, 1024}, {515, 136, 128}};
    twin_mode = 1;
    if (quick)
        test_gemm_roles(quick_tma_shapes, (int)(sizeof quick_tma_shapes / sizeof quick_tma_shapes[0]));
    else
        test_gemm_roles(tma_shapes, (int)(sizeof tma_shapes / sizeof tma_shapes[0]));
    /* the output step: rows from one to past its grid (1024 rows a launch) and its staging (512); K from 1
     * (K % 4 == 0: 8- and 16-byte loads, else one element at a time, as misaligned) */
    static const int output_shapes[][2] = {{1, 8},     {3, 100},   {37, 1000}, {256, 1024},
                                           {515, 136}, {1025, 72}, {64, 2500}, {17, 1}};
    if (SNN_DP_WORLD > 1) {
        printf("skip - output step: skipped: a data-parallel build refuses it (its update would not wait for the "
               "all-reduce)\n");
    } else {
        for (size_t i = 0; i < sizeof output_shapes / sizeof output_shapes[0]; i++)
            if (!quick || i == 3)
                test_output_step(output_shapes[i][0], output_shapes[i][1], 0, 1);
        test_output_step(100, 520, 1, 1);
        test_output_step(64, 784, 0, 0);
    }
    twin_mode = 0;
#endif
    if (!quick) {
        test_gather(300, 100, 2, 1, 0);
        test_gather(300, 100, 1, 0, 0);
        test_gather(17, 1, 16, 1, 0);
        if (SNN_DROPOUT) {
            test_gather_mask(512, 1024, 0);
            test_gather_mask(37, 71, 0);
            test_gather_mask(3, 33, 1);
        }
        if (SNN_AUGMENT_SHIFT > 0 || SNN_DISTORTS) {
            test_gather(300, 100, 2, 1, 1);
            test_gather(17, 1, 16, 1, 1);
            test_gather(300, 50, 1, 1, 2);
        }
        test_softmax_xent(1, 1);
        test_softmax_xent(3, 1);
        test_softmax_xent(64, 1);
        test_softmax_xent(1000, 1);
        test_softmax_xent(1025, 1);
        test_softmax_xent(1000, 0);
        test_step_advance();
        test_clock();
        test_scaled_math();
        test_scaled_math_sweep();
        test_run_step();
    }
    cuda_gemm_dropout_bind(NULL, 0);
    snn_rt_free(masks);
#ifdef CONFIG_GEMM_TENSOR_CORES
    cuda_gemm_split_k_bind(NULL, 0);
    snn_rt_free(ws);
#endif
    return n_failed ? 1 : 0;
}
