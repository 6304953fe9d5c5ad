#define _DEFAULT_SOURCE /* syscall(SYS_getdents64), realpath */
#include "app/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "snn_check.h"

/* The temporaries still open, in fixed storage a signal handler can read. */
enum { SLOTS = 8 };
static struct {
    volatile sig_atomic_t used, is_dir;
    char path[PATH_MAX];
} temps[SLOTS];

struct snn_out {
    FILE *f;
    int slot;                /* -1: a special file, written in place */
    char path[PATH_MAX];     /* as given, for messages */
    char target[PATH_MAX];   /* the file the temporary replaces */
};

struct snn_out_dir {
    int slot;
    char dir[PATH_MAX];
};

static void remove_all_temporaries_at_exit(void) { snn_out_remove_temporaries(); }

/* The stop signals held back while a temporary is created and registered (or renamed and released), so
 * that a second signal, whose handler removes the registered ones and exits, never finds one of them
 * on disk and not in the table. */
static sigset_t hold_stops(void)
{
    sigset_t stops, was;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGHUP);
    SNN_CHECK_SYS(sigprocmask(SIG_BLOCK, &stops, &was) == 0, "holding the stop signals");
    return was;
}

static void release_stops(const sigset_t *was)
{
    SNN_CHECK_SYS(sigprocmask(SIG_SETMASK, was, NULL) == 0, "releasing the stop signals");
}

static int claim(const char *path, int is_dir)
{
    static int registered;
    if (!registered) {
        SNN_CHECK_SYS(atexit(remove_all_temporaries_at_exit) == 0, "registering the temporary files' cleanup");
        registered = 1;
    }
    for (int i = 0; i < SLOTS; i++)
        if (!temps[i].used) {
            snprintf(temps[i].path, sizeof(temps[i].path), "%s", path);
            temps[i].is_dir = is_dir;
            temps[i].used = 1;
            return i;
        }
    snn_die("more than %d output files open at once", SLOTS);
}

/* Empties and removes a directory with system calls only (no malloc, no
 * stdio), so that a signal handler may call it. */
static void remove_dir(const char *dir)
{
    char buf[4096];
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    for (int pass = 0; pass < 2; pass++) { /* entries removed while listing may be skipped once */
        long n;
        lseek(fd, 0, SEEK_SET);
        while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0)
            for (long at = 0; at < n;) {
                const char *name = buf + at + 19; /* d_ino 8, d_off 8, d_reclen 2, d_type 1 */
                unsigned short reclen;
                memcpy(&reclen, buf + at + 16, sizeof(reclen));
                if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0)
                    unlinkat(fd, name, 0);
                at += reclen;
            }
    }
    close(fd);
    rmdir(dir);
}

void snn_out_remove_temporaries(void)
{
    for (int i = 0; i < SLOTS; i++)
        if (temps[i].used) {
            if (temps[i].is_dir)
                remove_dir(temps[i].path);
            else
                unlink(temps[i].path);
            temps[i].used = 0;
        }
}

static void release(int slot)
{
    if (slot >= 0)
        temps[slot].used = 0;
}

__attribute__((noreturn)) static void die_writing(const char *path, int err)
{
    if (err == ENOENT) {
        char copy[PATH_MAX];
        snprintf(copy, sizeof(copy), "%s", path);
        snn_die("cannot write %s: its directory %s does not exist", path, dirname(copy));
    }
    snn_die("cannot write %s: %s", path, strerror(err));
}

/* A template for a new name beside target, target.KIND.XXXXXX: mkstemp and mkdtemp fill in the X's
 * with a name no file has, so that a dead process's leftover never blocks a later run. */
static void side_template(char *name, size_t len, const char *target, const char *kind)
{
    if ((size_t)snprintf(name, len, "%s.%s.XXXXXX", target, kind) >= len)
        snn_die("path too long: %s", target);
}

/* The mode open(O_CREAT) or mkdir would give with this one: mkstemp's and mkdtemp's are owner-only. */
static mode_t created_mode(mode_t mode)
{
    mode_t mask = umask(0);
    umask(mask);
    return mode & ~mask;
}

snn_out *snn_out_open(const char *path)
{
    snn_out *o = snn_xmalloc(sizeof(*o), "an output file");
    struct stat st;
    int exists = stat(path, &st) == 0;
    snprintf(o->path, sizeof(o->path), "%s", path);
    if (exists && S_ISDIR(st.st_mode))
        snn_die("cannot write %s: it is a directory", path);
    struct stat lst;
    int dangling = !exists && lstat(path, &lst) == 0;
    if ((exists && !S_ISREG(st.st_mode)) || dangling) { /* a device, FIFO, terminal: in place */
        o->slot = -1;
        o->f = fopen(path, "w");
        if (!o->f)
            die_writing(path, errno);
        return o;
    }
    /* A link to a regular file keeps being a link: its target is replaced. */
    if (!exists || !realpath(path, o->target))
        snprintf(o->target, sizeof(o->target), "%s", path);
    char tmp[PATH_MAX];
    side_template(tmp, sizeof(tmp), o->target, "tmp");
    sigset_t was = hold_stops();
    int fd = mkstemp(tmp);
    if (fd < 0)
        die_writing(path, errno);
    o->slot = claim(tmp, 0);
    release_stops(&was);
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || fchmod(fd, exists ? st.st_mode & 07777 : created_mode(0666)) != 0)
        die_writing(path, errno);
    o->f = fdopen(fd, "wb");
    SNN_CHECK_SYS(o->f, "opening an output stream");
    return o;
}

FILE *snn_out_stream(snn_out *o) { return o->f; }

/* fsync of the directory that holds path, so that the rename is durable. */
static int sync_parent(const char *path)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof(copy), "%s", path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd) == 0 || errno == EINVAL ? 0 : -1; /* some file systems cannot sync a directory */
    close(fd);
    return rc;
}

void snn_out_commit(snn_out *o)
{
    int err = 0;
    if (fflush(o->f) != 0 || ferror(o->f))
        err = errno ? errno : EIO;
    if (!err && o->slot >= 0 && fsync(fileno(o->f)) != 0)
        err = errno;
    if (fclose(o->f) != 0 && !err)
        err = errno;
    sigset_t was = hold_stops();
    if (!err && o->slot >= 0 && rename(temps[o->slot].path, o->target) != 0)
        err = errno;
    if (err && o->slot >= 0)
        unlink(temps[o->slot].path);
    release(o->slot);
    release_stops(&was);
    if (!err && o->slot >= 0 && sync_parent(o->target) != 0)
        err = errno;
    if (err)
        die_writing(o->path, err);
    free(o);
}

void snn_out_abandon(snn_out *o)
{
    fclose(o->f);
    sigset_t was = hold_stops();
    if (o->slot >= 0)
        unlink(temps[o->slot].path);
    release(o->slot);
    release_stops(&was);
    free(o);
}

static int dir_is_empty(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char buf[4096];
    long n, entries = 0;
    if (fd < 0)
        return 0;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0)
        for (long at = 0; at < n; entries++) {
            unsigned short reclen;
            memcpy(&reclen, buf + at + 16, sizeof(reclen));
            at += reclen;
        }
    close(fd);
    return entries <= 2; /* . and .. */
}

snn_out_dir *snn_out_dir_open(const char *dir, const char *marker)
{
    snn_out_dir *d = snn_xmalloc(sizeof(*d), "an output directory");
    struct stat st;
    char path[PATH_MAX], stage[PATH_MAX];
    snprintf(d->dir, sizeof(d->dir), "%s", dir);
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            snn_die("cannot write the directory %s: a file of that name is there", dir);
        snprintf(path, sizeof(path), "%s/%s", dir, marker);
        if (!dir_is_empty(dir) && access(path, F_OK) != 0)
            snn_die("%s holds files that are not an earlier dump (no %s): refusing to replace it; name a new "
                    "directory", dir, marker);
    }
    side_template(stage, sizeof(stage), dir, "tmp");
    sigset_t was = hold_stops();
    if (!mkdtemp(stage))
        die_writing(dir, errno);
    d->slot = claim(stage, 1);
    release_stops(&was);
    if (chmod(stage, created_mode(0777)) != 0)
        die_writing(stage, errno);
    return d;
}

void snn_out_dir_path(const snn_out_dir *d, const char *name, char *path, size_t len)
{
    if ((size_t)snprintf(path, len, "%s/%s", temps[d->slot].path, name) >= len)
        snn_die("path too long: %s/%s", d->dir, name);
}

void snn_out_dir_write(snn_out_dir *d, const char *name, const void *data, size_t bytes)
{
    char path[PATH_MAX];
    snn_out_dir_path(d, name, path, sizeof(path));
    FILE *f = fopen(path, "wb");
    if (!f)
        die_writing(path, errno);
    int err = fwrite(data, 1, bytes, f) == bytes && fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : errno;
    if (fclose(f) != 0 && !err)
        err = errno;
    if (err)
        die_writing(path, err);
}

/* The staged directory takes dir's name; an earlier dump there is moved
 * aside first and removed once the new one is in place. */
void snn_out_dir_commit(snn_out_dir *d)
{
    char old[PATH_MAX];
    const char *stage = temps[d->slot].path;
    struct stat st;
    int replacing = stat(d->dir, &st) == 0;
    if (replacing && dir_is_empty(d->dir)) {
        if (rmdir(d->dir) != 0)
            die_writing(d->dir, errno);
        replacing = 0;
    }
    if (replacing) { /* onto a new empty directory, which rename replaces */
        side_template(old, sizeof(old), d->dir, "old");
        if (!mkdtemp(old) || rename(d->dir, old) != 0)
            die_writing(d->dir, errno);
    }
    sigset_t was = hold_stops();
    if (rename(stage, d->dir) != 0) {
        int err = errno;
        if (replacing)
            rename(old, d->dir);
        die_writing(d->dir, err);
    }
    release(d->slot);
    release_stops(&was);
    if (sync_parent(d->dir) != 0)
        die_writing(d->dir, errno);
    if (replacing)
        remove_dir(old);
    free(d);
}

void snn_out_dir_abandon(snn_out_dir *d)
{
    sigset_t was = hold_stops();
    remove_dir(temps[d->slot].path);
    release(d->slot);
    release_stops(&was);
    free(d);
}
