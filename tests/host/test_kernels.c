/* Host kernels against naive loops in double precision, on seeded random data
 * of awkward sizes. One line per case: "ok - <name>" or "not ok - <name>: <why>". */
#include "kernels/ops.h"
#include "snn_check.h"
#include "tests/recipe_ref.h"
#include "tests/scaled_math_cases.h"
#include "tests/test_util.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(CONFIG_HOST_OPENMP) && defined(_OPENMP)
#include <omp.h>
#define HAVE_OPENMP 1
#endif

/* The host GEMM promises the plain fmaf chain over k: checked where FMA is one
 * instruction and the build optimises (-O0 leaves a*b+c unfused). */
#if (defined(__FMA__) || defined(__ARM_FEATURE_FMA)) && defined(__OPTIMIZE__)
#define HAVE_HW_FMA 1
#endif

#define TOL_FP32 1e-5

struct shape {
    int M, N, K;
};

/* ---- reporting --------------------------------------------------------------- */

static void report(const char *name, const char *why)
{
    if (why && why[0])
        printf("not ok - %s: %s\n", name, why);
    else
        printf("ok - %s\n", name);
}

/* ---- data -------------------------------------------------------------------- */

static float *random_floats(long n)
{
    float *p = snn_xmalloc(sizeof(float) * (size_t)n, "test data");
    for (long i = 0; i < n; i++)
        p[i] = rng_uniform();
    return p;
}

static float *nan_floats(long n)
{
    float *p = snn_xmalloc(sizeof(float) * (size_t)n, "test output");
    for (long i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

static float *copy_floats(const float *src, long n)
{
    float *p = snn_xmalloc(sizeof(float) * (size_t)n, "test copy");
    memcpy(p, src, sizeof(float) * (size_t)n);
    return p;
}

static double *new_doubles(long n) { return snn_xmalloc(sizeof(double) * (size_t)n, "test reference"); }

/* ---- comparison -------------------------------------------------------------- */

/* ||out - ref|| / ||ref|| below tol, every element written (no NaN left). */
static void compare(const char *what, const float *out, const double *ref, long n, double tol, char *why)
{
    double err2 = 0.0, ref2 = 0.0;
    for (long i = 0; i < n; i++) {
        if (isnan(out[i])) {
            set_why(why, "%s[%ld] not written (NaN)", what, i);
            return;
        }
        double d = out[i] - ref[i];
        err2 += d * d;
        ref2 += ref[i] * ref[i];
    }
    double rel = ref2 > 0.0 ? sqrt(err2 / ref2) : sqrt(err2);
    if (!(rel < tol))
        set_why(why, "%s relative error %.3g >= %.0e", what, rel, tol);
}

static void compare_bits(const char *what, const float *out, const float *expect, long n, char *why)
{
    for (long i = 0; i < n; i++)
        if (memcmp(&out[i], &expect[i], sizeof(float))) {
            set_why(why, "%s[%ld] = %.9g, expected exactly %.9g", what, i, out[i], expect[i]);
            return;
        }
}

/* ---- naive references -------------------------------------------------------- */

static void ref_forward(double *y, const float *x, const float *w, const float *b, int M, int N, int K, int relu)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = b ? b[n] : 0.0;
            for (int k = 0; k < K; k++)
                s += (double)x[(long)m * K + k] * w[(long)n * K + k];
            y[(long)m * N + n] = relu && s < 0.0 ? 0.0 : s;
        }
}

static void ref_backward_input(double *dx, const float *dy, const float *w, const float *act, float scale, int M,
                               int N, int K)
{
    for (int m = 0; m < M; m++) {
        double *row = dx + (long)m * K;
        for (int k = 0; k < K; k++)
            row[k] = 0.0;
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++)
                row[k] += (double)dy[(long)m * N + n] * w[(long)n * K + k];
        for (int k = 0; k < K; k++)
            row[k] = act && !(act[(long)m * K + k] > 0.0f) ? 0.0 : row[k] * scale;
    }
}

static void ref_weight_grad(double *gw, double *gb, const float *dy, const float *x, int M, int N, int K)
{
    for (int n = 0; n < N; n++) {
        double *row = gw + (long)n * K;
        gb[n] = 0.0;
        for (int k = 0; k < K; k++)
            row[k] = 0.0;
        for (int m = 0; m < M; m++) {
            double d = dy[(long)m * N + n];
            gb[n] += d;
            for (int k = 0; k < K; k++)
                row[k] += d * x[(long)m * K + k];
        }
    }
}

/* The update the kernels are checked at: update RATE_T of a run of RATE_TOTAL steps, epochs of RATE_EPOCH. */
#define RATE_T 7
#define RATE_EPOCH 5
#define RATE_TOTAL 40

/* Parameters w0 (state s0[k][i]) with gradient g after one update, in double (tests/recipe_ref.h). */
static void ref_update_all(double *w, double *s[2], const float *w0, float *const s0[2], const double *g, long n)
{
    const double lr = ref_lr(RATE_T, RATE_EPOCH, RATE_TOTAL);
    for (long i = 0; i < n; i++) {
        double st[2] = {0, 0};
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
            st[k] = s0[k][i];
        w[i] = w0[i];
        ref_update(&w[i], st, g[i], lr, RATE_T);
        for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
            s[k][i] = st[k];
    }
}

/* Optimizer state for n parameters: random, AdamW's second moment non-negative; NULL beyond. */
static snn_state random_state(long n)
{
    snn_state st = {{NULL, NULL}};
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++) {
        st.m[k] = random_floats(n);
        for (long i = 0; k == 1 && i < n; i++)
            st.m[k][i] = fabsf(st.m[k][i]) * 0.01f;
    }
    return st;
}

static snn_state copy_state(snn_state a, long n)
{
    snn_state st = {{NULL, NULL}};
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        st.m[k] = copy_floats(a.m[k], n);
    return st;
}

static void free_state(snn_state st)
{
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        free(st.m[k]);
}

static const char *const state_name[2] = {"state 0", "state 1"};

/* ---- GEMM roles -------------------------------------------------------------- */

static void gemm_name(char *name, size_t size, const char *role, struct shape s, const char *variant)
{
    snprintf(name, size, "gemm %s %dx%dx%d%s%s", role, s.M, s.N, s.K, variant[0] ? " " : "", variant);
}

static void check_forward(struct shape s, bool bias, bool relu)
{
    char name[128], why[256] = "";
    const char *variant = bias && relu ? "bias+relu" : bias ? "bias" : relu ? "relu" : "plain";
    gemm_name(name, sizeof name, "forward", s, variant);
    float *x = random_floats((long)s.M * s.K), *w = random_floats((long)s.N * s.K);
    float *b = bias ? random_floats(s.N) : NULL, *y = nan_floats((long)s.M * s.N);
    double *ref = new_doubles((long)s.M * s.N);
    host_linear_forward(y, NULL, x, NULL, w, NULL, b, s.M, s.N, s.K, relu, NULL);
    ref_forward(ref, x, w, b, s.M, s.N, s.K, relu);
    compare("y", y, ref, (long)s.M * s.N, TOL_FP32, why);
    report(name, why);
    free(x), free(w), free(b), free(y), free(ref);
}

/* scale: the kept units' of a dropout (1: none). */
static void check_backward_input(struct shape s, bool mask, float scale)
{
    char name[128], variant[64], why[256] = "";
    snprintf(variant, sizeof variant, "%s, scale %g", mask ? "mask" : "no mask", scale);
    gemm_name(name, sizeof name, "backward_input", s, variant);
    float *dy = random_floats((long)s.M * s.N), *w = random_floats((long)s.N * s.K);
    float *act = mask ? random_floats((long)s.M * s.K) : NULL, *dx = nan_floats((long)s.M * s.K);
    double *ref = new_doubles((long)s.M * s.K);
    host_linear_backward_input(dx, NULL, dy, NULL, w, NULL, act, scale, s.M, s.N, s.K);
    ref_backward_input(ref, dy, w, act, scale, s.M, s.N, s.K);
    compare("dx", dx, ref, (long)s.M * s.K, TOL_FP32, why);
    report(name, why);
    free(dy), free(w), free(act), free(dx), free(ref);
}

/* One update from nonzero state: w, b and their state against the reference. */
static void check_weight_update(struct shape s)
{
    char name[128], why[256] = "";
    long nw = (long)s.N * s.K;
    gemm_name(name, sizeof name, "weight_update", s, "from nonzero state");
    const snn_rate rate = snn_rate_at(RATE_T, RATE_EPOCH, RATE_TOTAL);
    float *dy = random_floats((long)s.M * s.N), *x = random_floats((long)s.M * s.K);
    float *w = random_floats(nw), *b = random_floats(s.N);
    snn_state sw = random_state(nw), sb = random_state(s.N);
    float *w0 = copy_floats(w, nw), *b0 = copy_floats(b, s.N);
    snn_state sw0 = copy_state(sw, nw), sb0 = copy_state(sb, s.N);
    double *gw = new_doubles(nw), *gb = new_doubles(s.N), *rw = new_doubles(nw), *rb = new_doubles(s.N);
    double *rsw[2] = {new_doubles(nw), new_doubles(nw)}, *rsb[2] = {new_doubles(s.N), new_doubles(s.N)};
    host_linear_backward_weight_update(w, NULL, sw, b, sb, dy, NULL, x, NULL, s.M, s.N, s.K, &rate);
    ref_weight_grad(gw, gb, dy, x, s.M, s.N, s.K);
    ref_update_all(rw, rsw, w0, sw0.m, gw, nw);
    ref_update_all(rb, rsb, b0, sb0.m, gb, s.N);
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++) {
        compare(state_name[k], sw.m[k], rsw[k], nw, TOL_FP32, why);
        compare(state_name[k], sb.m[k], rsb[k], s.N, TOL_FP32, why);
    }
    compare("w", w, rw, nw, TOL_FP32, why);
    compare("b", b, rb, s.N, TOL_FP32, why);
    report(name, why);
    free(dy), free(x), free(w), free(b), free(w0), free(b0), free(gw), free(gb), free(rw), free(rb);
    free_state(sw), free_state(sb), free_state(sw0), free_state(sb0);
    for (int k = 0; k < 2; k++)
        free(rsw[k]), free(rsb[k]);
}

/* Without a bias (b = NULL) the update leaves the bias to host_bias_update:
 * the two together give, bit for bit, what the whole op gives. */
static void check_weight_update_split(struct shape s)
{
    char name[128], why[256] = "";
    long nw = (long)s.N * s.K;
    gemm_name(name, sizeof name, "weight_update", s, "no bias, then host_bias_update");
    const snn_rate rate = snn_rate_at(RATE_T, RATE_EPOCH, RATE_TOTAL);
    float *dy = random_floats((long)s.M * s.N), *x = random_floats((long)s.M * s.K);
    float *w = random_floats(nw), *b = random_floats(s.N);
    snn_state sw = random_state(nw), sb = random_state(s.N);
    float *w2 = copy_floats(w, nw), *b2 = copy_floats(b, s.N);
    snn_state sw2 = copy_state(sw, nw), sb2 = copy_state(sb, s.N), none = {{NULL, NULL}};
    host_linear_backward_weight_update(w, NULL, sw, b, sb, dy, NULL, x, NULL, s.M, s.N, s.K, &rate);
    host_linear_backward_weight_update(w2, NULL, sw2, NULL, none, dy, NULL, x, NULL, s.M, s.N, s.K, &rate);
    host_bias_update(b2, sb2, dy, s.M, s.N, &rate);
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++) {
        compare_bits(state_name[k], sw2.m[k], sw.m[k], nw, why);
        compare_bits(state_name[k], sb2.m[k], sb.m[k], s.N, why);
    }
    compare_bits("w", w2, w, nw, why);
    compare_bits("b", b2, b, s.N, why);
    report(name, why);
    free(dy), free(x), free(w), free(b), free(w2), free(b2);
    free_state(sw), free_state(sb), free_state(sw2), free_state(sb2);
}

/* Data parallel's halves of the op: the gradients stored (host_linear_backward_weight), then
 * host_apply_update, give bit for bit what the fused op gives; and the gradients of a range of output rows
 * (dY's columns, rows ldy = N apart) are those rows of the whole. */
static void check_weight_then_update(struct shape s)
{
    char name[128], why[256] = "";
    long nw = (long)s.N * s.K;
    gemm_name(name, sizeof name, "backward_weight", s, "stored, then apply_update; row ranges");
    const snn_rate rate = snn_rate_at(RATE_T, RATE_EPOCH, RATE_TOTAL);
    float *dy = random_floats((long)s.M * s.N), *x = random_floats((long)s.M * s.K);
    float *p = random_floats(nw + s.N); /* w, then b, as the parameters' layout */
    snn_state st = random_state(nw + s.N);
    float *p2 = copy_floats(p, nw + s.N), *g = nan_floats(nw + s.N), *part = nan_floats(nw + s.N);
    snn_state st2 = copy_state(st, nw + s.N), sb = {{st.m[0] ? st.m[0] + nw : NULL, st.m[1] ? st.m[1] + nw : NULL}};
    double *gw = new_doubles(nw), *gb = new_doubles(s.N);
    host_linear_backward_weight_update(p, NULL, st, p + nw, sb, dy, NULL, x, NULL, s.M, s.N, s.K, &rate);
    host_linear_backward_weight(g, g + nw, dy, NULL, s.N, x, NULL, s.M, s.N, s.K);
    host_apply_update(p2, NULL, st2, g, NULL, nw + s.N, &rate, NULL);
    ref_weight_grad(gw, gb, dy, x, s.M, s.N, s.K);
    compare("gw", g, gw, nw, TOL_FP32, why);
    compare("gb", g + nw, gb, s.N, TOL_FP32, why);
    compare_bits("w and b", p2, p, nw + s.N, why);
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        compare_bits(state_name[k], st2.m[k], st.m[k], nw + s.N, why);
    const int third = s.N / 3 + 1;
    for (int r0 = 0; r0 < s.N; r0 += third) {
        const int n = s.N - r0 < third ? s.N - r0 : third;
        host_linear_backward_weight(part + (long)r0 * s.K, part + nw + r0, dy + r0, NULL, s.N, x, NULL, s.M, n, s.K);
    }
    compare_bits("gradients by row ranges", part, g, nw + s.N, why);
    /* from BF16 bits: as from the FP32 values those bits are */
    uint16_t *bf = snn_xmalloc((size_t)(nw + s.N) * sizeof(uint16_t), "bf16 gradients");
    float *p3 = copy_floats(p2, nw + s.N), *p4 = copy_floats(p2, nw + s.N);
    snn_state st3 = copy_state(st2, nw + s.N), st4 = copy_state(st2, nw + s.N);
    for (long i = 0; i < nw + s.N; i++) {
        uint32_t bits;
        memcpy(&bits, &g[i], sizeof(bits));
        bf[i] = (uint16_t)(bits >> 16);
        bits = (uint32_t)bf[i] << 16;
        memcpy(&part[i], &bits, sizeof(bits));
    }
    host_apply_update(p3, NULL, st3, NULL, bf, nw + s.N, &rate, NULL);
    host_apply_update(p4, NULL, st4, part, NULL, nw + s.N, &rate, NULL);
    compare_bits("updated from BF16 gradients", p3, p4, nw + s.N, why);
    free(bf), free(p3), free(p4), free_state(st3), free_state(st4);
    report(name, why);
    free(dy), free(x), free(p), free(p2), free(g), free(part), free(gw), free(gb);
    free_state(st), free_state(st2);
}

#if SNN_OPTIM_MOMENTS == 1
/* SGD's momentum, from 0, holds exactly the gradient after one step. */
static void check_weight_update_fresh(struct shape s)
{
    char name[128], why[256] = "";
    long nw = (long)s.N * s.K;
    gemm_name(name, sizeof name, "weight_update", s, "momentum from 0 holds the gradient");
    const snn_rate rate = snn_rate_at(RATE_T, RATE_EPOCH, RATE_TOTAL);
    float *dy = random_floats((long)s.M * s.N), *x = random_floats((long)s.M * s.K);
    float *w = random_floats(nw), *b = random_floats(s.N);
    float *vw = calloc((size_t)nw, sizeof(float)), *vb = calloc((size_t)s.N, sizeof(float));
    double *gw = new_doubles(nw), *gb = new_doubles(s.N);
    if (!vw || !vb)
        snn_die("out of host memory for the test");
    host_linear_backward_weight_update(w, NULL, (snn_state){{vw, NULL}}, b, (snn_state){{vb, NULL}}, dy, NULL, x,
                                       NULL, s.M, s.N, s.K, &rate);    ref_weight_grad(gw, gb, dy, x, s.M, s.N, s.K);
    compare("vw", vw, gw, nw, TOL_FP32, why);
    compare("vb", vb, gb, s.N, TOL_FP32, why);
    for (long i = 0; i < nw; i++)
        if (vw[i] == 0.0f) {
            set_why(why, "vw[%ld] not written", i);
            break;
        }
    float *sums = snn_xmalloc(sizeof(float) * (size_t)s.N, "test sums");
    for (int n = 0; n < s.N; n++) { /* the bias gradient is summed over m in order */
        sums[n] = 0.0f;
        for (int m = 0; m < s.M; m++)
            sums[n] += dy[(long)m * s.N + n];
    }
    compare_bits("vb", vb, sums, s.N, why);
    report(name, why);
    free(dy), free(x), free(w), free(b), free(vw), free(vb), free(gw), free(gb), free(sums);
}
#endif

#ifdef HAVE_HW_FMA
/* y = x . w^T must be acc = fmaf(x, w, acc) over k in order, whatever the blocking. */
static void check_forward_fma_chain(struct shape s)
{
    char name[128], why[256] = "";
    gemm_name(name, sizeof name, "forward", s, "equals the in-order fmaf chain bitwise");
    float *x = random_floats((long)s.M * s.K), *w = random_floats((long)s.N * s.K);
    float *y = nan_floats((long)s.M * s.N), *chain = nan_floats((long)s.M * s.N);
    host_linear_forward(y, NULL, x, NULL, w, NULL, NULL, s.M, s.N, s.K, 0, NULL);
    for (int m = 0; m < s.M; m++)
        for (int n = 0; n < s.N; n++) {
            float acc = 0.0f;
            for (int k = 0; k < s.K; k++)
                acc = fmaf(x[(long)m * s.K + k], w[(long)n * s.K + k], acc);
            chain[(long)m * s.N + n] = acc;
        }
    compare_bits("y", y, chain, (long)s.M * s.N, why);
    report(name, why);
    free(x), free(w), free(y), free(chain);
}
#endif

#ifdef HAVE_OPENMP
/* Forward and weight update with 1 and with `threads` threads: bitwise equal. */
static void check_thread_determinism(struct shape s, int threads)
{
    char name[128], variant[64], why[256] = "";
    long nw = (long)s.N * s.K;
    snprintf(variant, sizeof variant, "1 vs %d threads bitwise", threads);
    gemm_name(name, sizeof name, "all roles", s, variant);
    float *x = random_floats((long)s.M * s.K), *w = random_floats(nw), *b = random_floats(s.N);
    float *dy = random_floats((long)s.M * s.N);
    snn_state sw = random_state(nw), sb = random_state(s.N);
    const snn_rate rate = snn_rate_at(RATE_T, RATE_EPOCH, RATE_TOTAL);
    float *out[2][5];
    snn_state state[2];
    int saved = omp_get_max_threads();
    omp_set_dynamic(0);
    for (int run = 0; run < 2; run++) {
        float **o = out[run];
        omp_set_num_threads(run ? threads : 1);
        o[0] = nan_floats((long)s.M * s.N), o[1] = nan_floats((long)s.M * s.K);
        o[2] = copy_floats(w, nw), o[3] = NULL, o[4] = copy_floats(b, s.N);
        state[run] = copy_state(sw, nw);
        snn_state sb_run = copy_state(sb, s.N);
        host_linear_forward(o[0], NULL, x, NULL, w, NULL, b, s.M, s.N, s.K, 1, NULL);
        host_linear_backward_input(o[1], NULL, dy, NULL, w, NULL, x, 1.0f, s.M, s.N, s.K);
        host_linear_backward_weight_update(o[2], NULL, state[run], o[4], sb_run, dy, NULL, x, NULL, s.M, s.N, s.K,
                                           &rate);
        free_state(sb_run);
    }
    omp_set_num_threads(saved);
    compare_bits("y", out[1][0], out[0][0], (long)s.M * s.N, why);
    compare_bits("dx", out[1][1], out[0][1], (long)s.M * s.K, why);
    compare_bits("w", out[1][2], out[0][2], nw, why);
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        compare_bits(state_name[k], state[1].m[k], state[0].m[k], nw, why);
    compare_bits("b", out[1][4], out[0][4], s.N, why);
    report(name, why);
    for (int run = 0; run < 2; run++) {
        for (int i = 0; i < 5; i++)
            free(out[run][i]);
        free_state(state[run]);
    }
    free(x), free(w), free(b), free(dy);
    free_state(sw), free_state(sb);
}
#endif

static void check_gemms(void)
{
    const struct shape shapes[] = {
        {1, 1, 1}, {1, 7, 13}, {7, 13, 1}, {13, 1, 7}, {7, 7, 7}, {64, 64, 64}, {100, 129, 300},
        {129, 300, 13}, {300, 13, 129}, {13, 300, 100}, {300, 100, 64}, {1, 300, 129}, {129, 1, 300},
        {64, 256, 784}, {64, 10, 256},
        {CONFIG_HOST_GEMM_MC - 1, CONFIG_HOST_GEMM_NC + 1, CONFIG_HOST_GEMM_KC + 1},
        {CONFIG_HOST_GEMM_MC + 1, CONFIG_HOST_GEMM_NC - 1, CONFIG_HOST_GEMM_KC - 1},
        {2 * CONFIG_HOST_GEMM_MC + 3, 2 * CONFIG_HOST_GEMM_NC + 5, 2 * CONFIG_HOST_GEMM_KC + 7},
        {257, 515, 333},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        check_forward(shapes[i], true, true);
        check_forward(shapes[i], false, false);
        check_backward_input(shapes[i], true, 1.0f);
        check_backward_input(shapes[i], false, 1.0f);
        check_backward_input(shapes[i], true, 1.25f);
        check_weight_update(shapes[i]);
    }
    const struct shape few[] = {{7, 13, 1}, {129, 300, 13}, {257, 515, 333}};
    for (size_t i = 0; i < sizeof few / sizeof few[0]; i++) {
        check_forward(few[i], true, false);
        check_forward(few[i], false, true);
#if SNN_OPTIM_MOMENTS == 1
        check_weight_update_fresh(few[i]);
#endif
        check_weight_update_split(few[i]);
        check_weight_then_update(few[i]);
#ifdef HAVE_HW_FMA
        check_forward_fma_chain(few[i]);
#endif
    }
#ifdef HAVE_OPENMP
    check_thread_determinism((struct shape){257, 515, 333}, 2);
    check_thread_determinism((struct shape){64, 256, 784}, 3);
#endif
}

/* ---- gather_batch ------------------------------------------------------------ */

#define GATHER_IMAGES 50
#define GATHER_ROWS 7

static void check_gather(bool with_order, int32_t step)
{
    char name[128], why[256] = "";
    const int rows = GATHER_ROWS;
    const float mean = 0.1307f, std = 0.3081f;
    snprintf(name, sizeof name, "gather_batch rows=%d step=%d %s", rows, step, with_order ? "with order" : "in order");
    uint8_t *images = snn_xmalloc((size_t)GATHER_IMAGES * SNN_INPUT_DIM, "test images");
    uint8_t labels[GATHER_IMAGES], y[GATHER_ROWS];
    int32_t order[GATHER_IMAGES];
    for (long i = 0; i < (long)GATHER_IMAGES * SNN_INPUT_DIM; i++)
        images[i] = (uint8_t)(rng_next() >> 56);
    for (int i = 0; i < GATHER_IMAGES; i++) {
        labels[i] = (uint8_t)(rng_next() % SNN_CLASSES);
        order[i] = GATHER_IMAGES - 1 - (i * 17) % GATHER_IMAGES; /* a permutation: 17 is prime to 50 */
    }
    memset(y, 0xff, sizeof y);
    float *x = nan_floats((long)rows * SNN_INPUT_DIM);
    double *ref = new_doubles((long)rows * SNN_INPUT_DIM);
    host_gather_batch(x, NULL, y, images, labels, with_order ? order : NULL, &step, rows, mean, std,
                      (snn_noise){0}, 0, NULL);
    for (int i = 0; i < rows; i++) {
        int r = with_order ? order[step * rows + i] : step * rows + i;
        for (int j = 0; j < SNN_INPUT_DIM; j++)
            ref[(long)i * SNN_INPUT_DIM + j] = (images[(long)r * SNN_INPUT_DIM + j] / 255.0 - mean) / std;
        if (y[i] != labels[r])
            set_why(why, "y[%d] = %d, expected label %d of image %d", i, y[i], labels[r], r);
    }
    compare("x", x, ref, (long)rows * SNN_INPUT_DIM, TOL_FP32, why);
    report(name, why);
    free(images), free(x), free(ref);
}

/* Data parallel: a step's batch gathered in shares (rows row0 .. row0 + rows - 1 of `batch`, as each rank
 * gathers its own) is the whole batch's gather, bit for bit, draws included; and so is dropout. */
static void check_batch_shares(int shares)
{
    char name[128], why[256] = "";
    const int share = 3, rows = shares * share;
    const int32_t step = 2, epoch = 1;
    snprintf(name, sizeof name, "gather_batch and dropout in %d shares of %d rows", shares, share);
    uint8_t *images = snn_xmalloc((size_t)GATHER_IMAGES * SNN_INPUT_DIM, "test images");
    uint8_t labels[GATHER_IMAGES], y[GATHER_IMAGES], ys[GATHER_IMAGES];
    int32_t order[GATHER_IMAGES];
    for (long i = 0; i < (long)GATHER_IMAGES * SNN_INPUT_DIM; i++)
        images[i] = (uint8_t)(rng_next() >> 56);
    for (int i = 0; i < GATHER_IMAGES; i++) {
        labels[i] = (uint8_t)(rng_next() % SNN_CLASSES);
        order[i] = GATHER_IMAGES - 1 - (i * 17) % GATHER_IMAGES;
    }
    if ((step + 1) * rows > GATHER_IMAGES)
        snn_die("check_batch_shares: %d shares need more than %d images", shares, GATHER_IMAGES);
    const long n = (long)rows * SNN_INPUT_DIM;
    float *x = nan_floats(n), *xs = nan_floats(n), *t = random_floats((long)rows * 5), *ts = copy_floats(t, rows * 5L);
    snn_noise whole = snn_noise_of_seed(77, &epoch);
    host_gather_batch(x, NULL, y, images, labels, order, &step, rows, 0.1f, 0.3f, whole, 0, NULL);
    const snn_drop whole_drop = {whole, &step, 0, 0};
    host_dropout(t, &whole_drop, rows, 5);
    for (int r = 0; r < shares; r++) {
        snn_noise mine = whole;
        mine.row0 = r * share;
        mine.batch = rows;
        host_gather_batch(xs + (long)r * share * SNN_INPUT_DIM, NULL, ys + r * share, images, labels, order,
                          &step, share, 0.1f, 0.3f, mine, 0, NULL);
        const snn_drop my_drop = {mine, &step, 0, 0};
        host_dropout(ts + r * share * 5L, &my_drop, share, 5);
    }
    compare_bits("x", xs, x, n, why);
    compare_bits("dropped", ts, t, rows * 5L, why);
    if (memcmp(ys, y, (size_t)rows))
        set_why(why, "the shares' labels differ from the whole batch's");
    report(name, why);
    free(images), free(x), free(xs), free(t), free(ts);
}

/* ---- softmax_xent ------------------------------------------------------------ */

struct xent_ref {
    double loss;
    int correct;
};

/* With dz (a training step) the targets and the loss are label-smoothed, as the kernel's. */
static struct xent_ref ref_softmax_xent(double *dz, const float *logits, const uint8_t *y, int rows)
{
    struct xent_ref r = {0.0, 0};
    for (int i = 0; i < rows; i++) {
        const float *z = logits + (long)i * SNN_CLASSES;
        int best = 0;
        for (int j = 1; j < SNN_CLASSES; j++)
            if (z[j] > z[best])
                best = j;
        double sum = 0.0;
        for (int j = 0; j < SNN_CLASSES; j++)
            sum += exp((double)z[j] - z[best]);
        for (int j = 0; dz && j < SNN_CLASSES; j++)
            dz[(long)i * SNN_CLASSES + j] = (exp((double)z[j] - z[best]) / sum - ref_target(j, y[i], 1)) / rows;
        r.loss += ref_xent(z, y[i], dz != NULL);
        r.correct += best == y[i];
    }
    r.loss /= rows;
    return r;
}

/* Runs the kernel at step 2 of a 4-slot history and checks every output. */
static void run_softmax_xent(const char *name, const float *logits, const uint8_t *y, int rows, bool with_dlogits)
{
    char why[256] = "";
    const int32_t step = 2;
    float loss[4] = {NAN, NAN, NAN, NAN};
    int32_t correct[4] = {-1, -1, -1, -1};
    float *dz = with_dlogits ? nan_floats((long)rows * SNN_CLASSES) : NULL;
    double *ref_dz = new_doubles((long)rows * SNN_CLASSES);
    struct xent_ref ref = ref_softmax_xent(dz ? ref_dz : NULL, logits, y, rows);
    host_softmax_xent(dz, NULL, loss, correct, logits, y, &step, rows);
    if (!isfinite(loss[step]) || fabs(loss[step] - ref.loss) > 1e-5 * fmax(1.0, fabs(ref.loss)))
        set_why(why, "loss %.9g, expected %.9g", loss[step], ref.loss);
    if (correct[step] != ref.correct)
        set_why(why, "correct %d, expected %d", correct[step], ref.correct);
    if (!isnan(loss[1]) || !isnan(loss[3]) || correct[1] != -1 || correct[3] != -1)
        set_why(why, "wrote outside loss[step] / correct[step]");
    if (dz)
        compare("dlogits", dz, ref_dz, (long)rows * SNN_CLASSES, TOL_FP32, why);
    report(name, why);
    free(dz), free(ref_dz);
}

static void check_softmax_xent_random(int rows, bool with_dlogits)
{
    char name[128];
    snprintf(name, sizeof name, "softmax_xent rows=%d random%s", rows, with_dlogits ? "" : " no dlogits");
    float *logits = random_floats((long)rows * SNN_CLASSES);
    uint8_t *y = snn_xmalloc((size_t)rows, "test labels");
    for (int i = 0; i < rows; i++) {
        y[i] = (uint8_t)(rng_next() % SNN_CLASSES);
        for (int j = 0; j < SNN_CLASSES; j++)
            logits[(long)i * SNN_CLASSES + j] *= 4.0f;
        if (i % 3 == 0) /* make some rows right */
            logits[(long)i * SNN_CLASSES + y[i]] = 5.0f;
    }
    run_softmax_xent(name, logits, y, rows, with_dlogits);
    free(logits), free(y);
}

static void check_softmax_xent_large(void)
{
    const int rows = 3;
    float logits[3][SNN_CLASSES];
    uint8_t y[3] = {4, 0, 9};
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < SNN_CLASSES; j++)
            logits[i][j] = (i == 2 ? -1000.0f : 1000.0f) - 10.0f * j;
    logits[1][7] = 1000.5f;
    run_softmax_xent("softmax_xent large logits (+-1000) stay finite", &logits[0][0], y, rows, true);
}

static void check_softmax_xent_ties(void)
{
    const int rows = 4;
    float logits[4][SNN_CLASSES] = {{0}};
    uint8_t y[4] = {0, 5, 3, 7};
    logits[1][5] = 1.0f; /* all equal in row 0: index 0 wins */
    for (int j = 0; j < SNN_CLASSES; j++)
        logits[2][j] = logits[3][j] = -1.0f;
    logits[2][3] = logits[2][7] = 2.0f; /* tie at 3 and 7: 3 wins, so row 2 is right, row 3 wrong */
    logits[3][3] = logits[3][7] = 2.0f;
    run_softmax_xent("softmax_xent ties pick the first index", &logits[0][0], y, rows, true);
}

/* ---- step_advance ------------------------------------------------------------ */

static void check_step_advance(void)
{
    char why[256] = "";
    int32_t step = 41;
    host_step_advance(&step);
    host_step_advance(&step);
    if (step != 43)
        set_why(why, "step %d after two advances from 41, expected 43", step);
    report("step_advance", why);
}

/* ---- the schedule ------------------------------------------------------------ */

/* snn_rate_at against the reference at steps that matter to the configured schedule (its first, the
 * warm-up's last and the decay's first, the middle, an epoch boundary, the last), and the checks that
 * need no reference: a warm-up starts at lr/W, a cosine decay is halfway at its middle. */
static void check_schedule(void)
{
    char why[256] = "";
    const int32_t epoch = 50, total = 1000, warm = SNN_LR_WARMUP;
    const int32_t at[] = {0, 1, warm ? warm - 1 : 2, warm, warm + 1, epoch - 1, epoch, 2 * epoch, 3 * epoch + 7,
                          warm + (total - warm) / 2, total - 1};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        const snn_rate r = snn_rate_at(at[i], epoch, total);
        const double lr = ref_lr(at[i], epoch, total);
        if (fabs(r.lr - lr) > 1e-6 * CONFIG_TRAIN_LR_VALUE)
            set_why(why, "lr at step %d: %.9g, expected %.9g", at[i], r.lr, lr);
        if (fabs(r.keep - (1 - lr * CONFIG_TRAIN_WEIGHT_DECAY_VALUE)) > 1e-6)
            set_why(why, "decay factor at step %d: %.9g, expected %.9g", at[i], r.keep,
                    1 - lr * CONFIG_TRAIN_WEIGHT_DECAY_VALUE);
    }
    if (warm && fabs(snn_rate_at(0, epoch, total).lr - CONFIG_TRAIN_LR_VALUE / warm) > 1e-6 * CONFIG_TRAIN_LR_VALUE)
        set_why(why, "the warm-up's first step is not lr/%d", warm);
#if defined(CONFIG_TRAIN_LR_COSINE) || defined(CONFIG_TRAIN_LR_WARMUP_COSINE) || defined(CONFIG_TRAIN_LR_WARMUP_LINEAR)
    const double half = CONFIG_TRAIN_LR_VALUE * (1 + CONFIG_TRAIN_LR_FINAL_VALUE) / 2;
    if (fabs(snn_rate_at(warm + (total - warm) / 2, epoch, total).lr - half) > 1e-6 * CONFIG_TRAIN_LR_VALUE)
        set_why(why, "the decay's middle is not (1 + final)/2 x lr");
#endif
    report("schedule: lr at chosen steps, against the reference", why);
}

/* The clock: schedule writes the rate of the step it is at; a training gather writes its step's too, and
 * an update given the step moves it on. */
static void check_clock(void)
{
    char why[256] = "";
    int32_t epoch = 2, step = 5;
    snn_rate rate = {NAN, NAN, NAN, NAN};
    const snn_clock c = {&epoch, &step, &rate, 10, 100};
    host_schedule(c);
    if (rate.lr != snn_rate_at(25, 10, 100).lr)
        set_why(why, "schedule at epoch 2 step 5: lr %.9g, expected that of update 25", rate.lr);
    float p = 1.0f, g = 0.5f, m[2] = {0, 0};
    host_apply_update(&p, NULL, (snn_state){{&m[0], &m[1]}}, &g, NULL, 1, &rate, &step);
    rate = (snn_rate){NAN, NAN, NAN, NAN};
    uint8_t images[7 * SNN_INPUT_DIM] = {0}, labels[7] = {0}, y;
    float x[SNN_INPUT_DIM];
    host_gather_batch(x, NULL, &y, images, labels, NULL, &step, 1, 0.0f, 1.0f, (snn_noise){0}, 0, &c);
    const snn_rate next = snn_rate_at(26, 10, 100);
    if (step != 6 || memcmp(&rate, &next, sizeof rate))
        set_why(why,
                "the update's advance, then a gather: step %d, lr %.9g; expected step 6 and update 26's rate",
                step, rate.lr);
    report("the clock: schedule, the update's advance, a training gather's factors", why);
}

/* The optimizer's square root and division, scaled off the GPU's slow paths, against sqrtf and '/' (the bits,
 * a subnormal quotient within 2^-149): in the host engine's arithmetic (subnormals flushed,
 * kernels/host/subnormals.c) and, where the host can switch, in the GPU's (IEEE, subnormals kept). */
static void check_scaled_math(void)
{
    char why[256] = "";
    const long n = SCALED_MATH_CASES;
    float *x = snn_xmalloc(5 * n * sizeof(float), "test operands"), *m = x + n, *d = x + 2 * n, *r = x + 3 * n,
          *q = x + 4 * n;
    scaled_math_cases(x, m, d);
    for (int kept = 0; kept <= SUBNORMALS_SWITCH; kept++) {
        const unsigned env = kept ? subnormals_kept() : 0;
        for (long i = 0; i < n; i++)
            r[i] = snn_sqrtf_scaled(x[i]), q[i] = snn_divf_scaled(m[i], d[i]);
        scaled_math_compare(kept ? "subnormals kept" : "subnormals flushed", x, m, d, r, q, why);
        if (kept)
            subnormals_restore(env);
    }
    free(x);
    report("optimizer's scaled sqrt and division: IEEE's bits (a subnormal quotient within 2^-149)", why);
}

int main(void)
{
    check_gemms();
    check_gather(false, 0);
    check_gather(false, 3);
    check_gather(true, 0);
    check_gather(true, 3);
    check_batch_shares(2);
    check_batch_shares(3);
    check_softmax_xent_random(13, true);
    check_softmax_xent_random(64, true);
    check_softmax_xent_random(1000, false);
    check_softmax_xent_large();
    check_softmax_xent_ties();
    check_step_advance();
    check_schedule();
    check_clock();
    check_scaled_math();
    return 0;
}
