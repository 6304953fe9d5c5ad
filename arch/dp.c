/* Data parallelism's processes (arch/dp.h): the launcher's variables, the rendezvous file, and the copies
 * a run started alone forks. */
#include "arch/dp.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "snn_check.h"

#define SNN_DP_MAX_WORLD 64 /* arch/cuda/Kconfig's range of DP_WORLD_SIZE */

/* Each launcher's variables: rank, world, rank on the host. */
static const struct {
    const char *name, *rank, *world, *local;
} launchers[] = {
    {"SNN_DP", "SNN_DP_RANK", "SNN_DP_SIZE", "SNN_DP_LOCAL_RANK"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"mpiexec (PMI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"srun", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID"}, /* a step's: not an sbatch script's */
};

static int read_int(const char *(*get)(const char *), const char *name, int *v, char *err, size_t len)
{
    const char *s = get(name);
    if (!s || !*s) {
        snprintf(err, len, "%s is not set", name);
        return -1;
    }
    char *end = NULL;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || *end || x < 0 || x > 1000000) {
        snprintf(err, len, "%s=%s is not a count", name, s);
        return -1;
    }
    *v = (int)x;
    return 0;
}

int snn_dp_place_read(snn_dp_place *p, const char *(*get)(const char *name), char *err, size_t len)
{
    *p = (snn_dp_place){0, 1, 0, "alone"};
    for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
        const char *world = get(launchers[i].world);
        if (!world || !*world)
            continue;
        char why[160];
        if (read_int(get, launchers[i].rank, &p->rank, why, sizeof(why)) ||
            read_int(get, launchers[i].world, &p->world, why, sizeof(why)) ||
            read_int(get, launchers[i].local, &p->local_rank, why, sizeof(why))) {
            snprintf(err, len, "the launcher's variables (%s's): %s", launchers[i].name, why);
            return -1;
        }
        p->launcher = launchers[i].name;
        if (p->world < 1 || p->rank >= p->world || p->local_rank >= p->world) {
            snprintf(err, len, "%s's variables place this process at rank %d (on its host %d) of %d", p->launcher,
                     p->rank, p->local_rank, p->world);
            return -1;
        }
        return 0;
    }
    return 0;
}

int snn_dp_place_check(const snn_dp_place *p, int want, char *err, size_t len)
{
    if (p->world == want || p->world == 1) /* alone: the app starts the others itself */
        return 0;
    snprintf(err, len,
             "%s started %d processes, but this build trains on %d GPUs (CONFIG_DP_WORLD_SIZE), one process "
             "each: start %d (mpirun -np %d, srun -n %d), or set CONFIG_DP_WORLD_SIZE=%d with make menuconfig",
             p->launcher, p->world, want, want, want, want, p->world);
    return -1;
}

/* The rendezvous file: a line naming it, then the id. */
static const char magic[] = "staticnn NCCL id v1\n";

int snn_dp_rendezvous_write(const char *path, const void *id, size_t n, char *err, size_t len)
{
    if (access(path, F_OK) == 0) {
        snprintf(err, len,
                 "the rendezvous file %s exists already (an earlier run's?): remove it, or name a fresh one in "
                 "SNN_DP_RENDEZVOUS",
                 path);
        return -1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int ok = f && fwrite(magic, 1, sizeof(magic) - 1, f) == sizeof(magic) - 1 && fwrite(id, 1, n, f) == n;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok || link(tmp, path) != 0) { /* link, not rename: a file that appeared meanwhile stays and fails it */
        snprintf(err, len, "cannot write the rendezvous file %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    unlink(tmp);
    return 0;
}

int snn_dp_rendezvous_read(const char *path, void *id, size_t n, double timeout_s, char *err, size_t len)
{
    const struct timespec nap = {0, 20 * 1000 * 1000};
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f) {
            char head[sizeof(magic) - 1], extra;
            int ok = fread(head, 1, sizeof(head), f) == sizeof(head) && !memcmp(head, magic, sizeof(head)) &&
                     fread(id, 1, n, f) == n && fread(&extra, 1, 1, f) == 0;
            fclose(f);
            if (!ok) {
                snprintf(err, len, "%s is not a rendezvous file of this program (or of another version)", path);
                return -1;
            }
            return 0;
        }
        if (errno != ENOENT) {
            snprintf(err, len, "cannot read the rendezvous file %s: %s", path, strerror(errno));
            return -1;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec + (now.tv_nsec - t0.tv_nsec) / 1e9 > timeout_s) {
            snprintf(err, len, "waited %.0f s for rank 0 to write the rendezvous file %s: is rank 0 running, and "
                     "does every rank see that path?", timeout_s, path);
            return -1;
        }
        nanosleep(&nap, NULL);
    }
}

long snn_dp_bucket_rows(long in, long floats)
{
    const long rows = floats / in / 64 * 64;
    return rows < 64 ? 64 : rows;
}

int snn_dp_bucket_n(long out, long r0, long rows) { return (int)(out - r0 < rows ? out - r0 : rows); }

long snn_dp_bucket_floats(long out, long in, long r0, long rows)
{
    const long n = snn_dp_bucket_n(out, r0, rows);
    return n * in + (r0 + n == out ? out : 0);
}

int snn_dp_nccl_env(char *note, size_t len)
{
    const char *was = getenv("NCCL_NVLS_ENABLE");
    int replaced = was && strcmp(was, "0") != 0;
    if (replaced)
        snprintf(note, len, "NCCL_NVLS_ENABLE=%s replaced by 0: this engine keeps NVLink multicast off", was);
    if (setenv("NCCL_NVLS_ENABLE", "0", 1) != 0)
        snn_die("setenv NCCL_NVLS_ENABLE: %s", strerror(errno));
    return replaced;
}

/* ---------------------------------------------------------------------------
 * a run started alone
 * ------------------------------------------------------------------------- */

static snn_dp_place self = {0, 1, 0, "alone"};
static pid_t copies[SNN_DP_MAX_WORLD]; /* set before the handler is installed */
static int copy_count;
static char spawn_dir[64], spawn_file[96];
static void (*on_abort)(void);

void snn_dp_on_abort(void (*fn)(void)) { on_abort = fn; }

const snn_dp_place *snn_dp_self(void) { return &self; }
void snn_dp_set(const snn_dp_place *p) { self = *p; }

/* Rank 0's SIGCHLD: a copy that fails ends the run (the others would wait for it in a collective). */
static void copy_ended(int sig)
{
    (void)sig;
    int saved = errno, st;
    for (int i = 0; i < copy_count; i++) { /* the ranks only: libraries may have children of their own */
        if (copies[i] <= 0 || waitpid(copies[i], &st, WNOHANG) <= 0)
            continue;
        const pid_t pid = copies[i];
        copies[i] = 0; /* reaped: snn_dp_spawned_wait skips it */
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            continue;
        static const char msg[] = "mnist: error: a data-parallel rank failed (its message is above); "
                                  "ending the run\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)w;
        for (int k = 0; k < copy_count; k++)
            if (copies[k] > 0 && copies[k] != pid)
                kill(copies[k], SIGKILL);
        if (on_abort)
            on_abort();
        if (spawn_file[0])
            unlink(spawn_file);
        if (spawn_dir[0])
            rmdir(spawn_dir);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    errno = saved;
}

static void remove_rendezvous(void)
{
    if (self.rank == 0 && spawn_dir[0]) {
        unlink(spawn_file);
        rmdir(spawn_dir);
    }
}

snn_dp_place snn_dp_spawn(int world, const char **rendezvous)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(spawn_dir, sizeof(spawn_dir), "%s/snn-dp-XXXXXX", tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    SNN_CHECK_SYS(mkdtemp(spawn_dir), "creating the rendezvous directory");
    snprintf(spawn_file, sizeof(spawn_file), "%s/nccl-id", spawn_dir);
    fflush(NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = copy_ended;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    SNN_CHECK_SYS(sigaction(SIGCHLD, &sa, NULL) == 0, "installing the SIGCHLD handler");
    sigset_t chld, before;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &before); /* a rank that ends at once is seen once its pid is kept */
    const pid_t parent = getpid();
    for (int r = 1; r < world; r++) {
        pid_t pid = fork();
        SNN_CHECK_SYS(pid >= 0, "starting a data-parallel rank (fork)");
        if (pid == 0) {
            signal(SIGCHLD, SIG_DFL);
            sigprocmask(SIG_SETMASK, &before, NULL);
            copy_count = 0;
            SNN_CHECK_SYS(prctl(PR_SET_PDEATHSIG, SIGKILL) == 0, "tying a rank to rank 0 (prctl)");
            if (getppid() != parent) /* rank 0 died before the tie */
                _exit(1);
            self = (snn_dp_place){r, world, r, "alone"};
            *rendezvous = spawn_file;
            return self;
        }
        copies[copy_count++] = pid;
    }
    sigprocmask(SIG_SETMASK, &before, NULL);
    self = (snn_dp_place){0, world, 0, "alone"};
    atexit(remove_rendezvous);
    *rendezvous = spawn_file;
    return self;
}

int snn_dp_spawned_wait(void)
{
    if (self.rank != 0 || !copy_count)
        return 0;
    int failed = 0;
    sigset_t chld, before;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &before); /* the handler reaps no more: each is waited for here */
    for (int i = 0; i < copy_count; i++) {
        int st;
        pid_t pid;
        if (copies[i] <= 0) /* the handler reaped it, a success */
            continue;
        while ((pid = waitpid(copies[i], &st, 0)) < 0 && errno == EINTR)
            ;
        if (pid > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0) && !failed)
            failed = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        copies[i] = 0;
    }
    copy_count = 0;
    sigprocmask(SIG_SETMASK, &before, NULL);
    return failed;
}
