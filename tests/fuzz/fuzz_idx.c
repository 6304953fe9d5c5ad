/* libFuzzer target for the IDX reader (data/idx.c), built with ASan and UBSan
 * by tests/host/test_fuzz.sh. The reader opens files by path (gzip or plain,
 * told apart by their first bytes), so each input is written to
 * one temporary file, unlinked as soon as it is created and reopened through
 * /proc/self/fd (nothing is left behind, even after a crash). Each input goes
 * through all three entry points: the count in its header, at most MAX_COUNT
 * so that memory stays small, becomes the expected count, and each destination
 * buffer is exactly as large as the reader is told, so that a write or read
 * past it is an ASan report. zlib is not instrumented, so a gzip input would
 * look like its plain twin to libFuzzer, which would drop it: gzip inputs get
 * a branch of their own. Bad input must only ever give -1 and a message; the
 * target aborts only where a sanitizer finds a bug. */
#include "data/idx.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/fuzz/input_file.h"

#define MAX_COUNT 64 /* 64 images of 28x28: 50 KB */

static const char *path; /* the input as a file (input_file.h) */

/* The file's own count where its header reads, at most MAX_COUNT; else 2. */
static uint32_t expected_count(uint32_t magic)
{
    uint32_t n;
    char err[256];
    if (snn_idx_read_count(path, magic, &n, err, sizeof err))
        return 2;
    return n < MAX_COUNT ? n : MAX_COUNT;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    static volatile unsigned gzip_inputs;
    if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b)
        gzip_inputs++;
    path = fuzz_input_file("idx", data, size);

    uint32_t n = expected_count(SNN_IDX_MAGIC_IMAGES);
    uint8_t *buf = malloc((size_t)n * 28 * 28);
    snn_idx_read_images(path, buf, n, 28, 28, err, sizeof err);
    free(buf);

    n = expected_count(SNN_IDX_MAGIC_LABELS);
    buf = malloc(n);
    snn_idx_read_labels(path, buf, n, 10, err, sizeof err);
    free(buf);
    return 0;
}
