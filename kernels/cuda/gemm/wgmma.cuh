/* The Hopper GEMM (CONFIG_GEMM_WGMMA): C[m][n] = sum_k A(m,k) B(n,k) on wgmma.mma_async from 16-bit
 * operands (FP16, BF16) or FP32 words read as TF32 (gemm/wgmma_shape.cuh), loaded by TMA, FP32 accumulators,
 * each element through the role's epilogue. A block is 1 + CONSUMERS warpgroups, on one BM x BN tile or, with
 * CONFIG_GEMM_WGMMA_PERSISTENT, tile after tile with the ring running on. Warpgroup 0, the producer, gives up
 * registers (setmaxnreg.dec); one thread walks k in 128-byte rows (GEMM_WG_BK deep): it waits for a free ring
 * stage (`empty`), announces the stage's bytes on `full` and issues the TMA loads. Each consumer warpgroup
 * takes the registers (setmaxnreg.inc) and BM / CONSUMERS rows: per stage it waits on `full`, issues the
 * stage's wgmmas, and once the previous stage's have finished (wait_group 1) hands that one back; the small
 * tile's consumer adds its k tiles into Tile::CHAINS sets of accumulators in turn, so that one stage's wgmmas
 * need not wait for the last stage's results, and sums the sets at the end. With Tile::PINGPONG the two
 * consumers take alternate tiles whole instead, and take turns at the k loop (the `turn` barriers): one's
 * epilogue (the update's memory traffic, in the weight gradient) runs while the other's wgmmas do. With
 * Tile::PANEL, a block takes a run of tiles along N and keeps their A rows (all of k) in shared memory,
 * loaded once a row on the `panel_full` barrier; the ring carries B alone. An MN-major operand is transposed
 * by the wgmma (TF32 cannot). Any M, N, K: TMA zero-fills outside the matrix, stores are predicated; rows
 * must be multiples of 16 bytes. One thread owns each C element, summed in k order (with CHAINS sets: each
 * set in k order, then the sets in order). The
 * producer's other three warps run the side job, where there is one (gemm/side.cuh). */
#ifndef SNN_GEMM_WGMMA_CUH
#define SNN_GEMM_WGMMA_CUH

#include <stdint.h>

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/launch.cuh"
#include "arch/cuda/stream.h"
#include "arch/sm80/cp_async.cuh"
#include "arch/sm90/tma.cuh"
#include "arch/sm90/wgmma.cuh"
#include "kernels/cuda/gemm/epilogue.cuh"
#include "kernels/cuda/gemm/launch.cuh"
#include "kernels/cuda/gemm/side.cuh"
#include "kernels/cuda/gemm/tile.cuh"
#include "kernels/cuda/gemm/wgmma_shape.cuh"

/* ---------------------------------------------------------------------------
 * kernels
 * ------------------------------------------------------------------------- */

/* acc += A-tile . B-tile over one k step (32 bytes of k), for one m64 slice. */
template <int N, int LA, int LB>
static __device__ __forceinline__ void gemm_wgmma_kstep(float (&acc)[N / 2], uint64_t da, uint64_t db)
{
    constexpr int TA = LA == GEMM_MN_MAJOR, TB = LB == GEMM_MN_MAJOR; /* transposed */
#define GEMM_WGMMA_CASE(NN, K, T)                                                                          \
    if constexpr (N == NN)                                                                                 \
        sm90_wgmma_m64n##NN##k##K##_f32_##T<TA, TB>(acc, da, db, 1);
#if defined(CONFIG_PRECISION_TF32)
    GEMM_WGMMA_CASE(64, 8, tf32) GEMM_WGMMA_CASE(128, 8, tf32) GEMM_WGMMA_CASE(192, 8, tf32)
    GEMM_WGMMA_CASE(256, 8, tf32)
#elif defined(CONFIG_PRECISION_BF16)
    GEMM_WGMMA_CASE(64, 16, bf16) GEMM_WGMMA_CASE(128, 16, bf16) GEMM_WGMMA_CASE(192, 16, bf16)
    GEMM_WGMMA_CASE(256, 16, bf16)
#else
    GEMM_WGMMA_CASE(64, 16, f16) GEMM_WGMMA_CASE(128, 16, f16) GEMM_WGMMA_CASE(192, 16, f16)
    GEMM_WGMMA_CASE(256, 16, f16)
#endif
#undef GEMM_WGMMA_CASE
}

/* A tile's descriptor at k step ks: K-major rows advance 32 bytes per step, MN-major tiles 16 rows of 128
 * bytes (arch/sm90/wgmma.cuh). */
template <int L>
static __device__ __forceinline__ uint64_t gemm_wgmma_desc(const unsigned char *tile, int ks)
{
    if constexpr (L == GEMM_K_MAJOR)
        return sm90_wgmma_desc_sw128(tile + ks * 32, 16, 1024);
    else
        return sm90_wgmma_desc_sw128(tile + ks * 2048, GEMM_WG_BLOCK64_BYTES, 1024);
}

/* The TMA loads of one operand's tile: `rows` rows (of M or N) from r0, k from k0. */
template <int L, int ROWS>
static __device__ __forceinline__ void gemm_wgmma_load(unsigned char *dst, const CUtensorMap *map, int r0, int k0,
                                                       uint64_t *bar)
{
    if constexpr (L == GEMM_K_MAJOR)
        sm90_tma_load_2d(dst, map, k0, r0, bar); /* one box: ROWS rows of GEMM_WG_BK k */
    else
#pragma unroll
        for (int j = 0; j < ROWS / 64; ++j) /* boxes of 64 k rows by 64 of M or N (16-bit) */
            sm90_tma_load_2d(dst + j * GEMM_WG_BLOCK64_BYTES, map, r0 + 64 * j, k0, bar);
}

/* Tile t of the grid in grouped raster order: down GEMM_WG_GROUP M tiles, then along N. */
static __device__ __forceinline__ void gemm_wgmma_raster(int t, int tiles_m, int tiles_n, int &tm, int &tn)
{
    const int per_group = GEMM_WG_GROUP * tiles_n, group = t / per_group, first = group * GEMM_WG_GROUP;
    const int rows = min(GEMM_WG_GROUP, tiles_m - first);
    tm = first + (t % per_group) % rows;
    tn = (t % per_group) / rows;
}

/* Whether a block's A panel holds the k tiles it walks for K. */
template <class Tile> static constexpr bool gemm_wgmma_panel_holds(int K)
{
    return Tile::PANEL == 0 || gemm_wgmma_ktiles_of(K > 0 ? K : 1, Tile::CHAINS) <= Tile::PANEL;
}

/* The tiles this block takes, as its producer and its consumers both walk them: b, b + gridDim.x, ... in
 * raster order; with an A panel, a run of consecutive tiles in row order (an equal share of the grid's), so
 * that a block's tiles share their A rows: a panel from each row's first tile (or the run's) to its last. */
template <class Tile> struct GemmWgmmaWalk {
    int begin, t, end, step, tiles_m, tiles_n;
    __device__ __forceinline__ GemmWgmmaWalk(int tiles_m_, int tiles_n_)
        : tiles_m(tiles_m_), tiles_n(tiles_n_)
    {
        const long ntiles = (long)tiles_m * tiles_n;
        if constexpr (Tile::PANEL > 0) {
            t = (int)(ntiles * blockIdx.x / gridDim.x);
            end = (int)(ntiles * (blockIdx.x + 1) / gridDim.x);
            step = 1;
        } else {
            t = blockIdx.x;
            end = (int)ntiles;
            step = gridDim.x;
        }
        begin = t;
    }
    __device__ __forceinline__ bool more() const { return t < end; }
    __device__ __forceinline__ void next() { t += step; }
    __device__ __forceinline__ void tile(int &tm, int &tn) const
    {
        if constexpr (Tile::PANEL > 0) {
            tm = t / tiles_n;
            tn = t % tiles_n;
        } else
            gemm_wgmma_raster(t, tiles_m, tiles_n, tm, tn);
    }
    /* with a panel: this tile loads the panel, and is the last to read it */
    __device__ __forceinline__ bool panel_first() const { return t == begin || t % tiles_n == 0; }
    __device__ __forceinline__ bool panel_last() const { return t + 1 == end || (t + 1) % tiles_n == 0; }
};

/* Epilogue input copies (CONFIG_GEMM_WGMMA_EPI_STAGES): a consumer warp copies the staged inputs of its
 * epilogue's batches (gemm/epilogue.cuh) by cp.async, D batches ahead, the first D during its k loop, into D
 * slots of its own buffer: batch b, 16 rows x 32 columns, into slot b % D. Each lane copies, and later reads,
 * the quads it updates (rows lane / 8 + 4j, columns 4 (lane % 8)): its own cp.async.wait_group orders them,
 * and the slot is [array][j][lane], conflict-free. The update's loads then wait on shared memory, and its
 * memory traffic runs D batches deep without registers to hold it. */
template <class Tile, class Epi>
struct GemmWgmmaInputs {
    static constexpr int ARRAYS = gemm_epi_staged<Epi>();
    static constexpr int SLOT_FLOATS = gemm_wgmma_inputs_slot_floats(ARRAYS); /* 4 quads of each array a lane */
    static constexpr int BLOCK_BYTES_PER_STAGE = gemm_wgmma_inputs_stage_bytes(Tile::CONSUMERS, ARRAYS);
    static constexpr int stages_fit()
    {
        int d = ARRAYS > 0 ? GEMM_WG_EPI_STAGES : 0;
        while (d > 0 && !gemm_wgmma_smem_fits_bytes(Tile::SMEM_BYTES + d * BLOCK_BYTES_PER_STAGE, Tile::STAGES))
            d--;
        return d;
    }
    static constexpr int D = stages_fit(); /* 0: the epilogue loads from global memory */
    static constexpr int SMEM_BYTES = Tile::SMEM_BYTES + D * BLOCK_BYTES_PER_STAGE;
    static constexpr int BATCHES = Tile::MTILES * (Tile::BN / GEMM_WG_EPI_COLS);

    /* batch b's copies into its slot (one commit group per batch: an empty one past the last) */
    static __device__ __forceinline__ void copy(const Epi &epi, float *buf, int b, int c, int m0, int n0)
    {
        if constexpr (D > 0) {
            if (b < BATCHES) {
                constexpr int PER_M = Tile::BN / GEMM_WG_EPI_COLS;
                const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
                const int m = m0 + c * Tile::WM + b / PER_M * 64 + 16 * w + lane / 8;
                const int n = n0 + b % PER_M * GEMM_WG_EPI_COLS + 4 * (lane % 8);
                float *slot = buf + b % D * SLOT_FLOATS + 4 * lane;
#pragma unroll
                for (int a = 0; a < ARRAYS; ++a)
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        sm80_cp_async_16(slot + (a * 4 + j) * 128, epi.staged(a, m + 4 * j, n));
            }
            sm80_cp_async_commit();
        }
    }
    /* this lane's copy of quad j of batch b, array a */
    static __device__ __forceinline__ GemmFloats<4> read(const float *buf, int b, int a, int j)
    {
        return *reinterpret_cast<const GemmFloats<4> *>(buf + b % D * SLOT_FLOATS + (a * 4 + j) * 128 +
                                                        4 * (threadIdx.x % 32));
    }
};

/* The tile (m0, n0) of a consumer warpgroup c: its rows' wgmmas over the k tiles the ring delivers (ring
 * positions it .. it + ktiles - 1, each handed back once its wgmmas are done), A from `panel` where the tile
 * has one, then the epilogue of its rows, each warp through its staging tile `staged` (GEMM_WG_EPI_BYTES),
 * its inputs through `inputs` where the tile lies inside C (GemmWgmmaInputs). Between the two, each warp
 * arrives on `loop_done` where given (ping-pong: the other consumer may start its k loop; a panel's last
 * tile: the producer may load the next panel). */
template <class Tile, int LA, int LB, class Epi>
static __device__ __forceinline__ void
gemm_wgmma_consume(const unsigned char *tiles, const unsigned char *panel, uint64_t *full, uint64_t *empty,
                   float *staged, float *inputs, int it, int ktiles, int c, int m0, int n0, int M, int N,
                   const Epi &epi, uint64_t *loop_done)
{
    typedef GemmWgmmaInputs<Tile, Epi> In;
    constexpr int CHAINS = Tile::CHAINS;
    const int lane = threadIdx.x % 32;
    float acc[CHAINS][Tile::MTILES][Tile::ACC]; /* k tile kt adds into chain kt % CHAINS */
#pragma unroll
    for (int h = 0; h < CHAINS; ++h)
#pragma unroll
        for (int i = 0; i < Tile::MTILES; ++i)
#pragma unroll
            for (int e = 0; e < Tile::ACC; ++e)
                acc[h][i][e] = 0.0f;
    const bool copied = In::D > 0 && m0 + Tile::BM <= M && n0 + Tile::BN <= N && epi.template vec_aligned<4>();
    if (copied)
        for (int b = 0; b < In::D; ++b)
            In::copy(epi, inputs, b, c, m0, n0);

    /* ktiles is a multiple of CHAINS (the kernel's k tiles past K are TMA's zeros), so that each chain's
     * accumulators are named by a constant: under a branch ptxas waits for every wgmma before the next */
    for (int kt = 0; kt < ktiles; kt += CHAINS)
#pragma unroll
        for (int h = 0; h < CHAINS; ++h, ++it) {
            const int s = it % Tile::STAGES;
            sm90_mbarrier_wait(&full[s], (it / Tile::STAGES) & 1);
            const unsigned char *a =
                (Tile::PANEL > 0 ? panel + (kt + h) * Tile::A_BYTES : tiles + s * Tile::STAGE_BYTES) +
                c * Tile::MTILES * GEMM_WG_BLOCK64_BYTES;
            const unsigned char *b = tiles + s * Tile::STAGE_BYTES + Tile::RING_A_BYTES;
#pragma unroll
            for (int i = 0; i < Tile::MTILES; ++i)
                sm90_wgmma_fence_regs(acc[h][i]);
            sm90_wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < GEMM_WG_BK / GEMM_WG_KSTEP; ++ks)
#pragma unroll
                for (int i = 0; i < Tile::MTILES; ++i)
                    gemm_wgmma_kstep<Tile::BN, LA, LB>(acc[h][i],
                                                       gemm_wgmma_desc<LA>(a + i * GEMM_WG_BLOCK64_BYTES, ks),
                                                       gemm_wgmma_desc<LB>(b, ks));
            sm90_wgmma_commit();
            sm90_wgmma_wait<1>(); /* the previous stage's wgmmas are done: hand it back */
#pragma unroll
            for (int i = 0; i < Tile::MTILES; ++i)
                sm90_wgmma_fence_regs(acc[h][i]);
            if (kt + h > 0 && lane == 0)
                sm90_mbarrier_arrive(&empty[(it - 1) % Tile::STAGES]);
        }
    sm90_wgmma_wait<0>();
#pragma unroll
    for (int h = 0; h < CHAINS; ++h)
#pragma unroll
        for (int i = 0; i < Tile::MTILES; ++i)
            sm90_wgmma_fence_regs(acc[h][i]);
#pragma unroll
    for (int h = 1; h < CHAINS; ++h) /* the chains' sums, in chain order, into the first */
#pragma unroll
        for (int i = 0; i < Tile::MTILES; ++i)
#pragma unroll
            for (int e = 0; e < Tile::ACC; ++e)
                acc[0][i][e] += acc[h][i][e];
    if (ktiles > 0 && lane == 0) /* the last stage: the producer may fill it for the next tile */
        sm90_mbarrier_arrive(&empty[(it - 1) % Tile::STAGES]);
    if (loop_done)
        sm90_mbarrier_arrive(loop_done);

    /* The epilogue, 32 columns of the warp's 16 rows (of each m64) at a time: the accumulators (lane 4g + t
     * holds rows g and g + 8, columns 8q + 2t and + 1) go to the staging tile, and each lane takes back a
     * quad of columns of 4 rows, so that a warp's access covers 4 rows of 128 contiguous bytes. ptxas fits
     * the consumers' code in the kernel's launch-bound registers (65536 / threads), not in what setmaxnreg
     * grants at run time: the batches below are sized for that. */
    const int w = (threadIdx.x % 128) / 32;
    constexpr int S = GEMM_WG_EPI_STRIDE, Q = GEMM_WG_EPI_COLS / 8; /* 8-column groups per batch */
#pragma unroll
    for (int i = 0; i < Tile::MTILES; ++i)
#pragma unroll
        for (int q0 = 0; q0 < Tile::BN / 8; q0 += Q) {
            const int batch = i * (Tile::BN / GEMM_WG_EPI_COLS) + q0 / Q;
            if constexpr (In::D > 0)
                if (copied)
                    sm80_cp_async_wait<In::D - 1>(); /* this batch's inputs have landed */
            __syncwarp(); /* the previous batch has been read back */
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int q = 0; q < Q; ++q)
                    *reinterpret_cast<float2 *>(staged + (lane / 4 + 8 * h) * S + 8 * q + 2 * (lane % 4)) =
                        make_float2(acc[0][i][4 * (q0 + q) + 2 * h], acc[0][i][4 * (q0 + q) + 2 * h + 1]);
            __syncwarp();
#pragma unroll
            for (int j0 = 0; j0 < 4; j0 += 2) { /* two rows' quads per batch: the update's inputs must fit */
                int m[2], n[2];
                GemmFloats<4> v[2];
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    const int r = lane / 8 + 4 * (j0 + j);
                    m[j] = m0 + c * Tile::WM + i * 64 + 16 * w + r;
                    n[j] = n0 + 8 * q0 + 4 * (lane % 8);
                    v[j] = *reinterpret_cast<const GemmFloats<4> *>(staged + r * S + 4 * (lane % 8));
                }
                if constexpr (In::D > 0)
                    if (copied) {
                        GemmFloats<4> in[2][In::ARRAYS];
#pragma unroll
                        for (int j = 0; j < 2; ++j)
#pragma unroll
                            for (int a = 0; a < In::ARRAYS; ++a)
                                in[j][a] = In::read(inputs, batch, a, j0 + j);
                        gemm_epi_runs_given(epi, m, n, v, in);
                        continue;
                    }
                gemm_epi_runs(epi, M, N, m, n, v);
            }
            if (copied) /* into the slot just read */
                In::copy(epi, inputs, batch + In::D, c, m0, n0);
        }
}

/* Block b takes the tiles b, b + gridDim.x, ... (in raster order; with an A panel, its run of them,
 * GemmWgmmaWalk): one grid block per tile, or a persistent grid of as many blocks as fit, whose producer
 * loads the next tile's first stages while the consumers finish the current one (its last MMAs and its
 * epilogue). The ring runs on across tiles: position `it` counts every k tile the block has loaded. */
template <class Tile, int LA, int LB, class Epi, class Side>
__global__ void __launch_bounds__(Tile::THREADS, 1)
    gemm_wgmma_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                      int M, int N, int K, Epi epi, Side side)
{
    snn_grid_wait();
    static_assert(!GEMM_WG_K_MAJOR_ONLY || (LA == GEMM_K_MAJOR && LB == GEMM_K_MAJOR),
                  "wgmma in TF32 reads both operands K-major (gemm/wgmma_shape.cuh)");
    extern __shared__ unsigned char gemm_wgmma_smem[];
    __shared__ uint64_t full[Tile::STAGES], empty[Tile::STAGES];
    __shared__ uint64_t turn[2]; /* ping-pong: consumer c's k loop of a tile is done */
    /* the A panel has landed (one barrier for all its k tiles: one a k tile ran slower, docs/PERF.md v61);
     * its last tile's k loop is done */
    __shared__ uint64_t panel_full, panel_empty;
    /* 128-byte swizzled tiles must start on 1024-byte boundaries */
    unsigned char *tiles = gemm_wgmma_smem + ((1024 - (sm90_smem_addr(gemm_wgmma_smem) & 1023)) & 1023);

    const int wg = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < Tile::STAGES; ++s) {
            sm90_mbarrier_init(&full[s], 1);
            /* one arrival per warp of the consumers that read a stage: all, or the one whose tile it is */
            sm90_mbarrier_init(&empty[s], (Tile::PINGPONG ? 1 : Tile::CONSUMERS) * 4);
        }
        sm90_mbarrier_init(&turn[0], 4);
        sm90_mbarrier_init(&turn[1], 4);
        sm90_mbarrier_init(&panel_full, 1);
        sm90_mbarrier_init(&panel_empty, Tile::CONSUMERS * 4);
        sm90_mbarrier_init_fence();
    }
    __syncthreads();

    const int tiles_m = (M + Tile::BM - 1) / Tile::BM, tiles_n = (N + Tile::BN - 1) / Tile::BN;
    const int ntiles = tiles_m * tiles_n;
    unsigned char *panel = tiles + Tile::RING_BYTES;
    const int ktiles = gemm_wgmma_ktiles_of(K, Tile::CHAINS); /* whole sets: gemm_wgmma_consume */

    if (wg == 0) {
        sm90_setmaxnreg_dec<GEMM_WG_PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            GemmWgmmaWalk<Tile> w(tiles_m, tiles_n);
            for (int it = 0, panels = 0; w.more(); w.next()) {
                int tm, tn;
                w.tile(tm, tn);
                if constexpr (Tile::PANEL > 0)
                    if (w.panel_first()) { /* once the last panel's readers are done with it */
                        if (panels++ > 0)
                            sm90_mbarrier_wait(&panel_empty, (panels - 2) & 1);
                        sm90_mbarrier_arrive_expect_tx(&panel_full, ktiles * Tile::A_BYTES);
                        for (int kt = 0; kt < ktiles; ++kt)
                            gemm_wgmma_load<LA, Tile::BM>(panel + kt * Tile::A_BYTES, &map_a, tm * Tile::BM,
                                                          kt * GEMM_WG_BK, &panel_full);
                    }
                for (int kt = 0; kt < ktiles; ++kt, ++it) {
                    const int s = it % Tile::STAGES;
                    sm90_mbarrier_wait(&empty[s], (it / Tile::STAGES + 1) & 1);
                    sm90_mbarrier_arrive_expect_tx(&full[s], Tile::STAGE_BYTES);
                    unsigned char *stage = tiles + s * Tile::STAGE_BYTES;
                    if constexpr (Tile::PANEL == 0)
                        gemm_wgmma_load<LA, Tile::BM>(stage, &map_a, tm * Tile::BM, kt * GEMM_WG_BK,
                                                      &full[s]);
                    gemm_wgmma_load<LB, Tile::BN>(stage + Tile::RING_A_BYTES, &map_b, tn * Tile::BN,
                                                  kt * GEMM_WG_BK, &full[s]);
                }
            }
        }
        if constexpr (Side::ACTIVE)
            if (threadIdx.x >= 32)
                side(3 * blockIdx.x + threadIdx.x / 32 - 1, 3 * gridDim.x);
        return;
    }

    sm90_setmaxnreg_inc<Tile::CONSUMER_REGS>();
    /* this warp's staging tile, after the ring: consumer warps are the block's warps 4 .. */
    const int warp = (threadIdx.x - 128) / 32;
    unsigned char *after_ring = tiles + Tile::RING_BYTES + Tile::PANEL_BYTES;
    float *staged = reinterpret_cast<float *>(after_ring) + warp * (GEMM_WG_EPI_BYTES / 4);
    /* and its epilogue inputs' slots, after the staging tiles */
    typedef GemmWgmmaInputs<Tile, Epi> In;
    float *inputs = reinterpret_cast<float *>(after_ring + 4 * Tile::CONSUMERS * GEMM_WG_EPI_BYTES) +
                    warp * In::D * In::SLOT_FLOATS;
    if constexpr (Tile::PINGPONG) {
        /* Consumer c takes the block's tiles j = c, c + 2, ... (ring positions j * ktiles ..). It starts tile
         * j's k loop once the other has finished tile j - 1's, so the two never wait on the ring at once and
         * every stage's earlier phase has completed (its parity wait cannot pass early); turn[c] completes a
         * phase per k loop of c, and neither can run two ahead of the other. */
        const int c = wg - 1, lane = threadIdx.x % 32;
        for (int j = c, t = blockIdx.x + c * gridDim.x; t < ntiles; j += 2, t += 2 * gridDim.x) {
            if (j > 0)
                sm90_mbarrier_wait(&turn[1 - c], ((j - 1) / 2) & 1);
            int tm, tn;
            gemm_wgmma_raster(t, tiles_m, tiles_n, tm, tn);
            gemm_wgmma_consume<Tile, LA, LB>(tiles, nullptr, full, empty, staged, inputs, j * ktiles, ktiles,
                                             0, tm * Tile::BM, tn * Tile::BN, M, N, epi,
                                             lane == 0 ? &turn[c] : nullptr);
        }
    } else {
        const bool lane0 = threadIdx.x % 32 == 0;
        GemmWgmmaWalk<Tile> w(tiles_m, tiles_n);
        for (int it = 0, panels = 0; w.more(); w.next(), it += ktiles) {
            int tm, tn;
            w.tile(tm, tn);
            uint64_t *loop_done = nullptr;
            if constexpr (Tile::PANEL > 0) {
                if (w.panel_first())
                    sm90_mbarrier_wait(&panel_full, panels++ & 1);
                if (w.panel_last() && lane0)
                    loop_done = &panel_empty;
            }
            gemm_wgmma_consume<Tile, LA, LB>(tiles, panel, full, empty, staged, inputs, it, ktiles, wg - 1,
                                             tm * Tile::BM, tn * Tile::BN, M, N, epi, loop_done);
        }
    }
}

/* ---------------------------------------------------------------------------
 * launchers
 * ------------------------------------------------------------------------- */

/* The tensor map of an operand of `rows` (M or N) by K in layout L, row stride ld. */
template <int L, int BOX_ROWS>
static void gemm_wgmma_map(CUtensorMap *map, const GemmWgmmaElem *p, int ld, int rows, int K, const char *what)
{
    constexpr int bytes = sizeof(GemmWgmmaElem);
    if constexpr (L == GEMM_K_MAJOR)
        sm90_tensor_map(map, p, bytes, rows, K, ld, BOX_ROWS, GEMM_WG_BK, what);
    else
        sm90_tensor_map(map, p, bytes, K, rows, ld, GEMM_WG_BK, GEMM_WG_ROW_BYTES / bytes, what);
}

/* The grid of a wgmma GEMM: a count of blocks if positive, or one of these. */
enum {
    GEMM_WG_GRID_CONFIG = 0,    /* GEMM_WG_GRID_RESIDENT with CONFIG_GEMM_WGMMA_PERSISTENT, else _PER_TILE */
    GEMM_WG_GRID_PER_TILE = -1, /* a block per tile */
    GEMM_WG_GRID_RESIDENT = -2, /* as many blocks as the GPU holds at once */
};

/* C[M,N] = A . B^T with A(m,k), B(n,k) in layouts LA, LB, through the epilogue epi (gemm/epilogue.cuh), at
 * block tile Tile (the config's unless a benchmark picks another) on the grid `blocks` (tests and benchmarks
 * pick others than the config's), never more blocks than tiles; the side job beside it. */
template <int LA, int LB, class Epi, class Tile = GemmWgmmaConfigTile, class Side = GemmSideNone>
void gemm_wgmma_run(const GemmWgmmaElem *A, int lda, const GemmWgmmaElem *B, int ldb, int M, int N, int K,
                    const Epi &epi, int blocks = GEMM_WG_GRID_CONFIG, const Side &side = Side())
{
    if (M <= 0 || N <= 0)
        return;
    /* K = 0 still needs a describable matrix: one zero-filled k tile */
    const int k_map = K > 0 ? K : 1;
    CUtensorMap map_a, map_b;
    gemm_wgmma_map<LA, Tile::BM>(&map_a, A, lda, M, k_map, "wgmma GEMM operand A");
    gemm_wgmma_map<LB, Tile::BN>(&map_b, B, ldb, N, k_map, "wgmma GEMM operand B");
    auto kernel = gemm_wgmma_kernel<Tile, LA, LB, Epi, Side>;
    constexpr int smem = GemmWgmmaInputs<Tile, Epi>::SMEM_BYTES;
    static int per_sm; /* blocks an SM holds at once, once per kernel instance */
    if (!per_sm) {
        CUDA_CHECK(cudaFuncSetAttribute((const void *)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, Tile::THREADS, smem));
        if (per_sm < 1)
            snn_die("wgmma GEMM block %dx%d (%d threads, %d bytes of shared memory) does not fit on this GPU",
                    Tile::BM, Tile::BN, Tile::THREADS, smem);
    }
    const long tiles = (long)((M + Tile::BM - 1) / Tile::BM) * ((N + Tile::BN - 1) / Tile::BN);
    if (tiles > 0x7fffffffL)
        snn_die("wgmma GEMM of %d x %d has too many tiles for one grid", M, N);
    if (!gemm_wgmma_panel_holds<Tile>(K))
        snn_die("wgmma GEMM: k = %d does not fit the block's A panel of %d k tiles (its caller checks)", K,
                Tile::PANEL);
    if (blocks == GEMM_WG_GRID_CONFIG)
        blocks = GEMM_WG_PERSISTENT ? GEMM_WG_GRID_RESIDENT : GEMM_WG_GRID_PER_TILE;
    long grid = blocks > 0                        ? blocks
                : blocks == GEMM_WG_GRID_RESIDENT ? (long)per_sm * gemm_grid_sms()
                                                  : tiles;
    grid = grid < tiles ? grid : tiles;
    SNN_LAUNCH(kernel, (unsigned)grid, Tile::THREADS, smem, map_a, map_b, M, N, K, epi, side);
}

#endif
