/* The CUDA kernels around the GEMMs (kernels/ops_proto.h): batch gather and normalisation, softmax +
 * cross-entropy, the step counter and schedule. All on the engine's stream, all deterministic (softmax's one
 * atomic, a ticket, only finds its last block). The gathered batch and the logits' gradient are GEMM
 * operands: their 16-bit twins, where bound (kernels/cuda/twin.h), are written beside them. */
#include <stdint.h>

#include <type_traits>

#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/launch.cuh"
#include "arch/cuda/stream.h"
#include "kernels/cuda/dropout_mask.cuh"
#include "kernels/cuda/step_common.cuh"
#include "kernels/cuda/twin.cuh"
#include "kernels/distort.h"
#include "kernels/ops.h"
#include "snn_config.h"

/* ---------------------------------------------------------------------------
 * kernels
 * ------------------------------------------------------------------------- */

/* Blocks of GATHER_THREADS pixels of one row (blockIdx.y, striding by
 * gridDim.y): consecutive threads on consecutive pixels, so byte reads and
 * float writes are coalesced. */
#define GATHER_THREADS CONFIG_CUDA_GATHER_THREADS
static_assert(GATHER_THREADS % 32 == 0, "CONFIG_CUDA_GATHER_THREADS must be a multiple of 32");
__global__ void __launch_bounds__(GATHER_THREADS)
    gather_batch_kernel(float *__restrict__ x, SnnTwin *__restrict__ x16, uint8_t *__restrict__ y,
                        const uint8_t *__restrict__ images, const uint8_t *__restrict__ labels,
                        const int32_t *__restrict__ order, const int32_t *__restrict__ step, int rows,
                        float mean, float std, snn_noise noise, DropoutMaskJob mask, snn_clock clock)
{
    snn_grid_wait();
    const int j = blockIdx.x * GATHER_THREADS + threadIdx.x;
    const long base = snn_batch_first(noise, *step, rows);
    for (int i = blockIdx.y; i < rows; i += gridDim.y) {
        const long r = snn_gather_sample(order, base, i);
        if (j < SNN_INPUT_DIM) {
            const float v = snn_gather_pixel(
                snn_gather_byte(images + r * SNN_INPUT_DIM, j, noise.row0 + i, *step, noise), mean, std);
            x[(size_t)i * SNN_INPUT_DIM + j] = v;
            snn_twin_store(x16, (size_t)i * SNN_INPUT_DIM + j, v);
        }
        if (j == 0)
            y[i] = labels[r];
    }
    mask.draw(((blockIdx.y * gridDim.x + blockIdx.x) * GATHER_THREADS + threadIdx.x) / 32,
              gridDim.x * gridDim.y * (GATHER_THREADS / 32));
    if (clock.rate && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0)
        *clock.rate = snn_clock_rate(clock);
}

/* A training step's gather where the build distorts its images (kernels/distort.h): a block a row, two pixels
 * a thread, two blocks an SM (a batch of 256 rows in one wave on 132 SMs). The row's image, translated, into
 * shared memory, and its elastic field drawn; the field smoothed along x, then along y; then each pixel
 * resampled, normalised and stored. Each value is the same function of the same inputs as in
 * snn_distort_image, the host's: the same bits. */
constexpr int DISTORT_THREADS = (SNN_PIXELS / 2 + 31) / 32 * 32;
__global__ void __launch_bounds__(DISTORT_THREADS, 2)
    gather_distort_kernel(float *__restrict__ x, SnnTwin *__restrict__ x16, uint8_t *__restrict__ y,
                          const uint8_t *__restrict__ images, const uint8_t *__restrict__ labels,
                          const int32_t *__restrict__ order, const int32_t *__restrict__ step, int rows,
                          float mean, float std, snn_noise noise, DropoutMaskJob mask, snn_clock clock)
{
    snn_grid_wait();
    constexpr int R = SNN_ELASTIC_RADIUS;
    __shared__ uint8_t img[SNN_PIXELS];
    __shared__ float field[4][SNN_ELASTIC ? SNN_PIXELS : 1]; /* u along x and y, then their first pass */
    __shared__ float w[2 * R + 1];
    const int i = blockIdx.x, t = threadIdx.x, g = noise.row0 + i; /* g: the row of the whole batch */
    const int32_t s = *step, epoch = *noise.epoch;
    const long r = snn_gather_sample(order, snn_batch_first(noise, s, rows), i);
    const uint8_t *px = images + r * SNN_INPUT_DIM;
    const bool shifted = snn_noise_translates(noise);
    const snn_shift sh = shifted ? snn_shift_of(noise.key, epoch, s, g) : snn_shift{0, 0};
    for (int p = t; p < SNN_PIXELS; p += DISTORT_THREADS)
        img[p] = shifted ? snn_shifted_pixel(px, p, sh) : px[p];
    if constexpr (SNN_ELASTIC) {
        for (int k = t; k <= 2 * R; k += DISTORT_THREADS)
            w[k] = snn_gauss(k - R);
        for (int q = t; q < SNN_PIXELS / 4; q += DISTORT_THREADS) {
            float u[8];
            snn_elastic_raw4(noise.key, epoch, s, g, q, u);
            for (int j = 0; j < 4; j++) {
                field[0][4 * q + j] = u[2 * j];
                field[1][4 * q + j] = u[2 * j + 1];
            }
        }
        __syncthreads();
        const float sum = snn_gauss_sum(w);
        for (int p = t; p < SNN_PIXELS; p += DISTORT_THREADS) {
            field[2][p] = snn_smooth(field[0], p, 1, w, sum);
            field[3][p] = snn_smooth(field[1], p, 1, w, sum);
        }
        __syncthreads();
        for (int p = t; p < SNN_PIXELS; p += DISTORT_THREADS) {
            field[0][p] = SNN_ELASTIC_ALPHA * snn_smooth(field[2], p, 0, w, sum);
            field[1][p] = SNN_ELASTIC_ALPHA * snn_smooth(field[3], p, 0, w, sum);
        }
    }
    __syncthreads();
    const snn_affine a = snn_affine_of(noise.key, epoch, s, g);
    for (int p = t; p < SNN_PIXELS; p += DISTORT_THREADS) {
        const uint8_t v = SNN_ELASTIC ? snn_distorted_pixel(img, p, field[0][p], field[1][p], a)
                                      : snn_distorted_pixel(img, p, 0.0f, 0.0f, a);
        const float n = snn_gather_pixel(v, mean, std);
        x[(size_t)i * SNN_INPUT_DIM + p] = n;
        snn_twin_store(x16, (size_t)i * SNN_INPUT_DIM + p, n);
    }
    if (t == 0)
        y[i] = labels[r];
    mask.draw((blockIdx.x * DISTORT_THREADS + t) / 32, gridDim.x * (DISTORT_THREADS / 32));
    if (clock.rate && blockIdx.x == 0 && t == 0)
        *clock.rate = snn_clock_rate(clock);
}

/* Thread t of block b takes rows b x T + t, then a grid's rows further, ...: softmax, loss, arg-max and the
 * gradient of each (step_common.cuh, one lane a row), on as many SMs as the rows fill blocks of T threads, up
 * to XENT_BLOCKS. Each block adds its threads' sums in a fixed tree order; the last block to finish adds the
 * blocks' sums in block order. The same order for the same rows, whichever block ends last. */
#define XENT_THREADS CONFIG_CUDA_XENT_THREADS
#define XENT_BLOCKS 32
static_assert((XENT_THREADS & (XENT_THREADS - 1)) == 0, "CONFIG_CUDA_XENT_THREADS must be a power of two");
static __device__ double xent_block_loss[XENT_BLOCKS];
static __device__ int xent_block_correct[XENT_BLOCKS];
static __device__ unsigned xent_blocks_done; /* 0 between launches: the last block resets it */

__global__ void __launch_bounds__(XENT_THREADS)
    softmax_xent_kernel(float *__restrict__ dlogits, SnnTwin *__restrict__ dlogits16, float *__restrict__ loss,
                        int32_t *__restrict__ correct, const float *__restrict__ logits,
                        const uint8_t *__restrict__ y, const int32_t *__restrict__ step, int rows)
{
    snn_grid_wait();
    __shared__ bool s_last;
    const int t = threadIdx.x, whole = rows * (dlogits ? SNN_DP_WORLD : 1); /* training: its batch share */
    double my_loss = 0.0;
    int my_correct = 0;
    for (int r = blockIdx.x * XENT_THREADS + t; r < rows; r += gridDim.x * XENT_THREADS) {
        const float *z = logits + (size_t)r * SNN_CLASSES;
        const int label = y[r];
        float row[SNN_CLASSES];
#pragma unroll
        for (int c = 0; c < SNN_CLASSES; ++c)
            row[c] = z[c];
        const SnnRowSoftmax<1, SNN_CLASSES> sm(row);
        my_loss += (double)sm.loss(z, label, dlogits != nullptr);
        my_correct += sm.arg == label;
        if (dlogits) {
            const size_t d = (size_t)r * SNN_CLASSES;
#pragma unroll
            for (int c = 0; c < SNN_CLASSES; ++c) {
                const float g = sm.grad(c, label, whole);
                dlogits[d + c] = g;
                snn_twin_store(dlogits16, d + c, g);
            }
        }
    }
    snn_block_sums<XENT_THREADS>(my_loss, my_correct);
    if (t == 0) {
        xent_block_loss[blockIdx.x] = my_loss;
        xent_block_correct[blockIdx.x] = my_correct;
        __threadfence(); /* the sums visible before the count that announces them */
        s_last = atomicAdd(&xent_blocks_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (s_last && t == 0) {
        __threadfence();
        double sum = 0.0;
        int right = 0;
        for (unsigned b = 0; b < gridDim.x; b++) {
            sum += *(volatile double *)&xent_block_loss[b];
            right += *(volatile int *)&xent_block_correct[b];
        }
        loss[*step] = (float)(sum / whole);
        correct[*step] = right;
        xent_blocks_done = 0;
    }
}

/* Parameters i .. i + V - 1 updated: V = 4 with 16-byte accesses, 1 one at a time. The same arithmetic,
 * element for element, either way. */
template <int V>
static __device__ __forceinline__ void update_run(float *__restrict__ p, SnnTwin *__restrict__ p16, snn_state s,
                                                  const float *__restrict__ g, const uint16_t *__restrict__ g_bf16,
                                                  long i, const snn_rate &r)
{
    typedef std::conditional_t<V == 4, uint2, uint16_t> HalfV;
    const SnnL2Hint<true> last;
    alignas(16) float pv[V], gv[V], mv[2][V] = {};
    last.load<V>(p + i, pv);
    if (g_bf16) {
        alignas(8) uint16_t h[V];
        *reinterpret_cast<HalfV *>(h) = *reinterpret_cast<const HalfV *>(g_bf16 + i);
#pragma unroll
        for (int j = 0; j < V; j++)
            gv[j] = __uint_as_float((uint32_t)h[j] << 16);
    } else {
        SnnL2Hint<false>().load<V>(g + i, gv);
    }
#pragma unroll
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        last.load<V>(s.m[k] + i, mv[k]);
#pragma unroll
    for (int j = 0; j < V; j++) {
        float st[2] = {mv[0][j], mv[1][j]};
        pv[j] = snn_update(pv[j], gv[j], st, r);
        mv[0][j] = st[0];
        mv[1][j] = st[1];
    }
    last.store<V>(p + i, pv);
#pragma unroll
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        last.store<V>(s.m[k] + i, mv[k]);
    if constexpr (V == 4)
        snn_twin_storev<4>(p16, (size_t)i, pv);
    else
        snn_twin_store(p16, (size_t)i, pv[0]);
}

/* A grid-stride loop, V elements a thread at a time over the first `whole` (V = 4 where every array allows
 * 16-byte accesses: the update is bound by HBM bandwidth; else 1), then the last n - whole (fewer than V)
 * one a thread: one launch, whatever n. */
template <int V>
__global__ void apply_update_kernel(float *__restrict__ p, SnnTwin *__restrict__ p16, snn_state s,
                                    const float *__restrict__ g, const uint16_t *__restrict__ g_bf16,
                                    long whole, long n, const snn_rate *__restrict__ rate, int32_t *advance)
{
    snn_grid_wait();
    if (advance && blockIdx.x == 0 && threadIdx.x == 0) /* no kernel of the step reads it from here on */
        *advance += 1;
    const snn_rate r = *rate;
    const long stride = V * (long)gridDim.x * blockDim.x;
    for (long i = V * (blockIdx.x * (long)blockDim.x + threadIdx.x); i < whole; i += stride)
        update_run<V>(p, p16, s, g, g_bf16, i, r);
    if (blockIdx.x == 0 && whole + threadIdx.x < n)
        update_run<1>(p, p16, s, g, g_bf16, whole + threadIdx.x, r);
}

__global__ void step_advance_kernel(int32_t *step)
{
    snn_grid_wait();
    *step += 1;
}

__global__ void schedule_kernel(snn_clock c)
{
    snn_grid_wait();
    *c.rate = snn_clock_rate(c);
}

/* ---------------------------------------------------------------------------
 * launchers
 * ------------------------------------------------------------------------- */

extern "C" void cuda_gather_batch(float *x, snn_twin *x16, uint8_t *y, const uint8_t *images,
                                  const uint8_t *labels, const int32_t *order, const int32_t *step, int rows,
                                  float mean, float std, snn_noise noise, int dropout_width,
                                  const snn_clock *clock)
{
    if (rows <= 0)
        return;
    /* the first hidden layer's mask, as its forward would draw it (gemm/forward.cu) */
    const DropoutMaskJob mask =
        dropout_width > 0 ? cuda_dropout_mask_ahead(noise, step, 0, rows, dropout_width) : DropoutMaskJob{};
    if (snn_noise_distorts(noise)) {
        SNN_LAUNCH(gather_distort_kernel, rows, DISTORT_THREADS, 0, x, snn_twin_ptr(x16), y, images, labels,
                   order, step, rows, mean, std, noise, mask, clock ? *clock : snn_clock{});
        return;
    }
    const dim3 grid((SNN_INPUT_DIM + GATHER_THREADS - 1) / GATHER_THREADS, rows < 65535 ? rows : 65535);
    SNN_LAUNCH(gather_batch_kernel, grid, GATHER_THREADS, 0, x, snn_twin_ptr(x16), y, images, labels, order,
               step, rows, mean, std, noise, mask, clock ? *clock : snn_clock{});
}

extern "C" void cuda_softmax_xent(float *dlogits, snn_twin *dlogits16, float *loss, int32_t *correct,
                                  const float *logits, const uint8_t *y, const int32_t *step, int rows)
{
    if (rows <= 0)
        return;
    const int blocks = (rows + XENT_THREADS - 1) / XENT_THREADS;
    SNN_LAUNCH(softmax_xent_kernel, blocks < XENT_BLOCKS ? blocks : XENT_BLOCKS, XENT_THREADS, 0, dlogits,
               snn_twin_ptr(dlogits16), loss, correct, logits, y, step, rows);
}

extern "C" void cuda_apply_update(float *p, snn_twin *p16, snn_state s, const float *g,
                                  const uint16_t *g_bf16, long n, const snn_rate *rate, int32_t *advance)
{
    if (n <= 0) {
        if (advance)
            cuda_step_advance(advance);
        return;
    }
    SnnTwin *t = snn_twin_ptr(p16);
    bool vec = snn_aligned(p, 16) && (g_bf16 ? snn_aligned(g_bf16, 8) : snn_aligned(g, 16));
    for (int k = 0; k < SNN_OPTIM_MOMENTS; k++)
        vec = vec && snn_aligned(s.m[k], 16);
    const int V = vec ? 4 : 1;
    const long whole = n / V * V, blocks = (whole / V + 255) / 256; /* at least one: the tail's */
    const unsigned grid = (unsigned)(blocks < 1 ? 1 : blocks < 4096 ? blocks : 4096);
    SNN_LAUNCH(vec ? apply_update_kernel<4> : apply_update_kernel<1>, grid, 256, 0, p, t, s, g, g_bf16, whole,
               n, rate, advance);
}

extern "C" void cuda_step_advance(int32_t *step) { SNN_LAUNCH(step_advance_kernel, 1, 1, 0, step); }

extern "C" void cuda_schedule(snn_clock c) { SNN_LAUNCH(schedule_kernel, 1, 1, 0, c); }
