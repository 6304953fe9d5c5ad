#include "data/safetensors.h"

#include "data/input.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[SNN_ST_DTYPES] = {
    [SNN_ST_BOOL] = {"BOOL", 1}, [SNN_ST_U8] = {"U8", 1},   [SNN_ST_I8] = {"I8", 1},
    [SNN_ST_F8_E5M2] = {"F8_E5M2", 1}, [SNN_ST_F8_E4M3] = {"F8_E4M3", 1}, [SNN_ST_I16] = {"I16", 2},
    [SNN_ST_U16] = {"U16", 2}, [SNN_ST_F16] = {"F16", 2}, [SNN_ST_BF16] = {"BF16", 2}, [SNN_ST_I32] = {"I32", 4},
    [SNN_ST_U32] = {"U32", 4}, [SNN_ST_F32] = {"F32", 4}, [SNN_ST_F64] = {"F64", 8}, [SNN_ST_I64] = {"I64", 8},
    [SNN_ST_U64] = {"U64", 8},
};

struct snn_st_file {
    char *name;     /* for messages */
    uint8_t *owned; /* the file's bytes when snn_st_read read them */
    cJSON *header;  /* the names and metadata values point into it */
    int count;
    snn_st_tensor *tensors;
    const cJSON *meta;
};

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen, const char *name, const char *fmt,
                                                      ...)
{
    va_list ap;
    int n = snprintf(err, errlen, "%s: ", name);
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < errlen)
        vsnprintf(err + n, errlen - n, fmt, ap);
    va_end(ap);
    return -1;
}

/* Elements of a shape; 0 when the count overflows 64 bits (*ok cleared). */
static uint64_t elements(const snn_st_tensor *t, int *ok)
{
    uint64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        if (__builtin_mul_overflow(n, (uint64_t)t->shape[i], &n))
            return *ok = 0, 0;
    return n;
}

size_t snn_st_bytes(const snn_st_tensor *t)
{
    int ok = 1;
    return (size_t)elements(t, &ok) * dtypes[t->dtype].size;
}

static void put_u64le(uint8_t out[8], uint64_t v)
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64le(const uint8_t in[8])
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | in[i];
    return v;
}

/* ---- writing ---------------------------------------------------------------- */

static cJSON *tensor_entry(const snn_st_tensor *t, size_t begin, size_t end)
{
    cJSON *e = cJSON_CreateObject(), *shape, *offsets, *b, *x; /* the specification's key order */
    if (!e || !cJSON_AddStringToObject(e, "dtype", dtypes[t->dtype].name) ||
        !(shape = cJSON_AddArrayToObject(e, "shape")) || !(offsets = cJSON_AddArrayToObject(e, "data_offsets")))
        goto oom;
    for (int i = 0; i < t->rank; i++) {
        cJSON *d = cJSON_CreateNumber((double)t->shape[i]);
        if (!d || !cJSON_AddItemToArray(shape, d))
            goto oom;
    }
    if (!(b = cJSON_CreateNumber((double)begin)) || !cJSON_AddItemToArray(offsets, b) ||
        !(x = cJSON_CreateNumber((double)end)) || !cJSON_AddItemToArray(offsets, x))
        goto oom;
    return e;
oom:
    cJSON_Delete(e);
    return NULL;
}

static char *header_json(const snn_st_tensor *tensors, int count, const snn_st_meta *meta, int meta_count)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    if (meta_count) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; m && i < meta_count; i++)
            if (!cJSON_AddStringToObject(m, meta[i].key, meta[i].value))
                m = NULL;
        if (!m)
            goto oom;
    }
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        size_t bytes = snn_st_bytes(&tensors[i]);
        cJSON *e = tensor_entry(&tensors[i], at, at + bytes);
        if (!e)
            goto oom;
        cJSON_AddItemToObject(root, tensors[i].name, e);
        at += bytes;
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
oom:
    cJSON_Delete(root);
    return NULL;
}

int snn_st_write(FILE *f, const char *name, const snn_st_tensor *tensors, int count, const snn_st_meta *meta,
                 int meta_count, char *err, size_t errlen)
{
    char *json = header_json(tensors, count, meta, meta_count);
    if (!json)
        return fail(err, errlen, name, "out of memory writing the safetensors header");
    size_t n = strlen(json), padded = (n + 7) / 8 * 8;
    uint8_t len[8];
    put_u64le(len, padded);
    fwrite(len, 1, 8, f);
    fwrite(json, 1, n, f);
    for (size_t i = n; i < padded; i++)
        fputc(' ', f);
    free(json);
    for (int i = 0; i < count; i++)
        if (snn_st_bytes(&tensors[i])) /* an empty tensor may have no data pointer: fwrite wants one */
            fwrite(tensors[i].data, 1, snn_st_bytes(&tensors[i]), f);
    return 0;
}

/* ---- reading ---------------------------------------------------------------- */

static int too_short(char *err, size_t errlen, const char *file, size_t len, const char *hint)
{
    return fail(err, errlen, file, "%zu bytes%s: too short for a safetensors file (an 8-byte header length first)",
                len, hint);
}

/* A JSON number that is a whole count: 0 <= v <= 2^53 (doubles hold it exactly). */
static int whole(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != floor(v->valuedouble))
        return 0;
    *out = (uint64_t)v->valuedouble;
    return 1;
}

static int parse_dtype(const char *s, snn_st_dtype *t)
{
    for (int i = 0; i < SNN_ST_DTYPES; i++)
        if (strcmp(s, dtypes[i].name) == 0)
            return *t = (snn_st_dtype)i, 1;
    return 0;
}

static void shape_text(char *buf, size_t len, int rank, const int64_t *shape)
{
    int n = snprintf(buf, len, "[");
    for (int i = 0; i < rank && n > 0 && (size_t)n < len; i++)
        n += snprintf(buf + n, len - n, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (n > 0 && (size_t)n < len)
        snprintf(buf + n, len - n, "]");
}

/* One tensor's entry, checked on its own; ranges are checked together after. */
static int parse_entry(const cJSON *e, snn_st_tensor *t, uint64_t range[2], const char *file, char *err,
                       size_t errlen)
{
    const char *n = e->string;
    if (!cJSON_IsObject(e))
        return fail(err, errlen, file, "tensor '%s': its entry is not a JSON object", n);
    const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL, *k;
    cJSON_ArrayForEach(k, e) {
        const cJSON **slot = !strcmp(k->string, "dtype")          ? &dtype
                             : !strcmp(k->string, "shape")        ? &shape
                             : !strcmp(k->string, "data_offsets") ? &offsets
                                                                  : NULL;
        if (!slot)
            return fail(err, errlen, file, "tensor '%s': unknown key '%s' (only dtype, shape, data_offsets)", n,
                        k->string);
        if (*slot)
            return fail(err, errlen, file, "tensor '%s': key '%s' appears twice", n, k->string);
        *slot = k;
    }
    if (!dtype || !shape || !offsets)
        return fail(err, errlen, file, "tensor '%s': no '%s'", n, !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!cJSON_IsString(dtype) || !parse_dtype(dtype->valuestring, &t->dtype))
        return fail(err, errlen, file, "tensor '%s': unknown dtype %s%s%s", n, cJSON_IsString(dtype) ? "'" : "(not a string)",
                    cJSON_IsString(dtype) ? dtype->valuestring : "", cJSON_IsString(dtype) ? "'" : "");
    int rank = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
    if (rank < 0 || rank > SNN_ST_MAX_RANK)
        return fail(err, errlen, file, "tensor '%s': shape is %s", n,
                    rank < 0 ? "not an array" : "of rank above 8");
    t->rank = rank;
    int i = 0;
    cJSON_ArrayForEach(k, shape) {
        uint64_t d;
        if (!whole(k, &d))
            return fail(err, errlen, file, "tensor '%s': shape entry %d is not a whole number >= 0", n, i);
        t->shape[i++] = (int64_t)d;
    }
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 || !whole(offsets->child, &range[0]) ||
        !whole(offsets->child->next, &range[1]))
        return fail(err, errlen, file, "tensor '%s': data_offsets is not [begin, end] of whole numbers", n);
    if (range[0] > range[1])
        return fail(err, errlen, file, "tensor '%s': data_offsets [%llu, %llu] end before they begin", n,
                    (unsigned long long)range[0], (unsigned long long)range[1]);
    int ok = 1;
    uint64_t count = elements(t, &ok), bytes;
    if (!ok || __builtin_mul_overflow(count, (uint64_t)dtypes[t->dtype].size, &bytes) || bytes != range[1] - range[0]) {
        char text[160];
        shape_text(text, sizeof(text), t->rank, t->shape);
        return fail(err, errlen, file, "tensor '%s': shape %s of %s does not fill its data_offsets' %llu bytes", n,
                    text, dtypes[t->dtype].name, (unsigned long long)(range[1] - range[0]));
    }
    return 0;
}

static int by_string(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int check_metadata(const cJSON *m, const char *file, char *err, size_t errlen)
{
    if (!cJSON_IsObject(m))
        return fail(err, errlen, file, "__metadata__ is not a JSON object");
    const cJSON *k;
    int n = 0, rc = 0;
    cJSON_ArrayForEach(k, m) {
        if (!cJSON_IsString(k))
            return fail(err, errlen, file, "__metadata__ '%s' is not a string (the format allows strings only)",
                        k->string);
        n++;
    }
    const char **keys = malloc((n ? n : 1) * sizeof(*keys));
    if (!keys)
        return fail(err, errlen, file, "out of memory for %d metadata keys", n);
    n = 0;
    cJSON_ArrayForEach(k, m) keys[n++] = k->string;
    qsort(keys, n, sizeof(*keys), by_string);
    for (int i = 1; i < n && !rc; i++)
        if (!strcmp(keys[i], keys[i - 1]))
            rc = fail(err, errlen, file, "__metadata__ '%s' appears twice", keys[i]);
    free(keys);
    return rc;
}

static int has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20)
            return 1;
    return 0;
}

typedef struct {
    uint64_t begin, end;
    const char *name;
    int tensor; /* its index in the header's order */
} span;

static int by_begin(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->begin != y->begin ? (x->begin < y->begin ? -1 : 1) : (x->end > y->end) - (x->end < y->end);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const span *)a)->name, ((const span *)b)->name);
}

static int unclaimed_tail(char *err, size_t errlen, const char *file, const char *more, uint64_t bytes)
{
    return fail(err, errlen, file, "%s%llu bytes after the last tensor's data belong to no tensor", more,
                (unsigned long long)bytes);
}

/* The ranges tile [0, data_len): sorted by begin, each starts where the last ended. */
static int check_spans(span *s, int n, uint64_t data_len, const char *file, char *err, size_t errlen)
{
    qsort(s, n, sizeof(*s), by_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(s[i].name, s[i - 1].name))
            return fail(err, errlen, file, "tensor '%s' appears twice", s[i].name);
    qsort(s, n, sizeof(*s), by_begin);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].end > data_len)
            return fail(err, errlen, file, "tensor '%s': data_offsets [%llu, %llu] run past the data's %llu bytes",
                        s[i].name, (unsigned long long)s[i].begin, (unsigned long long)s[i].end,
                        (unsigned long long)data_len);
        if (s[i].begin < at)
            return fail(err, errlen, file, "tensor '%s' overlaps tensor '%s' (bytes %llu to %llu)", s[i].name,
                        s[i - 1].name, (unsigned long long)s[i].begin, (unsigned long long)at);
        if (s[i].begin > at)
            return fail(err, errlen, file, "a gap in the data: bytes %llu to %llu belong to no tensor",
                        (unsigned long long)at, (unsigned long long)s[i].begin);
        at = s[i].end;
    }
    if (at != data_len)
        return unclaimed_tail(err, errlen, file, "", data_len - at);
    return 0;
}

/* Length of the UTF-8 sequence at s (at most n bytes), 0 when invalid:
 * overlong forms, surrogates and code points above U+10FFFF included. */
static size_t utf8_length(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || len > n)
        return 0;
    unsigned cp = len == 1 ? c : c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* What cJSON lets through and the format's reference reader does not: text
 * that is not UTF-8, a \u0000 escape (it would cut a name short), and
 * numbers that are not plain whole numbers (06, 6.0, 2.4e1). */
static int check_lexical(const char *json, size_t n, const char *file, char *err, size_t errlen)
{
    const unsigned char *p = (const unsigned char *)json;
    int in_string = 0;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_length(p + i, n - i);
        if (!len)
            return fail(err, errlen, file, "the header is not UTF-8 (byte %zu)", i + 8);
        if (in_string) {
            if (p[i] == '\\' && i + 1 < n) {
                if (p[i + 1] == 'u' && n - i >= 6 && !memcmp(p + i + 2, "0000", 4))
                    return fail(err, errlen, file, "the header holds a \\u0000 escape (byte %zu)", i + 8);
                i += 2;
                continue;
            }
            in_string = p[i] != '"';
        } else if (p[i] == '"') {
            in_string = 1;
        } else if (p[i] == '-' || (p[i] >= '0' && p[i] <= '9')) {
            size_t start = i;
            i += p[i] == '-';
            while (i < n && p[i] >= '0' && p[i] <= '9')
                i++;
            size_t digits = i - start - (p[start] == '-');
            if (digits == 0 || (digits > 1 && p[i - digits] == '0') ||
                (i < n && (p[i] == '.' || p[i] == 'e' || p[i] == 'E')))
                return fail(err, errlen, file, "the header's number at byte %zu is not a plain whole number",
                            start + 8);
            continue;
        }
        i += len;
    }
    return 0;
}

/* The header length against the format's limit and the file's length. */
static int check_header_length(uint64_t n, uint64_t file_len, const char *file, char *err, size_t errlen)
{
    if (n > SNN_ST_MAX_HEADER)
        return fail(err, errlen, file, "header length %llu is above the format's limit of %d bytes",
                    (unsigned long long)n, SNN_ST_MAX_HEADER);
    if (n > file_len - 8)
        return fail(err, errlen, file, "header length %llu runs past the end of the file (%llu bytes)",
                    (unsigned long long)n, (unsigned long long)file_len);
    return 0;
}

/* The JSON header (n bytes) and each entry in it, checked without the data:
 * fills f's tensors (their data not yet pointed to) and *spans, one per
 * tensor, for check_spans. */
static int parse_json(snn_st_file *f, const char *json, uint64_t n, span **spans, const char *file, char *err,
                      size_t errlen)
{
    const char *end = NULL;
    if (n == 0 || json[0] != '{')
        return fail(err, errlen, file, "the header is not a JSON object (it must start with '{')");
    if (check_lexical(json, n, file, err, errlen))
        return -1;
    f->header = cJSON_ParseWithLengthOpts(json, n, &end, 0);
    if (!f->header || !cJSON_IsObject(f->header))
        return fail(err, errlen, file, "the header is not valid JSON (at byte %td of %llu)",
                    (f->header ? end : cJSON_GetErrorPtr()) - json + 8, (unsigned long long)n + 8);
    for (; end < json + n; end++)
        if (*end != ' ')
            return fail(err, errlen, file, "the header has bytes after its JSON object (at byte %td)", end - json + 8);

    const cJSON *e;
    int count = 0;
    cJSON_ArrayForEach(e, f->header) count += strcmp(e->string, "__metadata__") != 0;
    f->tensors = calloc(count ? count : 1, sizeof(*f->tensors));
    *spans = calloc(count ? count : 1, sizeof(**spans));
    if (!f->tensors || !*spans)
        return fail(err, errlen, file, "out of memory for %d tensors", count);
    cJSON_ArrayForEach(e, f->header) {
        if (!strcmp(e->string, "__metadata__")) {
            if (f->meta ? fail(err, errlen, file, "__metadata__ appears twice") : check_metadata(e, file, err, errlen))
                return -1;
            f->meta = e;
            continue;
        }
        snn_st_tensor *t = &f->tensors[f->count];
        if (!e->string[0] || has_control(e->string))
            return fail(err, errlen, file, "a tensor name is empty or holds control characters");
        uint64_t range[2] = {0, 0};
        if (parse_entry(e, t, range, file, err, errlen))
            return -1;
        t->name = e->string;
        (*spans)[f->count] = (span){range[0], range[1], t->name, f->count};
        f->count++;
    }
    return 0;
}

static void point_tensors(snn_st_file *f, const span *s, const uint8_t *data)
{
    for (int i = 0; i < f->count; i++)
        f->tensors[s[i].tensor].data = data + s[i].begin;
}

static int parse_buffer(snn_st_file *f, const uint8_t *buf, size_t len, const char *file, char *err,
                        size_t errlen)
{
    if (len < 8)
        return too_short(err, errlen, file, len, "");
    uint64_t n = get_u64le(buf);
    span *spans = NULL;
    int rc = check_header_length(n, len, file, err, errlen);
    if (!rc)
        rc = parse_json(f, (const char *)buf + 8, n, &spans, file, err, errlen);
    if (!rc)
        rc = check_spans(spans, f->count, len - 8 - n, file, err, errlen);
    if (!rc)
        point_tensors(f, spans, buf + 8 + n);
    free(spans);
    return rc;
}

static snn_st_file *new_file(const char *name, char *err, size_t errlen)
{
    snn_st_file *f = calloc(1, sizeof(*f));
    if (!f || !(f->name = strdup(name))) {
        free(f);
        fail(err, errlen, name, "out of memory");
        return NULL;
    }
    return f;
}

snn_st_file *snn_st_parse(const uint8_t *buf, size_t len, const char *name, char *err, size_t errlen)
{
    snn_st_file *f = new_file(name, err, errlen);
    if (f && parse_buffer(f, buf, len, name, err, errlen)) {
        snn_st_close(f);
        return NULL;
    }
    return f;
}

/* ---- reading a file: the header length, the header, then the data ------------ */

enum { TAIL_COUNTED = 65536 }; /* bytes after a pipe's data counted before giving up */

/* A pipe's data: as much as its header's ranges declare (data_len), read
 * as it comes, then its end. A pipe that ends short gets the message a
 * file of that length gets from check_spans. */
static int read_stream_data(snn_st_file *f, int fd, uint64_t data_len, span *spans, const char *file,
                            char *err, size_t errlen)
{
    size_t have = 0, cap = 0, got;
    if (!(f->owned = malloc(1))) /* the tensors point into it, even with no data */
        return fail(err, errlen, file, "out of memory");
    while (have < data_len) {
        size_t grown = cap ? 2 * cap : (size_t)1 << 16;
        cap = grown < data_len ? grown : (size_t)data_len;
        uint8_t *more = realloc(f->owned, cap);
        if (!more)
            return fail(err, errlen, file, "out of memory reading its data (%zu bytes)", cap);
        f->owned = more;
        int e = snn_input_read(fd, f->owned + have, cap - have, &got);
        if (e)
            return fail(err, errlen, file, "cannot read: %s", strerror(e));
        have += got;
        if (have < cap) { /* the end: a range runs past what came */
            check_spans(spans, f->count, have, file, err, errlen);
            return -1;
        }
    }
    /* Nothing may follow; what does is counted up to a bound (`yes` never ends). */
    uint8_t probe[4096];
    uint64_t extra = 0;
    do {
        int e = snn_input_read(fd, probe, sizeof probe, &got);
        if (e)
            return fail(err, errlen, file, "cannot read: %s", strerror(e));
        extra += got;
    } while (got == sizeof probe && extra <= TAIL_COUNTED);
    if (extra > TAIL_COUNTED)
        return unclaimed_tail(err, errlen, file, "more than ", TAIL_COUNTED);
    return extra ? unclaimed_tail(err, errlen, file, "", extra) : 0;
}

static int read_sized_data(snn_st_file *f, int fd, uint64_t data_len, const char *file, char *err,
                           size_t errlen)
{
    size_t got;
    if (!(f->owned = malloc(data_len ? data_len : 1)))
        return fail(err, errlen, file, "out of memory for its %llu bytes of data", (unsigned long long)data_len);
    int e = snn_input_read(fd, f->owned, data_len, &got);
    if (e)
        return fail(err, errlen, file, "cannot read: %s", strerror(e));
    if (got < data_len)
        return fail(err, errlen, file, "cannot read: the file ends %llu bytes short of its size (changed while read?)",
                    (unsigned long long)(data_len - got));
    return 0;
}

/* Each stage is checked before the next is read, so that a huge or endless
 * input is refused at once. A regular file's data is its size less the
 * header's (a /proc file's size, 0, is not believed); a pipe's is what the
 * header's ranges declare, and nothing may follow it. */
static int read_staged(snn_st_file *f, int fd, const struct stat *st, const char *file, char *err, size_t errlen)
{
    uint8_t head[8];
    size_t got;
    int e = snn_input_read(fd, head, 8, &got);
    if (e)
        return fail(err, errlen, file, "cannot read: %s", strerror(e));
    if (got < 8)
        return too_short(err, errlen, file, got, got ? "" : snn_input_empty_hint(st));
    int sized = S_ISREG(st->st_mode) && st->st_size >= 8;
    uint64_t n = get_u64le(head), size = sized ? (uint64_t)st->st_size : UINT64_MAX;
    if (check_header_length(n, size, file, err, errlen))
        return -1;
    char *json = malloc(n ? n : 1);
    if (!json)
        return fail(err, errlen, file, "out of memory for its %llu-byte header", (unsigned long long)n);
    span *spans = NULL;
    int rc;
    if ((e = snn_input_read(fd, json, n, &got)))
        rc = fail(err, errlen, file, "cannot read: %s", strerror(e));
    else if (got < n) /* a pipe, or a file cut since its fstat */
        rc = check_header_length(n, 8 + got, file, err, errlen);
    else
        rc = parse_json(f, json, n, &spans, file, err, errlen);
    free(json);
    uint64_t declared = 0;
    for (int i = 0; !rc && i < f->count; i++)
        declared = spans[i].end > declared ? spans[i].end : declared;
    if (!rc)
        rc = check_spans(spans, f->count, sized ? size - 8 - n : declared, file, err, errlen);
    if (!rc)
        rc = sized ? read_sized_data(f, fd, size - 8 - n, file, err, errlen)
                   : read_stream_data(f, fd, declared, spans, file, err, errlen);
    if (!rc)
        point_tensors(f, spans, f->owned);
    free(spans);
    return rc;
}

snn_st_file *snn_st_read(const char *path, char *err, size_t errlen)
{
    struct stat st;
    int fd = snn_input_open(path, &st, err, errlen);
    if (fd < 0)
        return NULL;
    snn_st_file *f = new_file(path, err, errlen);
    if (f && read_staged(f, fd, &st, path, err, errlen)) {
        snn_st_close(f);
        f = NULL;
    }
    close(fd);
    return f;
}

void snn_st_close(snn_st_file *f)
{
    if (!f)
        return;
    cJSON_Delete(f->header);
    free(f->name);
    free(f->tensors);
    free(f->owned);
    free(f);
}

int snn_st_count(const snn_st_file *f) { return f->count; }
const snn_st_tensor *snn_st_at(const snn_st_file *f, int i) { return &f->tensors[i]; }

const snn_st_tensor *snn_st_find(const snn_st_file *f, const char *name)
{
    for (int i = 0; i < f->count; i++)
        if (!strcmp(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

const char *snn_st_meta_get(const snn_st_file *f, const char *key)
{
    const cJSON *v = f->meta ? cJSON_GetObjectItemCaseSensitive(f->meta, key) : NULL;
    return v ? v->valuestring : NULL;
}

const snn_st_tensor *snn_st_expect(const snn_st_file *f, const char *name, snn_st_dtype dtype, int rank,
                                   const int64_t *shape, char *err, size_t errlen)
{
    const snn_st_tensor *t = snn_st_find(f, name);
    if (!t) {
        fail(err, errlen, f->name, "no tensor '%s'", name);
        return NULL;
    }
    if (t->dtype != dtype) {
        fail(err, errlen, f->name, "tensor '%s' is %s, not %s", name, dtypes[t->dtype].name, dtypes[dtype].name);
        return NULL;
    }
    if (t->rank != rank || memcmp(t->shape, shape, rank * sizeof(*shape))) {
        char have[128], want[128];
        shape_text(have, sizeof(have), t->rank, t->shape);
        shape_text(want, sizeof(want), rank, shape);
        fail(err, errlen, f->name, "tensor '%s' has shape %s, not %s", name, have, want);
        return NULL;
    }
    return t;
}
