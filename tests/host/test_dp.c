/* Data parallelism's host parts (arch/dp.h): the buckets a layer's gradients are all-reduced in, each
 * launcher's variables read into a place, the refusals of a malformed or mismatched one, the rendezvous file
 * (written once, read back, a stale or foreign file refused, a missing one waited for and then refused), and
 * a run that starts its own ranks: their exit statuses, a failing rank ending the run; NCCL's environment.
 * TAP lines on stdout. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "arch/dp.h"
#include "tests/test_util.h"

/* The environment a case reads: NAME=VALUE pairs. */
static const char *const *vars;

static const char *lookup(const char *name)
{
    for (int i = 0; vars && vars[i]; i++) {
        size_t n = strlen(name);
        if (!strncmp(vars[i], name, n) && vars[i][n] == '=')
            return vars[i] + n + 1;
    }
    return NULL;
}

static void report(const char *name, const char *why)
{
    if (why[0])
        printf("not ok - dp: %s: %s\n", name, why);
    else
        printf("ok - dp: %s\n", name);
}

/* The place of env, against the expected one (launcher NULL: expect a refusal whose text holds `says`). */
static void check_place(const char *name, const char *const *env, int rank, int world, int local,
                        const char *launcher, const char *says)
{
    char why[256] = "", err[512] = "";
    snn_dp_place p;
    vars = env;
    int rc = snn_dp_place_read(&p, lookup, err, sizeof(err));
    if (!launcher) {
        if (rc == 0)
            set_why(why, "accepted (rank %d of %d)", p.rank, p.world);
        else if (!strstr(err, says))
            set_why(why, "refused saying \"%s\", not \"%s\"", err, says);
    } else if (rc != 0) {
        set_why(why, "refused: %s", err);
    } else if (p.rank != rank || p.world != world || p.local_rank != local || strcmp(p.launcher, launcher)) {
        set_why(why, "rank %d of %d (local %d) by %s; expected %d of %d (local %d) by %s", p.rank, p.world,
                p.local_rank, p.launcher, rank, world, local, launcher);
    }
    report(name, why);
}

static void check_places(void)
{
    const char *none[] = {"HOME=/root", NULL};
    const char *ours[] = {"SNN_DP_RANK=1", "SNN_DP_SIZE=4", "SNN_DP_LOCAL_RANK=1", NULL};
    const char *ompi[] = {"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_RANK=1",
                          "SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_LOCALID=0", NULL};
    const char *pmi[] = {"PMI_RANK=2", "PMI_SIZE=3", "MPI_LOCALRANKID=0", NULL};
    const char *slurm[] = {"SLURM_PROCID=5", "SLURM_NTASKS=8", "SLURM_STEP_NUM_TASKS=8", "SLURM_LOCALID=1", NULL};
    const char *sbatch[] = {"SLURM_JOB_ID=77", "SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_LOCALID=0", NULL};
    const char *no_rank[] = {"OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=0", NULL};
    const char *bad_number[] = {"PMI_RANK=1", "PMI_SIZE=2x", "MPI_LOCALRANKID=1", NULL};
    const char *outside[] = {"SLURM_PROCID=4", "SLURM_STEP_NUM_TASKS=4", "SLURM_LOCALID=0", NULL};
    check_place("no launcher: rank 0 of 1, alone", none, 0, 1, 0, "alone", NULL);
    check_place("SNN_DP_* variables", ours, 1, 4, 1, "SNN_DP", NULL);
    check_place("mpirun's, before Slurm's of the allocation around it", ompi, 3, 4, 1, "mpirun", NULL);
    check_place("Hydra's PMI_* variables", pmi, 2, 3, 0, "mpiexec (PMI)", NULL);
    check_place("srun's SLURM_* variables (a step's)", slurm, 5, 8, 1, "srun", NULL);
    check_place("an sbatch script itself (no srun step): alone", sbatch, 0, 1, 0, "alone", NULL);
    check_place("a world without a rank is refused", no_rank, 0, 0, 0, NULL, "OMPI_COMM_WORLD_RANK is not set");
    check_place("a world that is not a number is refused", bad_number, 0, 0, 0, NULL, "PMI_SIZE=2x is not a count");
    check_place("a rank outside its world is refused", outside, 0, 0, 0, NULL, "rank 4 (on its host 0) of 4");

    char why[256] = "", err[512] = "";
    snn_dp_place four = {1, 4, 1, "mpirun"}, alone = {0, 1, 0, "alone"};
    if (snn_dp_place_check(&four, 4, err, sizeof(err)) || snn_dp_place_check(&alone, 4, err, sizeof(err)))
        set_why(why, "refused a world of 4 or one started alone: %s", err);
    else if (!snn_dp_place_check(&four, 2, err, sizeof(err)))
        set_why(why, "a build of 2 GPUs accepted 4 processes");
    else if (!strstr(err, "mpirun started 4 processes, but this build trains on 2 GPUs"))
        set_why(why, "the refusal says \"%s\"", err);
    report("a launch of another world size than the build's is refused, naming both", why);
}

static void check_rendezvous(void)
{
    char dir[] = "/tmp/snn-test-dp-XXXXXX", path[128], why[256] = "", err[512] = "";
    if (!mkdtemp(dir)) {
        printf("not ok - dp: rendezvous: cannot create a temporary directory\n");
        return;
    }
    snprintf(path, sizeof(path), "%s/id", dir);
    unsigned char id[128], back[128];
    for (int i = 0; i < 128; i++)
        id[i] = (unsigned char)rng_next();
    if (snn_dp_rendezvous_write(path, id, sizeof(id), err, sizeof(err)))
        set_why(why, "write: %s", err);
    else if (snn_dp_rendezvous_read(path, back, sizeof(back), 1.0, err, sizeof(err)))
        set_why(why, "read: %s", err);
    else if (memcmp(id, back, sizeof(id)))
        set_why(why, "the id read back differs");
    report("rendezvous: rank 0's id read back by the others", why);

    why[0] = 0;
    if (!snn_dp_rendezvous_write(path, id, sizeof(id), err, sizeof(err)))
        set_why(why, "a second write over the first succeeded");
    else if (!strstr(err, "exists already"))
        set_why(why, "the refusal says \"%s\"", err);
    report("rendezvous: an existing file (an earlier run's) is refused, not overwritten", why);

    why[0] = 0;
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs("something else\n", f);
        fclose(f);
    }
    if (!snn_dp_rendezvous_read(path, back, sizeof(back), 1.0, err, sizeof(err)))
        set_why(why, "a foreign file was read as an id");
    else if (!strstr(err, "is not a rendezvous file"))
        set_why(why, "the refusal says \"%s\"", err);
    report("rendezvous: a file that is not one is refused", why);

    why[0] = 0;
    unlink(path);
    if (!snn_dp_rendezvous_read(path, back, sizeof(back), 0.2, err, sizeof(err)))
        set_why(why, "read a file that does not exist");
    else if (!strstr(err, "waited 0 s for rank 0"))
        set_why(why, "the refusal says \"%s\"", err);
    report("rendezvous: a file that never comes is waited for, then refused", why);

    /* A file written while a rank waits is read. */
    why[0] = 0;
    fflush(stdout); /* the child's copy of the buffer is not printed again */
    pid_t pid = fork();
    if (pid == 0) {
        const struct timespec nap = {0, 200 * 1000 * 1000};
        nanosleep(&nap, NULL);
        _exit(snn_dp_rendezvous_write(path, id, sizeof(id), err, sizeof(err)) ? 1 : 0);
    }
    if (snn_dp_rendezvous_read(path, back, sizeof(back), 10.0, err, sizeof(err)))
        set_why(why, "read: %s", err);
    else if (memcmp(id, back, sizeof(id)))
        set_why(why, "the id read back differs");
    int st = 0;
    waitpid(pid, &st, 0);
    report("rendezvous: a rank that starts first waits for rank 0's file", why);
    unlink(path);
    rmdir(dir);
}

/* A run started alone with `world` ranks, rank `fails` exiting with status 7 (-1: none); in a process of its
 * own, whose exit status is returned. Rank 0 waits as the app does at its end. */
static int spawned_run(int world, int fails)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (fails >= 0 && !freopen("/dev/null", "w", stderr)) /* rank 0's note of the failure */
            _exit(92);
        const char *rendezvous = NULL;
        snn_dp_place p = snn_dp_spawn(world, &rendezvous);
        if (!rendezvous || !strstr(rendezvous, "/snn-dp-"))
            _exit(90);
        if (p.world != world || p.local_rank != p.rank)
            _exit(91);
        if (p.rank == fails)
            _exit(7);
        if (p.rank > 0)
            _exit(0);
        if (fails >= 0)
            sleep(10); /* the failure ends rank 0 before this does */
        exit(snn_dp_spawned_wait()); /* exit: the rendezvous directory removed, as at the app's end */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void check_spawn(void)
{
    char why[256] = "";
    int rc = spawned_run(4, -1);
    if (rc != 0)
        set_why(why, "exit status %d", rc);
    report("a run started alone starts ranks 1..3 itself; all succeed: status 0", why);
    why[0] = 0;
    rc = spawned_run(3, 2);
    if (rc != 7)
        set_why(why, "exit status %d, expected rank 2's 7", rc);
    report("a rank that fails ends the run at once with its status (rank 0 does not wait for ever)", why);
}

/* NCCL's environment: NVLink multicast off whatever was set, a replaced value named. */
static const char *nvls(void)
{
    const char *v = getenv("NCCL_NVLS_ENABLE");
    return v ? v : "(unset)";
}

static void check_nccl_env(void)
{
    char why[256] = "", note[160] = "";
    unsetenv("NCCL_NVLS_ENABLE");
    if (snn_dp_nccl_env(note, sizeof(note)) != 0 || strcmp(nvls(), "0"))
        set_why(why, "unset: NCCL_NVLS_ENABLE=%s afterwards", nvls());
    if (snn_dp_nccl_env(note, sizeof(note)) != 0)
        set_why(why, "already 0: reported as replaced (%s)", note);
    setenv("NCCL_NVLS_ENABLE", "1", 1);
    if (snn_dp_nccl_env(note, sizeof(note)) != 1 || strcmp(nvls(), "0") || !strstr(note, "NCCL_NVLS_ENABLE=1"))
        set_why(why, "1: NCCL_NVLS_ENABLE=%s afterwards, note '%s'", nvls(), note);
    report("NVLink multicast off for NCCL, set or not, a replaced value named", why);
}

/* The buckets of a layer: whole 64-row groups of about the floats asked for (at least 64 rows), the last
 * taking the rest and the biases; together they cover the layer's gradients once, in order. */
static void check_buckets(void)
{
    static const struct {
        long out, in, floats;
        int buckets, last_rows;
    } cases[] = {
        {512, 784, 1L << 18, 2, 192},        /* the GPU suite's layer 0 at DP_BUCKET_MB=1: 320 + 192 rows */
        {10, 512, 1L << 18, 1, 10},          /* the output layer: one bucket */
        {16384, 16384, 128L << 18, 8, 2048}, /* 784-16384x2's hidden layer at the default 128 MiB */
        {100, 1L << 20, 1L << 18, 2, 36},    /* a row over the bucket: still 64 rows */
        {4096, 4096, 128L << 18, 1, 4096},   /* a layer under one bucket */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const long out = cases[i].out, in = cases[i].in, rows = snn_dp_bucket_rows(in, cases[i].floats);
        long end = 0; /* where the buckets so far end, in floats from the layer's first gradient */
        int buckets = 0, n = 0;
        char why[256] = "";
        if (rows % 64 || rows < 64)
            set_why(why, "%ld rows a bucket", rows);
        for (long r0 = 0; r0 < out && !*why; r0 += rows, buckets++) {
            n = snn_dp_bucket_n(out, r0, rows);
            const long f = snn_dp_bucket_floats(out, in, r0, rows);
            if (r0 * in != end || n < 1 || (r0 + n < out && n != rows))
                set_why(why, "the bucket from row %ld: %d rows from float %ld, the last ended at %ld", r0, n,
                        r0 * in, end);
            end = r0 * in + f;
        }
        if (!*why && (end != out * in + out || buckets != cases[i].buckets || n != cases[i].last_rows))
            set_why(why, "%d buckets, the last of %d rows, ending at float %ld", buckets, n, end);
        char name[160];
        snprintf(name, sizeof(name),
                 "gradient buckets of a %ldx%ld layer at %ld floats: %d, the last of %d rows, "
                 "every gradient once",
                 out, in, cases[i].floats, cases[i].buckets, cases[i].last_rows);
        report(name, why);
    }
}

int main(void)
{
    check_buckets();
    check_nccl_env();
    check_places();
    check_rendezvous();
    check_spawn();
    return 0;
}
