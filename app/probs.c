#include "app/probs.h"

#include <stdio.h>

#include "app/evaluate.h"
#include "snn_config.h"

SNN_STATIC_ASSERT(sizeof(float) == 4 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
                  "the arrays are written as the host's floats, declared little-endian float32");

/* The .npy header (format 1.0) of a little-endian float32 array of rows x SNN_CLASSES: the magic, the
 * version, the dictionary's length, the dictionary padded with spaces and a newline so that the data starts
 * 64-byte aligned. */
static void write_header(FILE *f, int rows)
{
    char dict[128];
    int n = snprintf(dict, sizeof(dict), "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }",
                     rows, SNN_CLASSES);
    const int total = (10 + n + 1 + 63) / 64 * 64; /* magic 6, version 2, length 2; the newline */
    while (10 + n + 1 < total)
        dict[n++] = ' ';
    dict[n++] = '\n';
    const unsigned char lead[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff), (unsigned char)(n >> 8)};
    fwrite(lead, 1, sizeof(lead), f);
    fwrite(dict, 1, (size_t)n, f);
}

void snn_write_probabilities(snn_out *out, const float *logits, int rows)
{
    FILE *f = snn_out_stream(out);
    write_header(f, rows);
    for (int i = 0; i < rows; i++) {
        double p[SNN_CLASSES];
        float p32[SNN_CLASSES];
        snn_class_probabilities(logits + (size_t)i * SNN_CLASSES, p);
        for (int c = 0; c < SNN_CLASSES; c++)
            p32[c] = (float)p[c];
        fwrite(p32, sizeof(float), SNN_CLASSES, f); /* a write error is snn_out_commit's to report */
    }
}

void snn_probs_path(char *path, size_t len, const char *prefix, int validation)
{
    snprintf(path, len, "%s.%s.npy", prefix, validation ? "validation" : "test");
}
