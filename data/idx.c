/* IDX reader. zlib's gzread reads gzip and plain files alike, so one path
 * serves both; a plain file named .gz (as some browsers save them) works. */
#include "data/idx.h"

#include "data/input.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

struct idx_file {
    gzFile gz;
    const char *path;
    char *err;
    size_t errlen;
    const char *empty_hint; /* why the file may read as empty */
};

__attribute__((format(printf, 2, 3))) static int fail(const struct idx_file *f, const char *fmt, ...)
{
    int n = snprintf(f->err, f->errlen, "%s: ", f->path);
    if (n >= 0 && (size_t)n < f->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(f->err + n, f->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int idx_open(struct idx_file *f, const char *path, char *err, size_t errlen)
{
    f->path = path;
    f->err = err;
    f->errlen = errlen;
    struct stat st;
    int fd = snn_input_open(path, &st, err, errlen);
    if (fd < 0)
        return -1;
    f->empty_hint = snn_input_empty_hint(&st);
    f->gz = gzdopen(fd, "rb");
    if (!f->gz) {
        close(fd);
        return fail(f, "cannot open: out of memory");
    }
    gzbuffer(f->gz, 1u << 17);
    return 0;
}

/* zlib prefixes its message with "<fd:N>: "; we add our path. */
static int stream_error(const struct idx_file *f)
{
    int code;
    const char *msg = gzerror(f->gz, &code), *colon = strstr(msg, ": ");
    if (strncmp(msg, "<fd:", 4) == 0 && colon)
        msg = colon + 2;
    if (code == Z_ERRNO)
        return fail(f, "read error: %s", msg);
    if (code == Z_MEM_ERROR)
        return fail(f, "zlib: out of memory");
    return fail(f, "corrupt gzip data (zlib: %s)", msg);
}

/* A gzip stream cut short reads as end of data with Z_BUF_ERROR set. */
static int ended_early(const struct idx_file *f)
{
    int code;
    gzerror(f->gz, &code);
    return code == Z_BUF_ERROR;
}

/* Reads up to n bytes into dst; *got < n only at the end of the data.
 * A corrupt or unreadable stream is an error, even after partial data. */
static int idx_read(const struct idx_file *f, void *dst, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n) {
        size_t chunk = n - *got > (1u << 30) ? (1u << 30) : n - *got;
        int r = gzread(f->gz, (uint8_t *)dst + *got, (unsigned)chunk);
        if (r < 0)
            return stream_error(f);
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    int code;
    gzerror(f->gz, &code);
    if (code != Z_OK && code != Z_BUF_ERROR)
        return stream_error(f);
    return 0;
}

static int bad_magic(const struct idx_file *f, uint32_t found, uint32_t expected)
{
    const char *hint = "";
    if (expected == SNN_IDX_MAGIC_IMAGES && found == SNN_IDX_MAGIC_LABELS)
        hint = "; this is a labels file";
    else if (expected == SNN_IDX_MAGIC_LABELS && found == SNN_IDX_MAGIC_IMAGES)
        hint = "; this is an images file";
    return fail(f, "bad magic 0x%08x, expected 0x%08x (IDX unsigned bytes, %s)%s", (unsigned)found,
                (unsigned)expected, expected == SNN_IDX_MAGIC_IMAGES ? "3 dims" : "1 dim", hint);
}

/* Reads the magic and ndims big-endian dimensions. */
static int read_header(const struct idx_file *f, uint32_t magic, uint32_t *dims, int ndims)
{
    uint8_t buf[16];
    size_t want = 4 + 4 * (size_t)ndims, got;
    if (idx_read(f, buf, want, &got))
        return -1;
    if (got == 0 && !ended_early(f))
        return fail(f, "empty file%s", f->empty_hint);
    if (got < 4 || (be32(buf) == magic && got < want))
        return fail(f, "truncated header: %zu of %zu bytes%s", got, want,
                    ended_early(f) ? " (gzip stream ends early)" : "");
    if (be32(buf) != magic)
        return bad_magic(f, be32(buf), magic);
    for (int i = 0; i < ndims; i++)
        dims[i] = be32(buf + 4 + 4 * i);
    return 0;
}

static int check_count(const struct idx_file *f, uint32_t found, uint32_t expected, const char *what)
{
    if (found != expected)
        return fail(f, "has %u %s, this build expects %u", (unsigned)found, what, (unsigned)expected);
    return 0;
}

static int check_trailing(const struct idx_file *f, uint32_t count, const char *what)
{
    uint8_t buf[4096];
    size_t got, extra = 0;
    do {
        if (idx_read(f, buf, sizeof buf, &got))
            return -1;
        extra += got;
    } while (got == sizeof buf);
    if (extra)
        return fail(f, "%zu trailing bytes after the %u %s", extra, (unsigned)count, what);
    if (ended_early(f))
        return fail(f, "truncated: the gzip stream ends early after the %u %s (trailer missing)", (unsigned)count,
                    what);
    return 0;
}

/* Reads count items of item_bytes each, then insists the data ends there. */
static int read_body(const struct idx_file *f, uint8_t *dst, uint32_t count, size_t item_bytes, const char *what)
{
    size_t want = (size_t)count * item_bytes, got;
    if (idx_read(f, dst, want, &got))
        return -1;
    if (got < want)
        return fail(f, "truncated after %zu of %u %s (%zu bytes short%s)", got / item_bytes, (unsigned)count, what,
                    want - got, ended_early(f) ? ", gzip stream ends early" : "");
    return check_trailing(f, count, what);
}

static int check_labels(const struct idx_file *f, const uint8_t *labels, uint32_t count, uint32_t classes)
{
    for (uint32_t i = 0; i < count; i++)
        if (labels[i] >= classes)
            return fail(f, "label %u at index %u is out of range 0..%u", labels[i], (unsigned)i,
                        (unsigned)classes - 1);
    return 0;
}

int snn_idx_read_count(const char *path, uint32_t magic, uint32_t *count, char *err, size_t errlen)
{
    struct idx_file f;
    if (idx_open(&f, path, err, errlen))
        return -1;
    int rc = read_header(&f, magic, count, 1);
    gzclose(f.gz);
    return rc;
}

int snn_idx_read_images(const char *path, uint8_t *dst, uint32_t expect_count, uint32_t rows, uint32_t cols,
                        char *err, size_t errlen)
{
    struct idx_file f;
    uint32_t dims[3];
    if (idx_open(&f, path, err, errlen))
        return -1;
    int rc = read_header(&f, SNN_IDX_MAGIC_IMAGES, dims, 3);
    if (!rc && (dims[1] != rows || dims[2] != cols))
        rc = fail(&f, "images are %ux%u, expected %ux%u", (unsigned)dims[1], (unsigned)dims[2], (unsigned)rows,
                  (unsigned)cols);
    if (!rc)
        rc = check_count(&f, dims[0], expect_count, "images");
    if (!rc)
        rc = read_body(&f, dst, expect_count, (size_t)rows * cols, "images");
    gzclose(f.gz);
    return rc;
}

int snn_idx_read_labels(const char *path, uint8_t *dst, uint32_t expect_count, uint32_t classes, char *err,
                        size_t errlen)
{
    struct idx_file f;
    uint32_t count;
    if (idx_open(&f, path, err, errlen))
        return -1;
    int rc = read_header(&f, SNN_IDX_MAGIC_LABELS, &count, 1);
    if (!rc)
        rc = check_count(&f, count, expect_count, "labels");
    if (!rc)
        rc = read_body(&f, dst, expect_count, 1, "labels");
    if (!rc)
        rc = check_labels(&f, dst, expect_count, classes);
    gzclose(f.gz);
    return rc;
}
