/* The Hopper GEMM's shape (CONFIG_GEMM_WGMMA_*), derived sizes, and the checks Kconfig cannot express;
 * each message names the symbols to change (make menuconfig, "Kernels"). The kernel: gemm/wgmma.cuh. */
#ifndef SNN_GEMM_WGMMA_SHAPE_CUH
#define SNN_GEMM_WGMMA_SHAPE_CUH

#include "arch/cuda/target.h"
#include "kernels/cuda/twin.cuh"
#include "kernels/optim.h"
#include "snn_config.h"

/* The operands' element: the 16-bit twins (FP16 or BF16, as CONFIG_PRECISION_* says), or for TF32 the FP32
 * tensors themselves. wgmma reads TF32 from the FP32 words and ignores their 13 low mantissa bits:
 * truncation, where the mma.sync kernel rounds to nearest (cvt.rna); and TF32 has no transposed operands:
 * only GEMMs whose operands are both K-major run on wgmma in TF32 (the forward role). */
#if defined(CONFIG_PRECISION_TF32)
typedef float GemmWgmmaElem;
#define GEMM_WG_K_MAJOR_ONLY 1
#else
typedef SnnTwin GemmWgmmaElem;
#define GEMM_WG_K_MAJOR_ONLY 0
#endif

#define GEMM_WG_ROW_BYTES 128 /* one swizzle row: a tile's k depth per stage */
#define GEMM_WG_BK (GEMM_WG_ROW_BYTES / (int)sizeof(GemmWgmmaElem)) /* 64 16-bit elements, 32 FP32 */
#define GEMM_WG_KSTEP (32 / (int)sizeof(GemmWgmmaElem)) /* k of one instruction: 32 bytes, k16 or k8 (TF32) */
#define GEMM_WG_GROUP CONFIG_GEMM_WGMMA_RASTER_GROUP
#ifdef CONFIG_GEMM_WGMMA_PERSISTENT
#define GEMM_WG_PERSISTENT 1 /* a grid of as many blocks as the GPU holds, each walking tiles */
#else
#define GEMM_WG_PERSISTENT 0 /* a block per tile */
#endif
#define GEMM_WG_BLOCK64_BYTES (64 * GEMM_WG_ROW_BYTES) /* 64 rows of a tile */
/* The epilogue regroups each consumer warp's 16 rows of accumulators 32 columns at a time through a staging
 * tile in shared memory, rows padded to 40 floats: the fragments' 8-byte writes (lanes 4g + t at row g,
 * column 2t) and the 16-byte reads of a row's quads both hit distinct banks. */
#define GEMM_WG_EPI_COLS 32
#define GEMM_WG_EPI_STRIDE 40
#define GEMM_WG_EPI_BYTES (16 * GEMM_WG_EPI_STRIDE * 4)
#define GEMM_WG_EPI_STAGES CONFIG_GEMM_WGMMA_EPI_STAGES /* epilogue input batches copied ahead (gemm/wgmma.cuh) */
/* Registers per thread after setmaxnreg: the producer keeps few, the consumers take what the SM has left
 * (multiples of 8, at most 256). */
#define GEMM_WG_PRODUCER_REGS 40

/* Dynamic shared memory of a block: the ring of `stages` k tiles of (bm + bn) rows (bn with an A panel),
 * the panel of `panel` k tiles of bm rows, each consumer warp's epilogue staging tile, and up to 1023 bytes
 * to align the ring; whether it fits beside the ring's two barriers per stage, the ping-pong schedule's two
 * and the panel's two (static). */
constexpr int gemm_wgmma_smem_bytes(int bm, int bn, int consumers, int stages, int panel = 0)
{
    return stages * (panel > 0 ? bn : bm + bn) * GEMM_WG_ROW_BYTES + panel * bm * GEMM_WG_ROW_BYTES +
           4 * consumers * GEMM_WG_EPI_BYTES + 1024;
}
constexpr bool gemm_wgmma_smem_fits_bytes(int dynamic_bytes, int stages)
{
    return dynamic_bytes + 2 * 8 * (stages + 2) <= SNN_ARCH_MAX_SMEM_PER_BLOCK;
}
constexpr bool gemm_wgmma_smem_fits(int bm, int bn, int consumers, int stages, int panel = 0)
{
    return gemm_wgmma_smem_fits_bytes(gemm_wgmma_smem_bytes(bm, bn, consumers, stages, panel), stages);
}

/* One block shape: tile BM x BN, CONSUMERS warpgroups issuing wgmma, a ring of STAGES k tiles, the
 * consumers sharing each tile (cooperative: BM / CONSUMERS rows each) or, with PINGPONG, taking alternate
 * tiles whole, so that one's epilogue runs while the other's wgmmas do (gemm/wgmma.cuh); with PANEL k tiles,
 * a block's tiles are a run along N whose A rows stay in shared memory (K of at most PANEL k tiles), and the
 * ring carries B only; and what follows from it. */
template <int BM_, int BN_, int CONSUMERS_, int STAGES_, bool PINGPONG_ = false, int CHAINS_ = 1,
          int PANEL_ = 0>
struct GemmWgmmaTile {
    static constexpr int BM = BM_, BN = BN_, CONSUMERS = CONSUMERS_, STAGES = STAGES_;
    static constexpr bool PINGPONG = PINGPONG_;
    /* Accumulator sets a consumer adds its k tiles into in turn, summed at the end (gemm/wgmma.cuh): the
     * wgmmas of one set wait on each other's results, those of two sets do not. */
    static constexpr int CHAINS = CHAINS_;
    static constexpr int PANEL = PANEL_; /* k tiles of A kept across tiles; 0: A through the ring */
    static constexpr int THREADS = 128 * (1 + CONSUMERS);
    static constexpr int WM = PINGPONG ? BM : BM / CONSUMERS; /* rows per consumer warpgroup */
    static constexpr int MTILES = WM / 64;    /* m64 instructions per k step */
    static constexpr int ACC = BN / 2;        /* FP32 accumulators per thread per m64 */
    static constexpr int A_BYTES = BM * GEMM_WG_ROW_BYTES; /* A's rows of one k tile */
    static constexpr int RING_A_BYTES = PANEL > 0 ? 0 : A_BYTES;
    static constexpr int STAGE_BYTES = RING_A_BYTES + BN * GEMM_WG_ROW_BYTES;
    static constexpr int RING_BYTES = STAGES * STAGE_BYTES;
    static constexpr int PANEL_BYTES = PANEL * A_BYTES;
    static constexpr int SMEM_BYTES = gemm_wgmma_smem_bytes(BM, BN, CONSUMERS, STAGES, PANEL);
    static constexpr int CONSUMER_REGS_FIT = (SNN_ARCH_REGS_PER_SM - 128 * GEMM_WG_PRODUCER_REGS) / (128 * CONSUMERS) / 8 * 8;
    static constexpr int CONSUMER_REGS = CONSUMER_REGS_FIT < 256 ? CONSUMER_REGS_FIT : 256;

    static_assert(WM % 64 == 0 && WM > 0,
                  "CONFIG_GEMM_WGMMA_BLOCK_M must be a multiple of 64 x CONFIG_GEMM_WGMMA_CONSUMERS (of 64 with "
                  "CONFIG_GEMM_WGMMA_PINGPONG): each consumer warpgroup issues m64 instructions");
    static_assert(!PINGPONG || CONSUMERS == 2,
                  "CONFIG_GEMM_WGMMA_PINGPONG needs CONFIG_GEMM_WGMMA_CONSUMERS=2: two consumers take turns");
    static_assert(
        STAGES >= 2,
        "a wgmma ring of one stage deadlocks (a consumer hands a stage back after it has the next): "
        "CONFIG_GEMM_WGMMA_STAGES, and CONFIG_GEMM_WGMMA_SMALL_WGRAD_STAGES where not 0, must be 2 or "
        "more");
    static_assert(BN % 64 == 0 && BN <= 256,
                  "CONFIG_GEMM_WGMMA_BLOCK_N and _SMALL_BLOCK_N must be 64, 128, 192 or 256 (the N of wgmma "
                  "m64nNk16, in 64-wide TMA boxes)");
    static_assert(BM <= 256, "CONFIG_GEMM_WGMMA_BLOCK_M: a TMA box has at most 256 rows");
    static_assert(
        CHAINS >= 1 && CHAINS * MTILES * ACC + 40 <= CONSUMER_REGS,
        "wgmma GEMM accumulators do not fit in a consumer's registers: (CONFIG_GEMM_WGMMA_BLOCK_M / "
        "CONFIG_GEMM_WGMMA_CONSUMERS / 64; with _PINGPONG, BLOCK_M / 64) x CONFIG_GEMM_WGMMA_BLOCK_N / 2 "
        "FP32 values per thread, plus 40, exceed the registers a consumer warpgroup gets: lower BLOCK_N or "
        "BLOCK_M, or add a consumer; the small tile holds CONFIG_GEMM_WGMMA_SMALL_CHAINS x "
        "CONFIG_GEMM_WGMMA_SMALL_BLOCK_N / 2 of at most 216: lower either");
    static_assert(PANEL == 0 || (!PINGPONG && PANEL % CHAINS == 0),
                  "a wgmma A panel is for a cooperative block, and holds whole sets of k tiles");
    static_assert(
        gemm_wgmma_smem_fits(BM, BN, CONSUMERS, STAGES, PANEL),
        "wgmma GEMM shared memory: CONFIG_GEMM_WGMMA_STAGES x (CONFIG_GEMM_WGMMA_BLOCK_M + "
        "CONFIG_GEMM_WGMMA_BLOCK_N) x 128 bytes, plus 2.5 KB of epilogue staging per consumer warp, "
        "1 KB of alignment and any A panel (k tiles x BLOCK_M x 128 bytes), exceeds the per-block limit "
        "(arch/sm90/limits.h): lower the stages or the tile");
};

/* The epilogue input copies (gemm/wgmma.cuh): a consumer warp's slot for one batch, 16 rows x
 * GEMM_WG_EPI_COLS floats of each of `arrays` inputs, and what one batch of them takes in a block. */
constexpr int gemm_wgmma_inputs_slot_floats(int arrays)
{
    return arrays * 16 * GEMM_WG_EPI_COLS;
}
constexpr int gemm_wgmma_inputs_stage_bytes(int consumers, int arrays)
{
    return 4 * consumers * gemm_wgmma_inputs_slot_floats(arrays) * 4;
}
/* What the copies of the SGD or AdamW update's inputs (the weights and optimizer state) take in a weight
 * gradient's block, GEMM_WG_EPI_STAGES batches ahead. */
constexpr int gemm_wgmma_update_copies_bytes(int consumers)
{
    return GEMM_WG_EPI_STAGES * gemm_wgmma_inputs_stage_bytes(consumers, 1 + SNN_OPTIM_MOMENTS);
}

/* The k tiles a block walks for K: whole accumulator sets of them (gemm/wgmma.cuh). */
__host__ __device__ constexpr int gemm_wgmma_ktiles_of(int K, int chains)
{
    return ((K + GEMM_WG_BK - 1) / GEMM_WG_BK + chains - 1) / chains * chains;
}

/* The most stages (at most 8) of a block of BM x BN and `consumers` that fit in shared memory beside
 * `extra_bytes`. */
constexpr int gemm_wgmma_stages_fit(int bm, int bn, int consumers = 1, int extra_bytes = 0)
{
    int s = 8;
    while (s > 1 && !gemm_wgmma_smem_fits_bytes(gemm_wgmma_smem_bytes(bm, bn, consumers, s) + extra_bytes, s))
        s--;
    return s;
}

/* The config's block (CONFIG_GEMM_WGMMA_*), and the small block for GEMMs that would not fill the GPU with it
 * (the batch-sized ones): 64 rows, one consumer, CONFIG_GEMM_WGMMA_SMALL_BLOCK_N columns, as many stages as
 * fit. */
#ifdef CONFIG_GEMM_WGMMA_PINGPONG
#define GEMM_WG_PINGPONG true
#else
#define GEMM_WG_PINGPONG false
#endif
typedef GemmWgmmaTile<CONFIG_GEMM_WGMMA_BLOCK_M, CONFIG_GEMM_WGMMA_BLOCK_N, CONFIG_GEMM_WGMMA_CONSUMERS,
                      CONFIG_GEMM_WGMMA_STAGES, GEMM_WG_PINGPONG>
    GemmWgmmaConfigTile;
template <int STAGES, int PANEL = 0>
using GemmWgmmaSmallTileOf = GemmWgmmaTile<64, CONFIG_GEMM_WGMMA_SMALL_BLOCK_N, 1, STAGES, false,
                                           CONFIG_GEMM_WGMMA_SMALL_CHAINS, PANEL>;
typedef GemmWgmmaSmallTileOf<gemm_wgmma_stages_fit(64, CONFIG_GEMM_WGMMA_SMALL_BLOCK_N)> GemmWgmmaSmallTile;
/* The small tile when it runs a weight gradient: its ring CONFIG_GEMM_WGMMA_SMALL_WGRAD_STAGES k tiles where
 * that is fewer than fit (fewer operand loads in flight beside the update's traffic), else every GEMM's. */
constexpr int gemm_wgmma_small_wgrad_stages()
{
    constexpr int fit = GemmWgmmaSmallTile::STAGES, want = CONFIG_GEMM_WGMMA_SMALL_WGRAD_STAGES;
    return want > 0 && want < fit ? want : fit;
}
typedef GemmWgmmaSmallTileOf<gemm_wgmma_small_wgrad_stages()> GemmWgmmaSmallWgradTile;
/* That tile with an A panel (CONFIG_GEMM_WGMMA_SMALL_WGRAD_PANEL) of the k tiles of a GPU's share of the
 * batch (the weight gradient's k), in whole sets, or as many as fit beside its ring and GEMM_WG_EPI_STAGES
 * batches of its update's input copies: a larger panel would only take shared memory from L1 (docs/PERF.md
 * v61). A weight gradient whose K it does not hold runs on the tile above. */
constexpr int gemm_wgmma_small_panel_ktiles()
{
    constexpr int stages = GemmWgmmaSmallWgradTile::STAGES, chains = CONFIG_GEMM_WGMMA_SMALL_CHAINS;
    int p = gemm_wgmma_ktiles_of(SNN_LOCAL_BATCH, chains);
    while (p > 0 && !gemm_wgmma_smem_fits_bytes(
                        gemm_wgmma_smem_bytes(64, CONFIG_GEMM_WGMMA_SMALL_BLOCK_N, 1, stages, p) +
                            gemm_wgmma_update_copies_bytes(1),
                        stages))
        p -= chains;
    return p;
}
#ifdef CONFIG_GEMM_WGMMA_SMALL_WGRAD_PANEL
typedef GemmWgmmaSmallTileOf<gemm_wgmma_small_wgrad_stages(), gemm_wgmma_small_panel_ktiles()>
    GemmWgmmaSmallPanelTile;
#endif
/* The weight gradient's block: the config's, or the 128 x 128 ping-pong one (CONFIG_GEMM_WGMMA_WGRAD_PINGPONG)
 * with as deep a ring as fits beside the copies of its update's inputs (the weights and optimizer state): its
 * k loop reads operands that the update's traffic keeps waiting in HBM. */
#ifdef CONFIG_GEMM_WGMMA_WGRAD_PINGPONG
typedef GemmWgmmaTile<128, 128, 2, gemm_wgmma_stages_fit(128, 128, 2, gemm_wgmma_update_copies_bytes(2)),
                      true>
    GemmWgmmaWgradTile;
#else
typedef GemmWgmmaConfigTile GemmWgmmaWgradTile;
#endif

#endif
