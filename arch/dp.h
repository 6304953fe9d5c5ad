/* Data parallelism's processes (arch/cuda/Kconfig DP): where this process stands among the run's (its
 * rank, the world, its rank on its host) as the launcher says, the file through which the ranks meet, the
 * processes a run started alone starts itself, and the buckets a layer's gradients are all-reduced in.
 * Plain C on any target: the host tests drive it. The collectives over NCCL are arch/cuda/dp.cu's. */
#ifndef SNN_DP_H
#define SNN_DP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int rank, world, local_rank;
    const char *launcher; /* whose variables said so: "SNN_DP", "mpirun", "mpiexec (PMI)", "srun", or
                           * "alone" (none: rank 0 of 1) */
} snn_dp_place;

/* This process's place from the launcher's environment, read through get (getenv, or a test's table):
 * SNN_DP_RANK/_SIZE/_LOCAL_RANK, then Open MPI's OMPI_COMM_WORLD_*, then Hydra's PMI_RANK/PMI_SIZE/
 * MPI_LOCALRANKID, then Slurm's SLURM_PROCID/SLURM_STEP_NUM_TASKS/SLURM_LOCALID (an srun step's: an sbatch
 * script alone runs as started alone), the first whose world is set.
 * Returns 0, or -1 with one line in err (a variable missing or not a number, a rank outside the world). */
int snn_dp_place_read(snn_dp_place *p, const char *(*get)(const char *name), char *err, size_t len);

/* 0 where a place of `world` processes may train a build of `want`; else -1 with the reason in err. */
int snn_dp_place_check(const snn_dp_place *p, int want, char *err, size_t len);

/* The rendezvous: rank 0 writes the NCCL id (n bytes) to path, atomically (a temporary file renamed),
 * refusing a path that exists (a stale file would send the others to an old run); the others wait for it
 * up to timeout_s, polling. 0, or -1 with the reason in err. */
int snn_dp_rendezvous_write(const char *path, const void *id, size_t n, char *err, size_t len);
int snn_dp_rendezvous_read(const char *path, void *id, size_t n, double timeout_s, char *err, size_t len);

/* A run started alone: forks world - 1 copies of this process, ranks 1 .. world - 1 on the host's GPUs
 * 1 .. world - 1, which meet rank 0 (this process) through a file in a fresh temporary directory; each dies
 * with rank 0. In rank 0, a copy that fails
 * ends the run: its status is rank 0's exit status, the other copies are killed. Returns this process's
 * place and sets *rendezvous to the file. */
snn_dp_place snn_dp_spawn(int world, const char **rendezvous);
/* Rank 0 of a spawned run: waits for the copies; 0 when all succeeded, else the first failure's status.
 * Elsewhere 0 at once. */
int snn_dp_spawned_wait(void);
/* What rank 0 does (async-signal-safe) before it ends a run for a rank that failed: the app's temporaries. */
void snn_dp_on_abort(void (*fn)(void));

/* The buckets a layer's weight gradient ([out][in] weights, then out biases) is all-reduced in: output rows
 * in whole 64-row groups (so every range keeps TMA's alignment), as many as fill about `floats` gradients,
 * at least 64; the last bucket takes what is left, and the biases. snn_dp_bucket_rows gives the rows a
 * bucket; the bucket from row r0 holds snn_dp_bucket_n rows and all-reduces snn_dp_bucket_floats floats
 * from the layer's first gradient + r0 x in. */
long snn_dp_bucket_rows(long in, long floats);
int snn_dp_bucket_n(long out, long r0, long rows);
long snn_dp_bucket_floats(long out, long in, long r0, long rows);

/* NCCL's environment, set before this process's first NCCL call: NVLink multicast (NCCL_NVLS_ENABLE) off,
 * whatever the environment said. The all-reduces here do not need it, and on a shared host a program using
 * it can take every GPU out of service for days. Returns 1 with a note in note where it replaced another
 * value, else 0. */
int snn_dp_nccl_env(char *note, size_t len);

/* This process's place once the app has set it (snn_dp_set), rank 0 of 1 before. */
const snn_dp_place *snn_dp_self(void);
void snn_dp_set(const snn_dp_place *p);

#ifdef __cplusplus
}
#endif
#endif
