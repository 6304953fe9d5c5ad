/* test_safetensors: the safetensors container on its own.
 *   test_safetensors              round trips: written, read back bit for bit,
 *                                 written again byte for byte; prints ok lines
 *   test_safetensors FILE...      reads each file: "ok NAME: N tensors" or
 *                                 the reader's message on stderr and exit 1
 * Driven by test_safetensors.sh, which writes the malformed files. */
#include "data/safetensors.h"

#include <stdlib.h>
#include <string.h>

#include "tests/test_util.h"

static int read_files(int argc, char **argv)
{
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        char err[1024];
        snn_st_file *f = snn_st_read(argv[i], err, sizeof(err));
        if (!f) {
            fflush(stdout);
            fprintf(stderr, "mnist: error: %s\n", err);
            failed = 1;
            continue;
        }
        printf("ok %s: %d tensors\n", argv[i], snn_st_count(f));
        snn_st_close(f);
    }
    return failed;
}

/* Bytes of a stream written to memory. */
static uint8_t *written(const snn_st_tensor *t, int n, const snn_st_meta *meta, int nmeta, size_t *len)
{
    char *buf = NULL, err[512];
    FILE *f = open_memstream(&buf, len);
    if (!f || snn_st_write(f, "memory", t, n, meta, nmeta, err, sizeof(err)) || fclose(f)) {
        printf("not ok - safetensors write: %s\n", f ? err : "open_memstream failed");
        exit(0);
    }
    return (uint8_t *)buf;
}

static void round_trip(void)
{
    enum { A = 37, B = 11 };
    float w[A * B], scalar = -0.0f;
    int32_t ids[13];
    uint64_t state[4] = {0, 1, UINT64_MAX, 0x8000000000000001ull};
    uint8_t odd[7] = {1, 2, 3, 4, 5, 6, 255};
    for (int i = 0; i < A * B; i++)
        w[i] = rng_uniform() * 1e-30f; /* tiny values: no decimal round trip could keep them */
    for (int i = 0; i < 13; i++)
        ids[i] = (int32_t)rng_next();
    const snn_st_tensor t[] = {
        {"layer.weight", SNN_ST_F32, 2, {A, B}, w}, {"odd bytes", SNN_ST_U8, 1, {7}, odd},
        {"ids", SNN_ST_I32, 1, {13}, ids},           {"rng", SNN_ST_U64, 1, {4}, state},
        {"scalar", SNN_ST_F32, 0, {0}, &scalar},     {"empty", SNN_ST_F32, 2, {0, 5}, NULL},
    };
    const int n = sizeof(t) / sizeof(t[0]);
    const snn_st_meta meta[] = {{"format", "test"}, {"quote\"and\\slash", "line\nbreak \xc3\xa9"}};
    size_t len, len2;
    uint8_t *bytes = written(t, n, meta, 2, &len);
    char err[512], why[256] = "";
    snn_st_file *f = snn_st_parse(bytes, len, "memory", err, sizeof(err));
    if (!f) {
        printf("not ok - safetensors round trip: %s\n", err);
        free(bytes);
        return;
    }
    if ((8 + *(uint64_t *)bytes) % 8)
        set_why(why, "the data starts at byte %llu, not a multiple of 8", (unsigned long long)(8 + *(uint64_t *)bytes));
    if (snn_st_count(f) != n)
        set_why(why, "%d tensors read back, %d written", snn_st_count(f), n);
    for (int i = 0; i < n && i < snn_st_count(f); i++) {
        const snn_st_tensor *r = snn_st_at(f, i);
        size_t bytes_i = snn_st_bytes(&t[i]);
        if (strcmp(r->name, t[i].name) || r->dtype != t[i].dtype || r->rank != t[i].rank ||
            memcmp(r->shape, t[i].shape, t[i].rank * sizeof(int64_t)) || snn_st_bytes(r) != bytes_i ||
            (bytes_i && memcmp(r->data, t[i].data, bytes_i)))
            set_why(why, "tensor %d ('%s') differs after the round trip", i, t[i].name);
    }
    for (int i = 0; i < 2; i++) {
        const char *v = snn_st_meta_get(f, meta[i].key);
        if (!v || strcmp(v, meta[i].value))
            set_why(why, "metadata '%s' read back as '%s'", meta[i].key, v ? v : "(missing)");
    }
    if (!snn_st_expect(f, "layer.weight", SNN_ST_F32, 2, (int64_t[]){A, B}, err, sizeof(err)))
        set_why(why, "snn_st_expect refused a matching tensor: %s", err);
    if (snn_st_expect(f, "layer.weight", SNN_ST_F32, 2, (int64_t[]){B, A}, err, sizeof(err)) ||
        !strstr(err, "has shape [37, 11], not [11, 37]"))
        set_why(why, "snn_st_expect on a wrong shape said '%s'", err);
    if (snn_st_expect(f, "ids", SNN_ST_F32, 1, (int64_t[]){13}, err, sizeof(err)) || !strstr(err, "is I32, not F32"))
        set_why(why, "snn_st_expect on a wrong dtype said '%s'", err);
    /* Written again from what was read: the same bytes. */
    snn_st_tensor again[sizeof(t) / sizeof(t[0])];
    for (int i = 0; i < n; i++)
        again[i] = *snn_st_at(f, i);
    uint8_t *bytes2 = written(again, n, meta, 2, &len2);
    if (len2 != len || memcmp(bytes, bytes2, len))
        set_why(why, "written again from the file read, the bytes differ");
    if (why[0])
        printf("not ok - safetensors round trip: %s\n", why);
    else
        printf("ok - safetensors round trip: 6 tensors (F32, U8, I32, U64, a scalar, an empty one) and escaped "
               "metadata read back bit for bit, and written again byte for byte\n");
    snn_st_close(f);
    free(bytes);
    free(bytes2);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        return read_files(argc, argv);
    round_trip();
    return 0;
}
