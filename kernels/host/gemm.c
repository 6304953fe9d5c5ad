/* Host GEMM: one blocked core, C[M,N] = sum_k A(m,k) B(k,n), serving the three
 * roles of a linear layer through strided views and a per-role epilogue.
 * C is cut into MC x NC blocks shared out dynamically to threads with buffers
 * of their own (reserved by host_bind_workspace); K is walked in KC steps over
 * zero-padded packed panels into an 8x16 register micro-kernel. Every output
 * element is the plain chain acc = fmaf(a_k, b_k, acc), k = 0..K-1 from 0, so
 * the result depends neither on the blocking nor on the thread count. */
#include "kernels/ops.h"
#include "snn_check.h"

#include <stdlib.h>
#include <string.h>

#if defined(CONFIG_HOST_OPENMP) && defined(_OPENMP)
#include <omp.h>
#define OMP(directive) _Pragma(directive)
static int max_threads(void) { return omp_get_max_threads(); }
static int thread_id(void) { return omp_get_thread_num(); }
#else
#define OMP(directive)
static int max_threads(void) { return 1; }
static int thread_id(void) { return 0; }
#endif

#define MR 8  /* micro-kernel rows */
#define NR 16 /* micro-kernel columns */
#define MC CONFIG_HOST_GEMM_MC
#define NC CONFIG_HOST_GEMM_NC
#define KC CONFIG_HOST_GEMM_KC

SNN_STATIC_ASSERT(MC % MR == 0, "CONFIG_HOST_GEMM_MC must be a multiple of 8 (micro-kernel rows)");
SNN_STATIC_ASSERT(NC % NR == 0, "CONFIG_HOST_GEMM_NC must be a multiple of 16 (micro-kernel columns)");

/* Below this many flops a call stays on one thread: the fork costs more. */
#define PARALLEL_MIN_FLOPS (1024.0 * CONFIG_HOST_GEMM_PARALLEL_MIN_KFLOP)

/* A matrix seen through strides: element (r, c) is p[r * rs + c * cs]. */
struct view {
    const float *p;
    long rs, cs;
};

enum epilogue_kind { EPI_BIAS_RELU, EPI_MASK, EPI_UPDATE };

struct epilogue {
    enum epilogue_kind kind;
    float *out;        /* BIAS_RELU, MASK: row-major [M][N] destination */
    const float *bias; /* BIAS_RELU: [N] or NULL */
    int relu;          /* BIAS_RELU */
    const float *act;  /* MASK: [M][N], keep where > 0; NULL keeps all */
    float scale;       /* MASK: what a kept element is multiplied by */
    float *w;          /* UPDATE: weights, row-major [M][N] */
    snn_state state;   /* UPDATE: their optimizer state, the same shape */
    snn_rate rate;     /* UPDATE: the step's factors */
};

struct gemm {
    int M, N, K;
    struct view a, b; /* A(m, k), B(k, n) */
    struct epilogue epi;
};

/* One thread's buffers: packed A (MC x KC), packed B (KC x NC), and the tile
 * of C (MC x NC, row stride NC). Each part is a whole number of 64-byte lines. */
#define ROUND16(n) (((n) + 15) / 16 * 16)
#define WORKSPACE_FLOATS ((size_t)ROUND16(MC * KC) + (size_t)KC * NC + (size_t)MC * NC)

struct workspace {
    float *a, *b, *tile;
};

static float *workspace_pool;
static int workspace_threads;

static void workspace_reserve(int threads)
{
    if (threads <= workspace_threads)
        return;
    size_t bytes = sizeof(float) * WORKSPACE_FLOATS * (size_t)threads;
    free(workspace_pool);
    workspace_pool = aligned_alloc(64, bytes);
    if (!workspace_pool)
        snn_die("out of host memory for the host GEMM buffers (%zu bytes for %d threads)", bytes, threads);
    workspace_threads = threads;
}

void host_bind_workspace(float *workspace, long floats)
{
    (void)workspace, (void)floats;
    workspace_reserve(max_threads());
}

static struct workspace workspace_of(int thread)
{
    float *base = workspace_pool + WORKSPACE_FLOATS * (size_t)thread;
    return (struct workspace){base, base + ROUND16(MC * KC), base + ROUND16(MC * KC) + (size_t)KC * NC};
}

static int min_int(int x, int y) { return x < y ? x : y; }
static int strips(int n, int width) { return (n + width - 1) / width; }

/* dst[k * width + lane] = src[lane * lane_stride + k * k_stride] for the
 * `valid` real lanes; the remaining lanes of each k are zero. */
static inline void pack_strip(float *restrict dst, const float *restrict src, long lane_stride,
                              long k_stride, int width, int valid, int kc)
{
    if (lane_stride == 1) {
        for (int k = 0; k < kc; k++) {
            const float *s = src + k * k_stride;
            float *d = dst + k * width;
            for (int l = 0; l < valid; l++)
                d[l] = s[l];
            for (int l = valid; l < width; l++)
                d[l] = 0.0f;
        }
        return;
    }
    if (valid < width)
        memset(dst, 0, sizeof(float) * (size_t)kc * width);
    for (int l = 0; l < valid; l++) {
        const float *s = src + l * lane_stride;
        for (int k = 0; k < kc; k++)
            dst[k * width + l] = s[k * k_stride];
    }
}

static void pack_a_strip(const struct view *a, int m0, int valid, int k0, int kc, float *dst)
{
    pack_strip(dst, a->p + m0 * a->rs + k0 * a->cs, a->rs, a->cs, MR, valid, kc);
}

static void pack_b_strip(const struct view *b, int n0, int valid, int k0, int kc, float *dst)
{
    pack_strip(dst, b->p + k0 * b->rs + n0 * b->cs, b->cs, b->rs, NR, valid, kc);
}

/* ISO C mode (-std=c11) turns floating-point contraction off; the
 * micro-kernel opts back in so that each step is one fused multiply-add
 * (GCC contracts in a pass gated on expensive-optimizations, off at -O1). */
#if defined(__GNUC__) && !defined(__clang__)
#define FUSED_MULTIPLY_ADD __attribute__((optimize("fp-contract=fast", "expensive-optimizations")))
#else
#define FUSED_MULTIPLY_ADD /* clang contracts a*b+c within an expression by default */
#endif

typedef float f32xNR __attribute__((vector_size(NR * sizeof(float))));
/* The same at any float-aligned address. Dereferenced in place rather than
 * passed to helpers: a 64-byte vector argument has no stable ABI without AVX-512. */
typedef float f32xNR_at __attribute__((vector_size(NR * sizeof(float)), aligned(sizeof(float)), may_alias));

/* c[MR][NR] (row stride NC) = (resume ? c : 0) + a[kc][MR] x b[kc][NR]:
 * eight NR-wide accumulators, each k one load of b and eight broadcast FMAs. */
FUSED_MULTIPLY_ADD
static void micro_kernel(int kc, const float *restrict a, const float *restrict b,
                         float *restrict c, int resume)
{
    f32xNR acc[MR];
    for (int i = 0; i < MR; i++) {
        const f32xNR_at *row = (const f32xNR_at *)(c + i * NC);
        acc[i] = resume ? (f32xNR)(*row) : (f32xNR){0};
    }
    for (int k = 0; k < kc; k++) {
        f32xNR bk = *(const f32xNR_at *)(b + k * NR);
        for (int i = 0; i < MR; i++)
            acc[i] += a[k * MR + i] * bk;
    }
    for (int i = 0; i < MR; i++)
        *(f32xNR_at *)(c + i * NC) = acc[i];
}

/* Row m of the output, columns n0 .. n0+nc-1, from tile row `t`. */
static void epilogue_row(const struct gemm *g, int m, int n0, int nc, const float *t)
{
    const struct epilogue *e = &g->epi;
    long row = (long)m * g->N + n0;
    switch (e->kind) {
    case EPI_BIAS_RELU:
        for (int j = 0; j < nc; j++) {
            float y = e->bias ? t[j] + e->bias[n0 + j] : t[j];
            e->out[row + j] = e->relu && y < 0.0f ? 0.0f : y; /* NaN propagates, as torch.relu */
        }
        break;
    case EPI_MASK:
        for (int j = 0; j < nc; j++)
            e->out[row + j] = !e->act || e->act[row + j] > 0.0f ? t[j] * e->scale : 0.0f;
        break;
    case EPI_UPDATE:
        for (int j = 0; j < nc; j++)
            snn_update_at(e->w, e->state, (size_t)(row + j), t[j], e->rate);
        break;
    }
}

/* The block of C at (m0, n0), mc x nc (at most MC x NC), on one thread. */
static void gemm_block(const struct gemm *g, int m0, int mc, int n0, int nc, struct workspace ws)
{
    int m_strips = strips(mc, MR), n_strips = strips(nc, NR);
    for (int k0 = 0; k0 < g->K; k0 += KC) {
        int kc = min_int(KC, g->K - k0);
        for (int s = 0; s < m_strips; s++)
            pack_a_strip(&g->a, m0 + s * MR, min_int(MR, mc - s * MR), k0, kc, ws.a + s * MR * kc);
        for (int s = 0; s < n_strips; s++)
            pack_b_strip(&g->b, n0 + s * NR, min_int(NR, nc - s * NR), k0, kc, ws.b + s * NR * kc);
        for (int jr = 0; jr < n_strips; jr++) /* one B strip stays in L1 across the A strips */
            for (int ir = 0; ir < m_strips; ir++)
                micro_kernel(kc, ws.a + ir * MR * kc, ws.b + jr * NR * kc, ws.tile + ir * MR * NC + jr * NR,
                             k0 > 0);
    }
    for (int i = 0; i < mc; i++)
        epilogue_row(g, m0 + i, n0, nc, ws.tile + i * NC);
}

/* How C is cut: rows x cols blocks of height x width. */
struct grid {
    int rows, cols, height, width;
};

static struct grid plan_grid(int M, int N, int threads)
{
    struct grid gr = {strips(M, MC), strips(N, NC), MC, NC};
    if (gr.rows * gr.cols < threads) { /* narrow the columns so every thread has a block */
        int wanted = strips(threads, gr.rows);
        gr.width = min_int(NC, strips(strips(N, wanted), NR) * NR);
        gr.cols = strips(N, gr.width);
    }
    return gr;
}

static void gemm_run(const struct gemm *g)
{
    int threads = 2.0 * g->M * g->N * g->K >= PARALLEL_MIN_FLOPS ? max_threads() : 1;
    struct grid gr = plan_grid(g->M, g->N, threads);
    int blocks = gr.rows * gr.cols;
    threads = min_int(threads, blocks);
    workspace_reserve(threads);
    OMP("omp parallel for num_threads(threads) schedule(dynamic) if (threads > 1)")
    for (int i = 0; i < blocks; i++) {
        int m0 = i / gr.cols * gr.height, n0 = i % gr.cols * gr.width;
        gemm_block(g, m0, min_int(gr.height, g->M - m0), n0, min_int(gr.width, g->N - n0),
                   workspace_of(thread_id()));
    }
}

void host_linear_forward(float *y, snn_twin *y16, const float *x, const snn_twin *x16, const float *w,
                         const snn_twin *w16, const float *b, int M, int N, int K, int relu,
                         const snn_drop *drop)
{
    (void)y16, (void)x16, (void)w16;
    struct gemm g = {
        .M = M, .N = N, .K = K,
        .a = {x, K, 1}, /* X[m][k] */
        .b = {w, 1, K}, /* W[n][k] */
        .epi = {.kind = EPI_BIAS_RELU, .out = y, .bias = b, .relu = relu},
    };
    gemm_run(&g);
    if (drop)
        host_dropout(y, drop, M, N);
}

void host_linear_backward_input(float *dx, snn_twin *dx16, const float *dy, const snn_twin *dy16, const float *w,
                                const snn_twin *w16, const float *act, float scale, int M, int N, int K)
{
    (void)dx16, (void)dy16, (void)w16;
    struct gemm g = {
        .M = M, .N = K, .K = N,
        .a = {dy, N, 1}, /* dY[m][n] */
        .b = {w, K, 1},  /* W[n][k] */
        .epi = {.kind = EPI_MASK, .out = dx, .act = act, .scale = scale},
    };
    gemm_run(&g);
}

/* gb[n] = sum over m of dy[m * ldy + n], m ascending, NR columns at a time: into gb, or, with b, through
 * the bias update instead. M x N additions: not worth a thread fork next to the M x N x K of the GEMM. */
static void bias_grad(float *gb, float *b, snn_state sb, const snn_rate *rate, const float *dy, int ldy, int M,
                      int N)
{
    for (int n0 = 0; n0 < N; n0 += NR) {
        int nr = min_int(NR, N - n0);
        float s[NR] = {0};
        for (int m = 0; m < M; m++)
            for (int j = 0; j < nr; j++)
                s[j] += dy[(long)m * ldy + n0 + j];
        for (int j = 0; j < nr; j++) {
            if (b)
                snn_update_at(b, sb, (size_t)(n0 + j), s[j], *rate);
            else
                gb[n0 + j] = s[j];
        }
    }
}

void host_bias_update(float *b, snn_state sb, const float *dy, int M, int N, const snn_rate *rate)
{
    bias_grad(NULL, b, sb, rate, dy, N, M, N);
}

void host_bias_grad(float *gb, const float *dy, int ldy, int M, int N)
{
    bias_grad(gb, NULL, (snn_state){{NULL, NULL}}, NULL, dy, ldy, M, N);
}

void host_linear_backward_weight(float *gw, float *gb, const float *dy, const snn_twin *dy16, int ldy,
                                 const float *x, const snn_twin *x16, int M, int N, int K)
{
    (void)dy16, (void)x16;
    struct gemm g = {
        .M = N, .N = K, .K = M,
        .a = {dy, 1, ldy}, /* A(n, m) = dY[m][n], as the update's GEMM */
        .b = {x, K, 1},
        .epi = {.kind = EPI_BIAS_RELU, .out = gw}, /* no bias, no ReLU: stored */
    };
    gemm_run(&g);
    if (gb)
        host_bias_grad(gb, dy, ldy, M, N);
}

void host_apply_update(float *p, snn_twin *p16, snn_state s, const float *g, const uint16_t *g_bf16, long n,
                       const snn_rate *rate, int32_t *advance)
{
    (void)p16;
    for (long i = 0; i < n; i++) {
        float gi = g ? g[i] : 0.0f;
        if (g_bf16) {
            const uint32_t bits = (uint32_t)g_bf16[i] << 16; /* BF16: FP32's upper half */
            memcpy(&gi, &bits, sizeof(gi));
        }
        snn_update_at(p, s, (size_t)i, gi, *rate);
    }
    if (advance)
        *advance += 1;
}

void host_linear_backward_weight_update(float *w, snn_twin *w16, snn_state sw, float *b, snn_state sb,
                                        const float *dy, const snn_twin *dy16, const float *x, const snn_twin *x16,
                                        int M, int N, int K, const snn_rate *rate)
{
    (void)w16, (void)dy16, (void)x16;
    struct gemm g = {
        .M = N, .N = K, .K = M,
        .a = {dy, 1, N}, /* A(n, m) = dY[m][n] */
        .b = {x, K, 1},  /* B(m, k) = X[m][k] */
        .epi = {.kind = EPI_UPDATE, .w = w, .state = sw, .rate = *rate},
    };
    gemm_run(&g);
    if (b)
        host_bias_update(b, sb, dy, M, N, rate);
}
