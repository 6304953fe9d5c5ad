/* The grid-resident kernel of the fused step (CONFIG_FUSED_GRID_RESIDENT; fused/kernel.h): where a model is
 * too wide for one cluster (fused/cluster.cu) but each block's share of it fits in shared memory, a
 * cooperative grid of SNN_GR_BLOCKS x SNN_GR_SPLIT blocks runs every step of a launch with the weights and
 * their optimizer state on chip.
 *
 * Block c owns hidden units [8c, 8c + 8) of every hidden layer: their rows of each hidden layer's weights
 * (FP32, with moments) and their columns of the last layer's. Where SPLIT blocks share them (a model with one
 * hidden layer, CONFIG_FUSED_GRID_RESIDENT_SPLIT), block c x SPLIT + q owns slice q of layer 0's inputs: its
 * columns of those rows, its pixels of the batch in F0 and B0; F0's partial sums cross through L2 and every
 * block of the group adds them, in slice order, after one more grid barrier, then does the rest of the step
 * for the units as one block would. What crosses blocks goes through L2 as operands, 16-bit or in TF32 and
 * FP32 32-bit (snn_op, SNN_FUSED_GR_WS_BYTES): each hidden layer's output, by row and by unit; its output
 * gradient by row; unstaged, the normalised batch by pixel; each hidden-to-hidden layer's twin, transposed,
 * so that a block reads the columns of its units as rows. A step, for L linear layers:
 *
 *   F0          layer 0 for the block's units, the pixels normalised as read: from the block's slice of
 *               the batch, staged in shared memory by cp.async during the step before, where the GPU holds
 *               the grid with two steps' slices beside each block's share of the model (the staged kernel,
 *               chosen at launch); else from the images in place, the block's pixels of the batch then
 *               transposed into L2 for every block's update of layer 0
 *   F1 .. F(L-2) every block reads the whole previous output (the all-gather) and computes its units'
 *   F(L-1)      the logits' partial sums over the block's units -> barrier (none where they are tagged:
 *               TAGGED) -> a block per row sums them, takes the softmax and writes the row's dlogits
 *               -> barrier
 *   B(L-1)      every block reads the dlogits: its units' gradient (local columns of the last layer),
 *               the last layer's update (its columns; the bias, every block the same; where blocks share
 *               units, in the next step's split barrier and before its softmax)
 *   B(l)        each block's units' output gradient of layer l - 1 from the whole gradient of layer l and
 *               the twin's rows of its units (the all-gather again), after the barrier in which the block
 *               updates its rows of layer l from the gradient the phase before computed; layer 0's update,
 *               local, ends the step
 *
 * so 2L - 2 grid barriers a step (one before each hidden-to-hidden layer's forward GEMM and its input
 * gradient, one after the partial logits, one after the softmax; one fewer where the partials are tagged, one
 * more in F0 where blocks share units). The step's barriers are the kernel's own (fused/grid_barrier.cuh),
 * whose arrival and wait are apart: between them a block does work no other block reads before the wait: a
 * hidden-to-hidden layer's update in the barrier before the next input gradient. Where blocks share units,
 * the last layer's update waits for the next step's split barrier and partial logits (DEFER), and layer 0's
 * bias is updated by the warps that B0's GEMM leaves idle, where it leaves any (B0_IDLE). Each step reads the
 * next step's samples and labels, computes its rate factors and, staged, copies its slice during its own (the
 * rate and the copies in the softmax's barrier), so that it starts with them at hand. A hidden-to-hidden
 * layer's update writes the twin of the next step's parity: the input gradient through the layer, which the
 * other blocks compute while a block updates, reads this step's. The GEMMs are mma.sync m16n8k16 (TF32:
 * m16n8k8; FP32: the same fragments' products on the CUDA cores) with FP32 accumulators on operands rounded
 * as the host reference rounds them; fixed splits and orders of summation: deterministic. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "arch/sm75/mma.cuh"
#include "arch/sm80/cp_async.cuh"
#include "kernels/cuda/fused/grid_barrier.cuh"
#include "kernels/cuda/fused/kernel.h"
#include "kernels/cuda/fused/mma16.cuh"
#include "kernels/cuda/fused/resident.cuh"
#include "kernels/cuda/fused/stamp.cuh"
#include "kernels/cuda/step_common.cuh"
#include "kernels/fused.h"

namespace cg = cooperative_groups;

namespace resident_grid
{

/* The schedule's extents (kernels/fused.h sizes the workspace from the same SNN_GR_* values):
 *
 *   BLOCKS          one block per UNITS hidden units, an even count (a 16-wide k extent)
 *   SPLIT, GRID     blocks sharing each block's units, slices of layer 0's inputs; the grid: BLOCKS x SPLIT
 *   SLICE_K         a slice's inputs, in whole 16s (INPUTS_PAD: SPLIT slices)
 *   THREADS         a block's (CONFIG_FUSED_GRID_RESIDENT_THREADS)
 *   UNITS           8, the hidden units a block owns
 *   HIDDEN          the hidden width; HIDDEN_PAD: UNITS x BLOCKS
 *   BATCH           the batch; BATCH_PAD: padded to 16 rows
 *   CLASSES_PAD     the classes padded to two n8 tiles
 *   MIDS, HIDDENS   hidden-to-hidden layers, hidden layers (at least 1: placeholders where there are none)
 *   MOMENTS         optimizer moments per parameter (at least 1)
 *   W0_LD, W_LD     row strides of a block's FP32 rows of layer 0 and of a hidden-to-hidden layer
 *   DGRAD_LD        row stride of the block's output gradient as an operand, [unit][row]
 *   PIXELS_PER_BLOCK  the block's pixels of the batch that F0 transposes for layer 0's update (unstaged) */
constexpr int THREADS = CONFIG_FUSED_GRID_RESIDENT_THREADS, WARPS = THREADS / 32;
static_assert(THREADS % 32 == 0, "grid-resident kernel: whole warps (CONFIG_FUSED_GRID_RESIDENT_THREADS)");
constexpr int UNITS = SNN_GR_UNITS, BLOCKS = SNN_GR_BLOCKS, HIDDEN_PAD = SNN_GR_HP;
constexpr int LAYERS = SNN_LAYERS, HIDDENS = snn_imax(SNN_GR_NH, 1), MIDS = snn_imax(SNN_GR_MIDS, 1);
constexpr int HIDDEN = RESIDENT_HIDDEN;
constexpr int BATCH = SNN_BATCH, BATCH_PAD = SNN_GR_BP, INPUTS = SNN_INPUT_DIM, CLASSES_PAD = 16;
constexpr int MOMENTS = snn_imax(SNN_OPTIM_MOMENTS, 1);
constexpr int SPLIT = SNN_GR_SPLIT, GRID = BLOCKS * SPLIT, SLICE_K = 16 * SNN_GR_SLICE_KT,
              INPUTS_PAD = SNN_GR_XP;
static_assert(INPUTS % 16 == 0 && HIDDEN_PAD % 16 == 0, "grid-resident kernel: k extents in whole 16s");
static_assert(SPLIT == 1 || SNN_GR_MIDS == 0, "grid-resident kernel: the split is layer 0's (Kconfig)");
static_assert(SNN_CLASSES <= CLASSES_PAD, "grid-resident kernel: the classes in two n8 tiles");
/* Operands read from L2: more k steps' loads in flight before their products than from shared memory, a
 * slice of up to 16 in one round trip (784x4's slices of 13 steps took three at 8: docs/PERF.md v65); in
 * FP32, whose products shuffle operands between lanes (mma16), 2 (longer runs spilled and were slower: v57).
 */
#ifdef CONFIG_PRECISION_FP32
constexpr int L2_RUNS = 2;
#else
constexpr int L2_RUNS = 16;
#endif
/* Operands read from L2 two k steps at a time (mma16_gemm's PAIRS; not layer 0's forward, F0 below): one
 * 16-byte load of a row's eight k where a step at a time makes two of 8 bytes. Their warps waited on the
 * queue of load instructions more than on L2, which delivered 39 % of its bandwidth (docs/PERF.md v55). */
constexpr bool PAIRS = true;
/* In the sm80 build the input gradient, both of whose operands are read from L2, reads a step at a time:
 * paired, ptxas spilled 16 bytes there in 784-1024x3-10 b32, whatever the run length (8, 6 or 4 steps). The
 * sm80 and sm90 builds then add its products in different orders. */
#ifdef CONFIG_TARGET_SM80
constexpr bool GRAD_PAIRS = false;
#else
constexpr bool GRAD_PAIRS = PAIRS;
#endif
/* The block's FP32 rows of layer 0 and of a hidden-to-hidden layer, weights and each moment, read by the
 * GEMMs and updated by their epilogues without bank conflicts where k is not split (Mma16UnitRows; the
 * forward GEMMs' paired reads of a hidden-to-hidden layer's meet two-way ones): W0_LD and W_LD floats apart,
 * 8 mod 16. */
__host__ __device__ constexpr int float_ld(int k) { return snn_round_up(k - 8, 16) + 8; }
constexpr int W0_LD = float_ld(SLICE_K), W_LD = float_ld(SNN_GR_MIDS > 0 ? HIDDEN_PAD : 16);
using W0Rows = Mma16UnitRows<W0_LD>;
using MidRows = Mma16UnitRows<W_LD>;
static_assert(W0Rows::conflict_free() && MidRows::conflict_free(), "grid-resident kernel: FP32 rows' banks");
constexpr int W0_FLOATS = UNITS * W0_LD, W_FLOATS = UNITS * W_LD;
constexpr int DGRAD_LD = mma16_ld(BATCH_PAD); /* the block's output gradient as an operand, [unit][row] */
/* The block's pixels of the normalised batch, transposed in F0: a multiple of 4 pixels each. */
constexpr int PIXELS_PER_BLOCK = snn_round_up((INPUTS + GRID - 1) / GRID, 4);
/* Row strides of the FP32 [row][unit] and [row][class] tiles: one more than their width, so that a column's
 * 32 rows, which the bias gradients read a lane each, fall in 32 banks (the last layer's two GEMMs, which
 * read them four rows a lane, meet two-way conflicts). */
constexpr int ACT_LD = UNITS + 1, DL_LD = CLASSES_PAD + 1;
/* The logits' partial sums. Where each lane of a row's softmax reads one block's (at most 32 groups of
 * units), they are tagged records (fused/grid_barrier.cuh) that the softmax polls, with no barrier before
 * it. With more groups, the records a lane has in flight take twice the registers of plain sums: read in
 * turns, or spilled, they were slower than plain sums after a barrier (784x4 b64, 1024x3 b32; docs/PERF.md
 * v51). With one hidden layer and no split, the logits' barrier is also the only one between a block's
 * reading of the step's dlogits and the next step's softmax rewriting them, an order that polls of relaxed
 * records would not give in PTX's memory model: plain sums there too. RECORDS: a row's, read in pairs. */
constexpr int RECORDS = snn_round_up(SNN_CLASSES, 2);
constexpr bool TAGGED = BLOCKS <= 32 && (SPLIT > 1 || LAYERS > 2);
/* Where blocks share units (one hidden layer), a step's update of the last layer waits for the next step,
 * whose waits it fills: its columns in the split's barrier (GridBarrier: between a block's arrival and its
 * wait), before the logits read them, its bias while the other blocks' partial logits arrive, before the
 * softmax. The same arithmetic on the same operands (the step's dlogits and outputs, which the next step
 * rewrites after). */
constexpr bool DEFER = SPLIT > 1;
/* Layer 0's update leaves warps idle where its GEMM has fewer tiles than the block has warps and does not
 * split k (13 of 16 on the 98 % board): those update layer 0's bias meanwhile; without any, it is updated
 * after the last layer's columns. */
constexpr int B0_TILES = SLICE_K / 16 * (UNITS / 8);
constexpr int B0_IDLE =
    mma16_slices(WARPS, B0_TILES, BATCH_PAD / OP_KSTEP) == 1 ? snn_imax(0, WARPS - B0_TILES) : 0;

struct Mid { /* a hidden-to-hidden layer's rows of the block's units */
    alignas(16) float w[W_FLOATS]; /* unit n's row at MidRows::row(n) */
    float wm[MOMENTS][W_FLOATS];
    float b[UNITS], bm[MOMENTS][UNITS];
};

struct alignas(128) Shared {
    alignas(16) float w0[W0_FLOATS]; /* the block's slice of layer 0's inputs, unit n's at W0Rows::row(n) */
    float w0m[MOMENTS][W0_FLOATS];
    float b0[UNITS], b0m[MOMENTS][UNITS];
    Mid mid[MIDS];
    float wl[CLASSES_PAD][UNITS],
        wlm[MOMENTS][CLASSES_PAD][UNITS];             /* the last layer's columns of the units */
    float bl[CLASSES_PAD], blm[MOMENTS][CLASSES_PAD]; /* its bias: every block the same copy */
    float act[HIDDENS][BATCH_PAD][ACT_LD];     /* hidden outputs of the block's units (the ReLU's mask) */
    float dg[BATCH_PAD][ACT_LD];               /* a hidden output's gradient, the block's units */
    alignas(16) snn_op dgt[UNITS][DGRAD_LD];   /* the same as an operand */
    float dl[BATCH_PAD][DL_LD];                /* the dlogits (the padding classes' 0 since launch) */
    float z[WARPS][CLASSES_PAD];               /* a row's logits, a warp's */
    float scratch[WARPS][16 * 8];              /* k slices' partial tiles */
    int32_t next[BATCH_PAD];                   /* the next step's samples (padding rows: the first's) */
    const uint8_t *image[BATCH_PAD];           /* the step's images */
    uint8_t label[BATCH_PAD];                  /* and labels */
    snn_rate rate;                             /* the learning-rate factors of the step about to start */
};
/* The block's slice of the batch staged in shared memory after the Shared, two steps' buffers of BATCH_PAD
 * rows of bytes: pieces of 16 bytes, rows 16 x odd bytes apart, where rows with bit 3 set swap pieces in
 * pairs (staged_at), so that F0's reads (a thread four k of a row) meet no bank conflicts. B0's ldmatrix
 * (StagedColumns) meets two-way ones; a layout without them measured the same (docs/PERF.md v55). */
constexpr int STAGE_LD = 16 * (snn_round_up(SLICE_K / 16, 2) + 1);
constexpr int STAGE_BYTES = BATCH_PAD * STAGE_LD;
__host__ __device__ constexpr int staged_at(int row, int k)
{
    return row * STAGE_LD + (k ^ ((row & 8) << 1));
}
/* A block's shared memory, unstaged and staged. The staged kernel is built where its share fits a block, and
 * launched where the GPU then still holds the whole grid (fits): it can need one block an SM where the
 * unstaged kernel has two. */
constexpr int SMEM_BYTES = sizeof(Shared), STAGED_SMEM_BYTES = SMEM_BYTES + 2 * STAGE_BYTES;
__host__ __device__ constexpr int smem_bytes(bool with_buffers)
{
    return with_buffers ? STAGED_SMEM_BYTES : SMEM_BYTES;
}
constexpr bool GRID_FITS = GRID <= SNN_FUSED_MAX_BLOCKS; /* every block's clock stamps (bench_step) */
/* BATCH_PAD <= THREADS: a thread fetches each sample of the batch */
constexpr bool FITS = SNN_FUSED_GR_WS_BYTES > 0 && SMEM_BYTES <= SNN_GR_SMEM_MAX &&
                      !(SNN_AUGMENT_SHIFT > 0) && BATCH_PAD <= THREADS && GRID_FITS;
/* the staged kernel's B0 reads byte pairs as 16-bit operands (StagedColumns): not with 32-bit ones */
constexpr bool STAGEABLE = FITS && STAGED_SMEM_BYTES <= SNN_GR_SMEM_MAX && OP_ELEMS == 2;

/* The workspace's tensors (SNN_FUSED_GR_WS_BYTES), each 256-byte aligned, in the order fused.h counts them:
 * their bytes (the batch's too, which the staged kernel leaves unused: the choice is made at launch); OP: an
 * operand's (SNN_GR_OP_BYTES). */
constexpr size_t OP = sizeof(snn_op);
static_assert(OP == SNN_GR_OP_BYTES, "grid-resident kernel: fused.h counts the operands' bytes");
// clang-format off
constexpr size_t WS_PARTS[] = {
    OP * 2 * HIDDENS * BATCH_PAD * HIDDEN_PAD,      /* hidden outputs [parity][layer], ByRow */
    OP * 2 * HIDDENS * BATCH_PAD * HIDDEN_PAD,      /* the same, ByUnit */
    OP * HIDDENS * BATCH_PAD * HIDDEN_PAD,          /* hidden output gradients [layer], ByRow */
    OP * 2 * INPUTS_PAD * BATCH_PAD,                /* the batch [parity][pixel][row]: unstaged */
    OP * 2 * SNN_GR_MIDS * HIDDEN_PAD * HIDDEN_PAD, /* twins [parity][layer] (Workspace::twin_at) */
    /* the logits' partials [block][row][class] (TAGGED: 8-byte records), the dlogits [row][class], the
     * classes unpadded: every block reads them all, so that fewer bytes are fewer L2 requests */
    (size_t)((TAGGED ? 8 : 4) * BLOCKS + 4) * BATCH_PAD * CLASSES_PAD,
    (size_t)4 * BATCH_PAD,                                 /* each row's loss */
    (size_t)4 * BATCH_PAD,                                 /* and hit */
    SPLIT > 1 ? (size_t)4 * GRID * BATCH_PAD * UNITS : 0,  /* layer 0's partial sums [block][row][unit] */
    4};                                                    /* the grid barrier's count */
// clang-format on
__host__ __device__ constexpr size_t ws_at(int part)
{
    return part == 0 ? 0 : ws_at(part - 1) + (WS_PARTS[part - 1] + 255) / 256 * 256;
}
static_assert(!FITS || ws_at(10) <= SNN_FUSED_GR_WS_BYTES,
              "grid-resident kernel: fused.h counts the workspace");

struct Workspace {
    snn_op *hact, *hactt, *dy, *xt, *wt;
    uint64_t *partial; /* the logits' partial sums: TAGGED records, or floats */
    float *dlog, *rowloss;
    int32_t *rowright;
    float *sums0;
    unsigned *arrivals;
    __device__ explicit Workspace(unsigned char *at)
        : hact((snn_op *)(at + ws_at(0))), hactt((snn_op *)(at + ws_at(1))), dy((snn_op *)(at + ws_at(2))),
          xt((snn_op *)(at + ws_at(3))), wt((snn_op *)(at + ws_at(4))), partial((uint64_t *)(at + ws_at(5))),
          dlog((float *)(at + ws_at(5)) + (size_t)(TAGGED ? 2 : 1) * BLOCKS * BATCH_PAD * CLASSES_PAD),
          rowloss((float *)(at + ws_at(6))), rowright((int32_t *)(at + ws_at(7))),
          sums0((float *)(at + ws_at(8))), arrivals((unsigned *)(at + ws_at(9)))
    {
    }
    /* A hidden layer's outputs or output gradients as every block reads them, in fragment tiles: by row,
     * k the units (the next layer's forward GEMM, the input gradient), and by unit, k the rows (the
     * layer above's update) */
    using ByRow = Mma16Tiled<HIDDEN_PAD / OP_KSTEP>;
    using ByUnit = Mma16Tiled<BATCH_PAD / OP_KSTEP>;
    /* hidden layer l's output of step parity p, ByRow and ByUnit */
    static constexpr size_t LAYER = (size_t)BATCH_PAD * HIDDEN_PAD; /* one hidden layer's elements */
    __device__ snn_op *out(int p, int l) const { return hact + ((size_t)p * HIDDENS + l) * LAYER; }
    __device__ snn_op *out_t(int p, int l) const { return hactt + ((size_t)p * HIDDENS + l) * LAYER; }
    __device__ snn_op *grad(int l) const { return dy + (size_t)l * LAYER; } /* ByRow */
    __device__ snn_op *batch_t(int p) const
    {
        return xt + (size_t)p * INPUTS_PAD * BATCH_PAD;
    } /* [pixel][row] */
    /* block b's partial sums of layer 0 over its slice, [row][unit] */
    __device__ float *slice_sums(int b) const { return sums0 + (size_t)b * BATCH_PAD * UNITS; }
    /* hidden-to-hidden layer l's twin for steps of parity p, at twin_at */
    __device__ snn_op *twin(int p, int l) const
    {
        return wt + ((size_t)p * MIDS + l - 1) * HIDDEN_PAD * HIDDEN_PAD;
    }
    /* A twin's weight from input k to output unit n: a block's 8 units of 8 inputs in a run of 64, [input
     * % 8][unit % 8] (128 bytes of 16-bit operands, a line), runs by the block, then by the inputs' eights.
     * Each store instruction of an update's tile (8 inputs, each thread's two adjacent units at once)
     * writes a whole run, one line of 16-bit operands (two of 32-bit ones) that no other block writes; the
     * input gradient through the layer reads 8 output units of an input a load.
     * Stored as [input][output unit], a block's 16 bytes of each row, each line was written by 8 blocks and
     * each store reached 8 lines: the updates' stores held about 2 us each (docs/PERF.md v63). */
    static constexpr int TWIN_KS = 8;
    static __device__ __forceinline__ int twin_at(int k, int n)
    {
        /* (k / 8 * BLOCKS + n / 8) * 64 + k % 8 * 8 + n % 8 */
        return (k + (k & -TWIN_KS) * (BLOCKS - 1)) * UNITS + n + (n & -UNITS) * (TWIN_KS - 1);
    }
};

/* ---------------------------------------------------------------------------
 * operand views (mma16_gemm)
 * ------------------------------------------------------------------------- */

/* The batch's images read in place, element (i, k) pixel k0 + k of row i's image, normalised and rounded as
 * read. */
struct Pixels : Mma16Pairs<Pixels> {
    const uint8_t *const *image;
    int k0;
    __device__ Pixels(const uint8_t *const *image, int k0) : image(image), k0(k0) {}
    template <int GAP> __device__ __forceinline__ uint2 frag(int i, int k) const
    {
        static_assert(GAP == OP_ELEMS, "grid-resident kernel: image rows are read two words a thread");
        return snn_pixels_op(image[i] + k0 + k);
    }
};

/* A twin's rows of the block's units as a B operand (the input gradient through the layer): element (i, k),
 * unit u0 + i's weight from output unit k, runs of 8 k contiguous (Workspace::twin_at). */
struct TwinRows : Mma16Runs<TwinRows> {
    const snn_op *p;
    int u0;
    __device__ TwinRows(const snn_op *p, int u0) : p(p), u0(u0) {}
    __device__ __forceinline__ const snn_op *at(int i, int k) const
    {
        return p + Workspace::twin_at(u0 + i, k);
    }
};

/* Step parity p's staged slice (the staged kernel): element (i, k), row i's pixel k of the slice, normalised
 * and rounded as read. */
struct Staged : Mma16Pairs<Staged> {
    const uint8_t *p;
    __device__ explicit Staged(const uint8_t *p) : p(p) {}
    template <int GAP> __device__ __forceinline__ uint2 frag(int i, int k) const
    {
        static_assert(GAP == OP_ELEMS, "grid-resident kernel: staged rows are read two words a thread");
        return snn_pixels_op(p + staged_at(i, k));
    }
};

/* The same transposed for layer 0's update, as an A operand: element (i, k), pixel staged_pixel(i) of row k.
 * A k16 step's fragment is two 8 x 8 pieces of 16-bit elements, each two pixels of a row, by
 * ldmatrix.trans, whose rows are those of the fragments' k slots read four k a thread (QUAD: slots 2t, 2t +
 * 1 the rows 4t, 4t + 1 of the first piece, slots 2t + 8, 2t + 9 rows 4t + 2, 4t + 3 of the second): a
 * lane's element of a piece holds pixels 2g and 2g + 1 of a tile's 16, its rows g and g + 8. */
struct StagedColumns {
    static constexpr bool KEEPS = false;
    const uint8_t *p;
    __device__ explicit StagedColumns(const uint8_t *p) : p(p) {}
    template <bool QUAD> __device__ __forceinline__ uint4 a16(int m0, int k) const
    {
        static_assert(QUAD, "grid-resident kernel: staged columns are read four rows a thread");
        const int lane = threadIdx.x % 32, i = lane % 8, piece = lane / 8 % 2;
        uint32_t r[2];
        sm75_ldmatrix_x2_trans(r, p + staged_at(k + 2 * i - (i & 1) + 2 * piece, m0));
        /* bytes 0 and 2 of a piece's element: pixel 2g in its two rows; bytes 1 and 3: pixel 2g + 1 */
        auto pixel = [](uint32_t two_rows, int which) {
            return snn_twin_bits2(snn_pixel_fma(two_rows, which), snn_pixel_fma(two_rows, which + 2));
        };
        return make_uint4(pixel(r[0], 0), pixel(r[0], 1), pixel(r[1], 0), pixel(r[1], 1));
    }
};
/* The pixel of a staged slice that row m of StagedColumns holds: within each 16, rows g and g + 8 pixels 2g
 * and 2g + 1. */
__device__ __forceinline__ int staged_pixel(int m) { return m / 16 * 16 + m % 8 * 2 + m % 16 / 8; }

/* ---------------------------------------------------------------------------
 * the block's share of the model in and out
 * ------------------------------------------------------------------------- */

/* Block c x SPLIT + q's share: out, what the group holds alike is written by its first block. */
static __device__ void state_copy(Shared &S, const snn_fused_net &net, int c, int q, bool in)
{
    const int u0 = c * UNITS, k0 = q * SLICE_K;
    auto row = [u0](int n, int k, int width) -> long {
        return u0 + n < HIDDEN ? (long)(u0 + n) * width + k : -1;
    };
    auto bias = [u0](int, int n) -> long { return u0 + n < HIDDEN ? u0 + n : -1; };
    const snn_fused_layer &L0 = net.layer[0];
    snn_param_copy<THREADS>(
        in, UNITS, SLICE_K, S.w0, W0_LD, S.w0m[0], W0_FLOATS, nullptr, 0, L0.w, L0.sw,
        [&](int r, int k) { return k0 + k < INPUTS ? row(W0Rows::unit(r), k0 + k, INPUTS) : -1; });
    if (!in && q > 0)
        return;
    snn_param_copy<THREADS>(in, 1, UNITS, S.b0, UNITS, &S.b0m[0][0], UNITS, nullptr, 0, L0.b, L0.sb, bias);
    for (int l = 1; l + 1 < LAYERS; l++) {
        Mid &M = S.mid[l - 1];
        const snn_fused_layer &L = net.layer[l];
        snn_param_copy<THREADS>(in, UNITS, HIDDEN, M.w, W_LD, M.wm[0], W_FLOATS, nullptr, 0, L.w, L.sw,
                                [&](int r, int k) { return row(MidRows::unit(r), k, HIDDEN); });
        snn_param_copy<THREADS>(in, 1, UNITS, M.b, UNITS, &M.bm[0][0], UNITS, nullptr, 0, L.b, L.sb, bias);
    }
    const snn_fused_layer &LL = net.layer[LAYERS - 1];
    snn_param_copy<THREADS>(
        in, SNN_CLASSES, UNITS, &S.wl[0][0], UNITS, &S.wlm[0][0][0], CLASSES_PAD * UNITS, nullptr, 0, LL.w,
        LL.sw, [&](int j, int n) -> long { return u0 + n < HIDDEN ? (long)j * HIDDEN + u0 + n : -1; });
    if (in || c == 0) /* every block reads the bias, block 0 writes it back */
        snn_param_copy<THREADS>(in, 1, SNN_CLASSES, S.bl, CLASSES_PAD, &S.blm[0][0], CLASSES_PAD, nullptr, 0,
                                LL.b, LL.sb, [](int, int j) -> long { return j; });
}

/* The twin of parity p of hidden-to-hidden layer l, the block's units, from their FP32 rows (padding inputs
 * 0): a thread an input's units in 16-byte stores. */
static __device__ void write_twin(const Shared &S, const Workspace &W, int p, int l, int u0)
{
    constexpr int WORDS = UNITS / OP_ELEMS;
    static_assert(WORDS % 4 == 0, "grid-resident kernel: a twin's units in whole 16-byte stores");
    const float *w = S.mid[l - 1].w;
    for (int k = threadIdx.x; k < HIDDEN_PAD; k += THREADS) {
        float value[UNITS];
#pragma unroll
        for (int n = 0; n < UNITS; n++)
            value[n] = k < HIDDEN ? w[MidRows::row(n) + k] : 0.0f;
        uint32_t word[WORDS];
#pragma unroll
        for (int v = 0; v < WORDS; v++)
            word[v] = snn_op_word(value + v * OP_ELEMS, 1);
        uint4 *to = reinterpret_cast<uint4 *>(W.twin(p, l) + Workspace::twin_at(k, u0));
#pragma unroll
        for (int v = 0; v < WORDS / 4; v++)
            to[v] = make_uint4(word[4 * v], word[4 * v + 1], word[4 * v + 2], word[4 * v + 3]);
    }
}

/* The next step's slice of the batch (the samples in S.next) into a staging buffer by cp.async, one group:
 * bytes [k0, k0 + 16 pieces) of each image, the slice's inputs. */
static __device__ void stage(uint8_t *buf, const Shared &S, const uint8_t *images, int k0, int pieces)
{
    /* a thread one piece of rows ROWS apart: no division in the loop */
    constexpr int PIECES = SLICE_K / 16, ROWS = THREADS / PIECES;
    static_assert(ROWS > 0, "grid-resident kernel: a slice's pieces at most the block's threads");
    const int piece = threadIdx.x % PIECES;
    if (piece < pieces && threadIdx.x < ROWS * PIECES)
        for (int r = threadIdx.x / PIECES; r < BATCH_PAD; r += ROWS)
            sm80_cp_async_16(buf + staged_at(r, 16 * piece),
                             images + (size_t)S.next[r] * INPUTS + k0 + 16 * piece);
    sm80_cp_async_commit();
}

/* ---------------------------------------------------------------------------
 * the step's element-wise ends
 * ------------------------------------------------------------------------- */

/* Hidden layer l's output at row m, the block's unit n, from its pre-activation v (bias added)
 * (resident_hidden_out): kept for the backward pass, and where a hidden-to-hidden layer reads it, as every
 * block's operand by row and by unit. */
static __device__ __forceinline__ void hidden_out(Shared &S, const Workspace &W, const snn_fused_net &net,
                                                  const SnnStepDraws &d, int p, int l, int u0, int m, int n,
                                                  float v)
{
    v = resident_hidden_out(net, d, l, m, u0 + n, v);
    S.act[l][m][n] = v;
    if (l + 2 < LAYERS) {
        const snn_op h = snn_op_bits(v);
        W.out(p, l)[Workspace::ByRow::index(m, u0 + n)] = h;
        W.out_t(p, l)[Workspace::ByUnit::index(u0 + n, m)] = h;
    }
}

/* The gradient of hidden layer l's output at row m, the block's unit n, from dY . W (v)
 * (resident_hidden_grad): FP32 for the bias, an operand for the update and, where a layer below needs all of
 * it (l > 0), for every block. */
static __device__ __forceinline__ void hidden_grad(Shared &S, const Workspace &W, const snn_fused_net &net,
                                                   const SnnStepDraws &d, int l, int u0, int m, int n,
                                                   float v)
{
    v = resident_hidden_grad(net, d, l, m, u0 + n, S.act[l][m][n], v);
    S.dg[m][n] = v;
    const snn_op h = snn_op_bits(v);
    S.dgt[n][m] = h;
    if (l > 0)
        W.grad(l)[Workspace::ByRow::index(m, u0 + n)] = h;
}

/* The logits' partial sums over the block's units, [row][class], from the last hidden layer's outputs: rows
 * q, q + SPLIT, ... of them, the group's others the rest. */
static __device__ void logits_partial(const Shared &S, const Workspace &W, int c, int q, unsigned tag)
{
    constexpr int ROWS = (BATCH_PAD + SPLIT - 1) / SPLIT;
    uint64_t *part = W.partial + (size_t)c * BATCH_PAD * CLASSES_PAD;
    float *sums = reinterpret_cast<float *>(W.partial) + (size_t)c * BATCH_PAD * CLASSES_PAD;
    constexpr int WRITTEN = TAGGED ? RECORDS : CLASSES_PAD; /* a row's: plain, the padding's zeros too */
    for (int e = threadIdx.x; e < ROWS * WRITTEN; e += THREADS) {
        const int m = e / WRITTEN * SPLIT + q, j = e % WRITTEN;
        if (m >= BATCH_PAD)
            continue;
        float v = 0.0f;
        if (j < SNN_CLASSES)
#pragma unroll
            for (int n = 0; n < UNITS; n++)
                v += snn_op_rounded(S.act[HIDDENS - 1][m][n]) * snn_op_rounded(S.wl[j][n]);
        if constexpr (TAGGED)
            tagged_store(part + m * CLASSES_PAD + j, v, tag);
        else
            sums[m * CLASSES_PAD + j] = v;
    }
}

/* Layer 0's outputs of every row from the group's partial sums (SPLIT > 1), added in slice order. */
static __device__ void slices_added(Shared &S, const Workspace &W, const snn_fused_net &net,
                                    const SnnStepDraws &d, int p, int c, int u0)
{
    for (int e = threadIdx.x; e < BATCH_PAD * UNITS / 4; e += THREADS) {
        float4 part[SPLIT]; /* every load issued first */
#pragma unroll
        for (int slice = 0; slice < SPLIT; slice++)
            part[slice] = reinterpret_cast<const float4 *>(W.slice_sums(c * SPLIT + slice))[e];
        float v[4] = {part[0].x, part[0].y, part[0].z, part[0].w};
#pragma unroll
        for (int slice = 1; slice < SPLIT; slice++) {
            v[0] += part[slice].x;
            v[1] += part[slice].y;
            v[2] += part[slice].z;
            v[3] += part[slice].w;
        }
        const int m = 4 * e / UNITS, n = 4 * e % UNITS;
#pragma unroll
        for (int i = 0; i < 4; i++)
            hidden_out(S, W, net, d, p, 0, u0, m, n + i, v[i] + S.b0[n + i]);
    }
}

/* Row r's logits but the bias, class by class, in every lane of the warp: lane j adds the partials of
 * blocks j, j + 32, ..., in that order, every load issued first (TAGGED, read again until all the warp's
 * carry the step's tag); then a butterfly. */
static __device__ void row_sums(const Workspace &W, int r, int j, unsigned tag, float (&sum)[SNN_CLASSES])
{
    constexpr int PER = (BLOCKS + 31) / 32;
    if constexpr (TAGGED) {
        float part[PER][RECORDS];
        for (bool current = false; !current;) {
            bool mine = true;
#pragma unroll
            for (int i = 0; i < PER; i++)
#pragma unroll
                for (int k = 0; k < RECORDS; k += 2) {
                    const int block = j + 32 * i;
                    part[i][k] = part[i][k + 1] = 0.0f;
                    if (block < BLOCKS)
                        mine &= tagged_load2(W.partial + ((size_t)block * BATCH_PAD + r) * CLASSES_PAD + k,
                                             tag, part[i][k], part[i][k + 1]);
                }
            current = __all_sync(0xffffffffu, mine);
        }
#pragma unroll
        for (int k = 0; k < SNN_CLASSES; k++) {
            float v = 0.0f;
#pragma unroll
            for (int i = 0; i < PER; i++)
                v += part[i][k];
            sum[k] = snn_lanes_sum<32>(v);
        }
    } else {
        const float *sums = reinterpret_cast<const float *>(W.partial);
        float4 part[PER][SNN_CLASSES / 4 + 1];
#pragma unroll
        for (int i = 0; i < PER; i++)
#pragma unroll
            for (int v = 0; v <= SNN_CLASSES / 4; v++)
                part[i][v] = j + 32 * i < BLOCKS
                                 ? reinterpret_cast<const float4 *>(
                                       sums + ((size_t)(j + 32 * i) * BATCH_PAD + r) * CLASSES_PAD)[v]
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int k = 0; k < SNN_CLASSES; k++) {
            float v = 0.0f;
#pragma unroll
            for (int i = 0; i < PER; i++)
                v += reinterpret_cast<const float *>(&part[i][k / 4])[k % 4];
            sum[k] = snn_lanes_sum<32>(v);
        }
    }
}

/* Softmax and cross-entropy of the batch's rows b, b + GRID, ..., a warp a row (class j on lane j): the
 * logits summed over the blocks' partials in block order, the row's dlogits, loss and hit to the workspace;
 * padding rows' dlogits 0. Tracing, the logits and dlogits too. */
static __device__ void softmax_rows(Shared &S, const Workspace &W, const snn_fused_net &net, int b,
                                    unsigned tag)
{
    const int warp = threadIdx.x / 32, j = threadIdx.x % 32;
    for (int r = b + warp * GRID; r < BATCH_PAD; r += WARPS * GRID) {
        const bool row = r < BATCH, cls = j < SNN_CLASSES;
        float sums[SNN_CLASSES];
        row_sums(W, r, j, tag, sums);
        float z[1] = {-INFINITY};
#pragma unroll
        for (int k = 0; k < SNN_CLASSES; k++)
            if (row && j == k)
                z[0] = S.bl[k] + sums[k];
        if (row && cls)
            S.z[warp][j] = z[0];
        const SnnRowSoftmax<32, 1> sm(z);
        __syncwarp(); /* the row's logits in S.z */
        const int label = row ? S.label[r] : 0;
        if (row && j == 0) {
            W.rowloss[r] = sm.loss(S.z[warp], label, true);
            W.rowright[r] = sm.arg == label;
        }
        if (cls) {
            const float g = row ? sm.grad(0, label, BATCH) : 0.0f;
            W.dlog[r * SNN_CLASSES + j] = g;
            if (net.trace && row) {
                net.act[LAYERS][r * SNN_CLASSES + j] = z[0];
                net.grad[LAYERS - 1][r * SNN_CLASSES + j] = g;
            }
        }
        __syncwarp(); /* S.z read before the warp's next row */
    }
}

/* The last layer's columns of the block's units, updated from the dlogits and the last hidden layer's
 * outputs: their gradient, dlogits^T x outputs over the batch's rows, one m16n8 tile whose k (the rows) the
 * warps split (mma16_gemm); the thread that adds a weight's slices takes its AdamW step. */
static __device__ void last_layer_update(Shared &S, int u0, const snn_rate &rate)
{
    mma16_gemm<THREADS, CLASSES_PAD, UNITS, BATCH_PAD>(
        Mma16FloatMat<1, DL_LD>{&S.dl[0][0]}, Mma16FloatMat<1, ACT_LD>{&S.act[HIDDENS - 1][0][0]}, S.scratch,
        mma16_update(CLASSES_PAD * UNITS, rate, [&](int j, int n, float *&w, float *&m, snn_op *&twin) {
            w = &S.wl[j][n], m = &S.wlm[0][j][n], twin = nullptr;
            return j < SNN_CLASSES && u0 + n < HIDDEN;
        }));
    __syncthreads(); /* the slices in S.scratch added before another GEMM writes its own there */
}

/* A hidden-to-hidden layer l's update of the block's rows from the gradient in S.dgt and the layer's inputs
 * of step parity p; the twin of parity p ^ 1 rewritten. */
static __device__ void mid_update(Shared &S, const Workspace &W, int p, int l, int u0, const snn_rate &rate)
{
    Mid &M = S.mid[l - 1];
    snn_op *twin = W.twin(p ^ 1, l) + Workspace::twin_at(0, u0);
    mma16_gemm<THREADS, HIDDEN_PAD, UNITS, BATCH_PAD, true, 4, false, PAIRS>(
        Workspace::ByUnit{W.out_t(p, l - 1)}, Mma16Mat<DGRAD_LD, 1>{&S.dgt[0][0]}, S.scratch,
        mma16_update<true>(W_FLOATS, rate, [&](int k, int n, float *&w, float *&m, snn_op *&t) {
            w = &M.w[MidRows::row(n) + k], m = &M.wm[0][MidRows::row(n) + k],
            t = &twin[Workspace::twin_at(k, 0) + n];
            return k < HIDDEN && u0 + n < HIDDEN;
        }));
}

/* The bias of hidden layer l's units (the block's), from the gradient in S.dg, by warps [first, WARPS). */
static __device__ void bias_update(Shared &S, int l, int owned, const snn_rate &rate, int first = 0)
{
    float *b = l == 0 ? S.b0 : S.mid[l - 1].b, *bm = l == 0 ? &S.b0m[0][0] : &S.mid[l - 1].bm[0][0];
    snn_bias_update<THREADS>(b, bm, UNITS, &S.dg[0][0], ACT_LD, BATCH, owned, rate, first);
}

/* ---------------------------------------------------------------------------
 * the kernel
 * ------------------------------------------------------------------------- */

template <bool STAGED>
__global__ void __launch_bounds__(THREADS, 1) train_kernel(snn_fused_net net, int first, int last)
{
    if constexpr (!(STAGED ? STAGEABLE : FITS))
        return; /* never launched (fits): no code for a model that does not fit */
    /* staged, the buffers zeroed too: B0 reads the pieces past the inputs, never staged, and drops them */
    Shared &S = resident_shared<Shared, THREADS, smem_bytes(STAGED)>();
    cg::grid_group grid = cg::this_grid();
    const Workspace W(net.gr_ws);
    GridBarrier barrier(W.arrivals); /* read before the grid.sync below, which no block passes before all */
    const int b = blockIdx.x, c = b / SPLIT, q = b % SPLIT, u0 = c * UNITS, k0 = q * SLICE_K,
              tid = threadIdx.x;
    const int owned = snn_imax(0, snn_imin(UNITS, HIDDEN - u0)); /* the block's units that are not padding */
    /* its slice's inputs, as k steps and as 16-byte pieces of the images (staged) */
    const int slice_inputs = snn_imin(SLICE_K, INPUTS - k0), slice_kt = slice_inputs / OP_KSTEP,
              slice_pieces = slice_inputs / 16;
    state_copy(S, net, c, q, true);
    for (int e = tid; e < (CLASSES_PAD - SNN_CLASSES) * UNITS; e += THREADS) /* k padding of the gradient's */
        S.wl[SNN_CLASSES + e / UNITS][e % UNITS] = 0.0f;
    /* a step's rate factors, computed in double, took a thread a microsecond at the step's start: each step
     * computes the next step's on one thread, in the softmax's barrier */
    const int32_t epoch = *net.clock.epoch;
    /* the sample of the thread's row (padding rows: the first's) in step `step` */
    auto sample_at = [&](int step) { return net.order[(long)step * BATCH + (tid < BATCH ? tid : 0)]; };
    uint8_t next_label = 0; /* the next step's label of the thread's row */
    if (tid < BATCH_PAD) {  /* the launch's first samples */
        S.next[tid] = sample_at(first);
        next_label = net.train_labels[S.next[tid]];
    }
    if (tid == 0)
        S.rate = snn_clock_rate_in(net.clock, epoch, first);
    __syncthreads();
    /* staged, the buffer of step parity p's slice */
    auto buffer = [&S](int p) { return reinterpret_cast<uint8_t *>(&S) + sizeof(Shared) + p * STAGE_BYTES; };
    if constexpr (STAGED)
        stage(buffer(first & 1), S, net.train_images, k0, slice_pieces);
    for (int l = 1; l + 1 < LAYERS; l++)
        for (int p = 0; p < 2; p++)
            write_twin(S, W, p, l, u0);
    /* the logits' records cleared, so that nothing the workspace held before passes for a current one */
    for (int e = b * THREADS + tid; TAGGED && e < BLOCKS * BATCH_PAD * CLASSES_PAD; e += GRID * THREADS)
        W.partial[e] = 0;
    if constexpr (!STAGED) { /* the batch's padding pixels, which the last slice's update reads and drops */
        constexpr int PAD = (INPUTS_PAD - INPUTS) * BATCH_PAD; /* a parity's elements */
        for (int e = b * THREADS + tid; e < 2 * PAD; e += GRID * THREADS)
            W.batch_t(e >= PAD)[INPUTS * BATCH_PAD + e - (e >= PAD) * PAD] = snn_op_bits(0.0f);
    }
    grid.sync(); /* every twin whole before the first input gradient reads it */

    /* the last layer's update (DEFER: in the next step's barriers, with this step's rate factors) */
    auto last_columns = [&](const snn_rate &r) {
        last_layer_update(S, u0, r);
        if (!(DEFER && B0_IDLE > 0))
            bias_update(S, HIDDENS - 1, owned, r);
    };
    auto last_bias = [&](const snn_rate &r) {
        snn_bias_update<THREADS>(S.bl, &S.blm[0][0], CLASSES_PAD, &S.dl[0][0], DL_LD, BATCH, SNN_CLASSES, r);
    };
    snn_rate deferred_rate = S.rate;

    for (int s = first; s < last; ++s) {
        const int p = s & 1;
        const SnnStepDraws draws = {{net.noise.key[0], net.noise.key[1]}, epoch, s};
        fused_stamp(net, s, 2 * LAYERS, true);
        int32_t next = 0; /* the next step's sample of the thread's row, read during this one */
        if (tid < BATCH_PAD) {
            S.image[tid] = net.train_images + (size_t)S.next[tid] * INPUTS;
            S.label[tid] = next_label;
            if (s + 1 < last)
                next = sample_at(s + 1);
        }
        const uint8_t *const slice = buffer(p); /* the step's, staged */
        if constexpr (STAGED)
            sm80_cp_async_wait<0>();
        __syncthreads();
        const snn_rate rate = S.rate; /* in registers: the updates' epilogues read it per element */
        resident_trace_batch<THREADS>(
            net, p, [&](int r) { return S.image[r]; }, [&](int r) { return S.label[r]; });

        /* F0 (where the group splits it, each slice's partial sums; the group adds them after a barrier);
         * read in place, the block's pixels of the batch transposed for layer 0's update; a k step at a
         * time: paired, F0 took 3.33 us where it took 2.94 on 784x4 b64, and 156 registers in the 256-thread
         * split build, one block an SM (docs/PERF.md v55) */
        const Mma16FloatRows<W0Rows> w0_rows{S.w0};
        auto f0_out = [&](int m, int n, float v) {
            if constexpr (SPLIT == 1)
                hidden_out(S, W, net, draws, p, 0, u0, m, n, v + S.b0[n]);
            else
                W.slice_sums(b)[m * UNITS + n] = v;
        };
        if constexpr (STAGED) {
            mma16_gemm<THREADS, BATCH_PAD, UNITS, SLICE_K, true, 4, (SPLIT > 1)>(Staged(slice), w0_rows,
                                                                                 S.scratch, f0_out, slice_kt);
        } else {
            mma16_gemm<THREADS, BATCH_PAD, UNITS, SLICE_K, true, L2_RUNS, (SPLIT > 1)>(
                Pixels(S.image, k0), w0_rows, S.scratch, f0_out, slice_kt);
            for (int e = tid; e < BATCH_PAD * (PIXELS_PER_BLOCK / 4); e += THREADS) {
                const int m = e % BATCH_PAD, k = b * PIXELS_PER_BLOCK + e / BATCH_PAD * 4;
                if (k < INPUTS) {
                    const uint32_t four = *reinterpret_cast<const uint32_t *>(S.image[m] + k);
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        W.batch_t(p)[(k + i) * BATCH_PAD + m] = snn_op_bits(snn_pixel_op(four, i));
                }
            }
        }
        if constexpr (SPLIT > 1) {
            barrier.arrive(); /* every slice's partial sums written */
            if (DEFER && s > first)
                last_columns(deferred_rate);
            barrier.wait();
            slices_added(S, W, net, draws, p, c, u0);
        }
        if (tid < BATCH_PAD) {
            S.next[tid] = next;
            if (s + 1 < last)
                next_label = net.train_labels[next];
        }
        __syncthreads();

        /* F1 .. F(L-2): the previous output, all of it, against the block's rows */
        for (int l = 1; l + 1 < LAYERS; l++) {
            fused_stamp(net, s, l - 1, false);
            barrier.sync();
            fused_stamp(net, s, l - 1, true);
            mma16_gemm<THREADS, BATCH_PAD, UNITS, HIDDEN_PAD, true, L2_RUNS, false, PAIRS>(
                Workspace::ByRow{W.out(p, l - 1)}, Mma16FloatRows<MidRows>{S.mid[l - 1].w}, S.scratch,
                [&](int m, int n, float v) {
                    hidden_out(S, W, net, draws, p, l, u0, m, n, v + S.mid[l - 1].b[n]);
                });
            __syncthreads();
        }

        /* F(L-1): partial sums, then a block per row: softmax, dlogits */
        logits_partial(S, W, c, q, barrier.tag());
        fused_stamp(net, s, LAYERS - 2, false);
        if constexpr (!TAGGED)
            barrier.arrive();
        if (DEFER && s > first)
            last_bias(deferred_rate);
        if constexpr (!TAGGED)
            barrier.wait();
        else if constexpr (DEFER)
            __syncthreads(); /* the bias the softmax reads */
        fused_stamp(net, s, LAYERS - 2, true);
        softmax_rows(S, W, net, b, barrier.tag());
        fused_stamp(net, s, LAYERS - 1, false);
        barrier.arrive();
        /* while the other blocks arrive: the next step's rate and, into the buffer the step before read, its
         * slice, issued after the arrival, which would otherwise wait for the copies too */
        if (s + 1 < last) {
            if (tid == THREADS - 32)
                S.rate = snn_clock_rate_in(net.clock, epoch, s + 1);
            if constexpr (STAGED)
                stage(buffer(p ^ 1), S, net.train_images, k0, slice_pieces);
        }
        barrier.wait();
        fused_stamp(net, s, LAYERS - 1, true);

        /* B(L-1): the last layer, from the dlogits every block reads */
        for (int e = tid; e < BATCH_PAD * SNN_CLASSES; e += THREADS)
            S.dl[e / SNN_CLASSES][e % SNN_CLASSES] = W.dlog[e];
        __syncthreads();
        if (!DEFER)
            last_bias(rate);
        if (b == 0 && tid / 32 == WARPS - 1) { /* the step's loss and hits: a warp, lanes by rows */
            double loss = 0.0;
            int right = 0;
            for (int r = tid % 32; r < BATCH; r += 32) {
                loss += (double)W.rowloss[r];
                right += W.rowright[r];
            }
            loss = snn_lanes_sum<32>(loss);
            right = snn_lanes_sum<32>(right);
            if (tid % 32 == 0) {
                net.train_loss[s] = (float)(loss / BATCH);
                net.train_correct[s] = right;
            }
        }
        /* the block's units' output gradient: the dlogits against the last layer's columns, k the classes */
        mma16_gemm<THREADS, BATCH_PAD, UNITS, CLASSES_PAD>(
            Mma16FloatMat<DL_LD, 1>{&S.dl[0][0]}, Mma16FloatMat<1, UNITS>{&S.wl[0][0]}, S.scratch,
            [&](int m, int n, float v) { hidden_grad(S, W, net, draws, HIDDENS - 1, u0, m, n, v); });
        __syncthreads(); /* the input gradient has read the last layer's columns before they change */
        if (!DEFER)
            last_columns(rate);
        fused_stamp(net, s, LAYERS, false);

        /* B(L-2) .. B1: the whole output gradient of layer l against the twin's rows of the block's units;
         * the update of layer l's rows, from the gradient the phase before left in S.dgt, while the other
         * blocks arrive (it writes the twin of the next step's parity, which no block reads before then) */
        for (int l = LAYERS - 2; l >= 1; l--) {
            const int phase = 2 * LAYERS - 1 - l;
            barrier.arrive();
            mid_update(S, W, p, l, u0, rate);
            barrier.wait();
            fused_stamp(net, s, phase - 1, true);
            const TwinRows twin_rows{W.twin(p, l), u0};
            mma16_gemm<THREADS, BATCH_PAD, UNITS, HIDDEN_PAD, true, L2_RUNS, false, GRAD_PAIRS>(
                Workspace::ByRow{W.grad(l)}, twin_rows, S.scratch,
                [&](int m, int n, float v) { hidden_grad(S, W, net, draws, l - 1, u0, m, n, v); });
            __syncthreads();
            bias_update(S, l - 1, owned, rate);
            fused_stamp(net, s, phase, false);
        }
        fused_stamp(net, s, 2 * LAYERS - 2, true); /* no barrier after the last input gradient */

        /* B0: layer 0's update, local: the block's slice of its inputs, a parameter at a time in the GEMM's
         * epilogue (four at once, the other layers' mma16_update, and through a buffer, every thread's
         * elements after the GEMM, were slower: docs/PERF.md v48, v54); where the GEMM leaves warps idle,
         * they update layer 0's bias meanwhile */
        const Mma16Mat<DGRAD_LD, 1> grad_rows{&S.dgt[0][0]};
        auto w0_update = [&](int k, int n, float g) {
            if (k0 + k < INPUTS && u0 + n < HIDDEN)
                snn_param_update(&S.w0[W0Rows::row(n) + k], &S.w0m[0][W0Rows::row(n) + k], W0_FLOATS, nullptr,
                                 g, rate);
        };
        if constexpr (STAGED)
            mma16_gemm<THREADS, SLICE_K, UNITS, BATCH_PAD>(
                StagedColumns(slice), grad_rows, S.scratch,
                [&](int m, int n, float g) { w0_update(staged_pixel(m), n, g); });
        else
            mma16_gemm<THREADS, SLICE_K, UNITS, BATCH_PAD, true, 4, false, PAIRS>(
                Mma16Mat<BATCH_PAD, 1>{W.batch_t(p) + (size_t)k0 * BATCH_PAD}, grad_rows, S.scratch,
                w0_update);
        if (DEFER && B0_IDLE > 0 && tid / 32 >= B0_TILES)
            bias_update(S, 0, owned, rate, B0_TILES);
        __syncthreads();
        fused_stamp(net, s, 2 * LAYERS - 1, false);
        fused_stamp(net, s, 2 * LAYERS - 1, true);
        deferred_rate = rate;
    }
    if (DEFER && last > first) { /* the launch's last step's */
        last_columns(deferred_rate);
        last_bias(deferred_rate);
        __syncthreads();
    }
    state_copy(S, net, c, q, false);
    if (b == 0 && tid == 0)
        *net.train_step = last;
}

/* ---------------------------------------------------------------------------
 * launch
 * ------------------------------------------------------------------------- */

static bool staged; /* fits chose the staged kernel */

static bool fits(char *why, int len)
{
    /* blocks the GPU holds at once (-1: not asked yet), and the shared memory it gives a block */
    static int resident = -1, optin;
    if (SNN_LAYERS >= 2 && SNN_AUGMENT_SHIFT > 0) {
        snprintf(why, len, "it reads the images in place and does not translate them (CONFIG_AUGMENT_SHIFT)");
        return false;
    }
    if (!GRID_FITS) {
        snprintf(why, len, "its grid, %d blocks (%d x CONFIG_FUSED_GRID_RESIDENT_SPLIT=%d), exceeds %d", GRID,
                 BLOCKS, SPLIT, SNN_FUSED_MAX_BLOCKS);
        return false;
    }
    if (!resident_fits(why, len, FITS, BATCH_PAD, THREADS, "CONFIG_FUSED_GRID_RESIDENT_THREADS",
                       snn_imax(SNN_GR_STATE_BYTES, SMEM_BYTES), SNN_GR_SMEM_MAX))
        return false;
    if (resident < 0) {
        int dev, sms, coop;
        CUDA_CHECK(cudaGetDevice(&dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
        CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
        /* blocks of `smem` bytes the GPU holds at once */
        auto held = [&](const void *kernel, int smem) {
            if (!coop || smem > optin)
                return 0;
            int per_sm;
            CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
            CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, smem));
            return per_sm * sms;
        };
        const int at_staged = STAGEABLE ? held((const void *)train_kernel<true>, smem_bytes(true)) : 0;
        staged = at_staged >= GRID;
        resident = staged ? at_staged : held((const void *)train_kernel<false>, smem_bytes(false));
    }
    if (SMEM_BYTES > optin)
        snprintf(
            why, len,
            "a block's share of the model, %d KB of shared memory, exceeds the %d KB this GPU gives a block",
            (SMEM_BYTES + 1023) / 1024, optin / 1024);
    else if (resident < GRID)
        snprintf(why, len, "this GPU holds %d of its %d blocks at once (%d KB of shared memory each)",
                 resident, GRID, (SMEM_BYTES + 1023) / 1024);
    return resident >= GRID;
}

static void train(const snn_fused_net &net, int first, int last)
{
    if ((uintptr_t)net.gr_ws % 256)
        snn_die("grid-resident kernel: the workspace is not 256-byte aligned (internal error)");
    snn_fused_net n = net;
    void *args[] = {&n, &first, &last};
    CUDA_CHECK(cudaLaunchCooperativeKernel(
        staged ? (const void *)train_kernel<true> : (const void *)train_kernel<false>, dim3(GRID),
        dim3(THREADS), args, smem_bytes(staged), snn_stream()));
    CUDA_CHECK_LAUNCH();
}

static void describe(char *buf, int len)
{
    fused_describe_resident(buf, len, "", GRID, THREADS, smem_bytes(staged), UNITS,
                            2 * LAYERS - 2 - TAGGED + (SPLIT > 1), "grid barrier");
    const int at = (int)strlen(buf);
    if (SPLIT > 1 && at < len)
        snprintf(buf + at, len - at,
                 ", each block's units shared by %d blocks, a slice of layer 0's inputs each", SPLIT);
    const int end = (int)strlen(buf);
    if (staged && end < len)
        snprintf(buf + end, len - end, ", the batch's %s staged a step ahead",
                 SPLIT > 1 ? "slices" : "images");
}

} // namespace resident_grid

const FusedKernel fused_grid_resident = {"grid-resident", resident_grid::fits, resident_grid::train,
                                         resident_grid::describe};
