/* IDX reader. A file that starts with gzip's magic is inflated here, one
 * member after another (zlib checks each member's CRC-32 and length); any
 * other file is read raw, so a plain file named .gz (as some browsers save
 * them) works. zlib's gzread is not used: it takes a member cut short in its
 * trailer, and bytes after the last member, for a good end of the data. */
#include "data/idx.h"

#include "data/input.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_CHUNK (1u << 17) /* bytes of the file read at a time */

struct idx_file {
    int fd;
    const char *path;
    char *err;
    size_t errlen;
    const char *empty_hint;        /* why the file may read as empty */
    uint8_t *in;                   /* IDX_CHUNK bytes, unread from z.next_in on (raw files too) */
    unsigned long long bytes_read; /* from the file, so far */
    int eof;                       /* the file has no bytes beyond those in `in` */
    int gzip;                      /* the file starts with gzip's magic; z is initialised */
    int member_ended;              /* inflate has checked the current member's trailer */
    int ended;                     /* the data ended where a file or a gzip member may end */
    int ended_early;               /* the file ended inside a gzip member */
    z_stream z;
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

/* Moves the unread bytes to the front of `in` and reads more after them. */
static int refill(struct idx_file *f)
{
    size_t keep = f->z.avail_in, got;
    memmove(f->in, f->z.next_in, keep);
    int e = snn_input_read(f->fd, f->in + keep, IDX_CHUNK - keep, &got);
    if (e)
        return fail(f, "read error: %s", strerror(e));
    f->z.next_in = f->in;
    f->z.avail_in = (uInt)(keep + got);
    f->bytes_read += got;
    f->eof = got < IDX_CHUNK - keep;
    return 0;
}

static int zlib_error(const struct idx_file *f, int code)
{
    if (code == Z_MEM_ERROR)
        return fail(f, "zlib: out of memory");
    return fail(f, "corrupt gzip data (zlib: %s)", f->z.msg ? f->z.msg : zError(code));
}

/* Opens the file and tells gzip from raw by the first two bytes. The caller
 * calls idx_close whatever this returns. */
static int idx_open(struct idx_file *f, const char *path, char *err, size_t errlen)
{
    *f = (struct idx_file){.fd = -1, .path = path, .err = err, .errlen = errlen};
    struct stat st;
    if ((f->fd = snn_input_open(path, &st, err, errlen)) < 0)
        return -1;
    f->empty_hint = snn_input_empty_hint(&st);
    if (!(f->in = malloc(IDX_CHUNK)))
        return fail(f, "out of memory");
    f->z.next_in = f->in;
    if (refill(f))
        return -1;
    if (f->z.avail_in < 2 || f->in[0] != 0x1f || f->in[1] != 0x8b)
        return 0;
    int code = inflateInit2(&f->z, 15 + 16); /* a gzip member, not zlib's own format */
    if (code != Z_OK)
        return zlib_error(f, code);
    f->gzip = 1;
    return 0;
}

static void idx_close(struct idx_file *f)
{
    if (f->gzip)
        inflateEnd(&f->z);
    free(f->in);
    if (f->fd >= 0)
        close(f->fd);
}

static int read_raw(struct idx_file *f, uint8_t *dst, size_t n, size_t *got)
{
    while (*got < n) {
        if (f->z.avail_in == 0) {
            if (f->eof) {
                f->ended = 1;
                return 0;
            }
            if (refill(f))
                return -1;
            continue;
        }
        size_t k = n - *got < f->z.avail_in ? n - *got : f->z.avail_in;
        memcpy(dst + *got, f->z.next_in, k);
        f->z.next_in += k;
        f->z.avail_in -= (uInt)k;
        *got += k;
    }
    return 0;
}

/* After a member's trailer: the file ends, or another member starts there
 * (concatenated members are one gzip file, as gunzip reads them). */
static int next_member(struct idx_file *f)
{
    if (f->z.avail_in == 0) {
        f->ended = 1;
        return 0;
    }
    if (f->z.avail_in < 2 || f->z.next_in[0] != 0x1f || f->z.next_in[1] != 0x8b)
        return fail(f, "trailing bytes after the gzip data, from byte %llu: not another gzip member",
                    f->bytes_read - f->z.avail_in);
    int code = inflateReset(&f->z);
    if (code != Z_OK)
        return zlib_error(f, code);
    f->member_ended = 0;
    return 0;
}

static int read_gzip(struct idx_file *f, uint8_t *dst, size_t n, size_t *got)
{
    while (*got < n && !f->ended) {
        if (f->z.avail_in < 2 && !f->eof && refill(f)) /* two: a member's magic seen whole */
            return -1;
        if (f->member_ended) {
            if (next_member(f))
                return -1;
            continue;
        }
        if (f->z.avail_in == 0) {
            f->ended_early = 1;
            return 0;
        }
        uInt want = n - *got < (1u << 30) ? (uInt)(n - *got) : 1u << 30;
        f->z.next_out = dst + *got;
        f->z.avail_out = want;
        int code = inflate(&f->z, Z_NO_FLUSH);
        *got += want - f->z.avail_out;
        if (code == Z_STREAM_END)
            f->member_ended = 1;
        else if (code != Z_OK && !(code == Z_BUF_ERROR && f->z.avail_in == 0))
            return zlib_error(f, code);
    }
    return 0;
}

/* Reads up to n bytes of the data into dst; *got < n only at its end, where
 * f->ended or f->ended_early says which end. */
static int idx_read(struct idx_file *f, void *dst, size_t n, size_t *got)
{
    *got = 0;
    return f->gzip ? read_gzip(f, dst, n, got) : read_raw(f, dst, n, got);
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
static int read_header(struct idx_file *f, uint32_t magic, uint32_t *dims, int ndims)
{
    uint8_t buf[16];
    size_t want = 4 + 4 * (size_t)ndims, got;
    if (idx_read(f, buf, want, &got))
        return -1;
    if (got == 0 && !f->ended_early)
        return fail(f, "empty file%s", f->empty_hint);
    if (got < 4 || (be32(buf) == magic && got < want))
        return fail(f, "truncated header: %zu of %zu bytes%s", got, want,
                    f->ended_early ? " (gzip stream ends early)" : "");
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

/* The data must end after the last item, and a gzip file with its member.
 * Trailing bytes are counted only up to a bound: a gzip bomb would inflate
 * gigabytes before its count were known. */
static int check_trailing(struct idx_file *f, uint32_t count, const char *what)
{
    enum { COUNTED = 4096 };
    uint8_t buf[COUNTED + 1];
    size_t got;
    if (idx_read(f, buf, sizeof buf, &got))
        return -1;
    if (got > COUNTED)
        return fail(f, "more than %d trailing bytes after the %u %s", COUNTED, (unsigned)count, what);
    if (got)
        return fail(f, "%zu trailing bytes after the %u %s", got, (unsigned)count, what);
    if (f->ended_early)
        return fail(f, "truncated: the gzip stream ends early after the %u %s (trailer or last block missing)",
                    (unsigned)count, what);
    return 0;
}

/* Reads count items of item_bytes each, then insists the data ends there. */
static int read_body(struct idx_file *f, uint8_t *dst, uint32_t count, size_t item_bytes, const char *what)
{
    size_t want = (size_t)count * item_bytes, got;
    if (idx_read(f, dst, want, &got))
        return -1;
    if (got < want)
        return fail(f, "truncated after %zu of %u %s (%zu bytes short%s)", got / item_bytes, (unsigned)count, what,
                    want - got, f->ended_early ? ", gzip stream ends early" : "");
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
    int rc = idx_open(&f, path, err, errlen);
    if (!rc)
        rc = read_header(&f, magic, count, 1);
    idx_close(&f);
    return rc;
}

int snn_idx_read_images(const char *path, uint8_t *dst, uint32_t expect_count, uint32_t rows, uint32_t cols,
                        char *err, size_t errlen)
{
    struct idx_file f;
    uint32_t dims[3];
    int rc = idx_open(&f, path, err, errlen);
    if (!rc)
        rc = read_header(&f, SNN_IDX_MAGIC_IMAGES, dims, 3);
    if (!rc && (dims[1] != rows || dims[2] != cols))
        rc = fail(&f, "images are %ux%u, expected %ux%u", (unsigned)dims[1], (unsigned)dims[2], (unsigned)rows,
                  (unsigned)cols);
    if (!rc)
        rc = check_count(&f, dims[0], expect_count, "images");
    if (!rc)
        rc = read_body(&f, dst, expect_count, (size_t)rows * cols, "images");
    idx_close(&f);
    return rc;
}

int snn_idx_read_labels(const char *path, uint8_t *dst, uint32_t expect_count, uint32_t classes, char *err,
                        size_t errlen)
{
    struct idx_file f;
    uint32_t count;
    int rc = idx_open(&f, path, err, errlen);
    if (!rc)
        rc = read_header(&f, SNN_IDX_MAGIC_LABELS, &count, 1);
    if (!rc)
        rc = check_count(&f, count, expect_count, "labels");
    if (!rc)
        rc = read_body(&f, dst, expect_count, 1, "labels");
    if (!rc)
        rc = check_labels(&f, dst, expect_count, classes);
    idx_close(&f);
    return rc;
}
