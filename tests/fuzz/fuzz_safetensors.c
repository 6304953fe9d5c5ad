/* libFuzzer target for the safetensors reader (data/safetensors.c), built
 * with ASan and UBSan by tests/host/test_fuzz.sh. The input is copied into a
 * buffer of exactly its size, so a read past it is an ASan report; every
 * tensor the parser accepts is read whole and looked up by name, so a range
 * it let through that lies outside the buffer is one too. Bad input must only
 * give NULL and a message.
 *
 * snn_st_read reads a file in stages (the header length, the header, the
 * data), on paths of its own: each input is also written to a temporary
 * file (unlinked at once, reopened through /proc/self/fd, as fuzz_idx.c
 * does) and to a pipe, and read from both. The file must give the parser's
 * verdict, message and tensors exactly; the pipe, whose length is known
 * only at its end, the same verdict and tensors. */
#include "data/safetensors.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/input_file.h"

/* The input read back from a pipe whose writer has closed; a pipe that
 * cannot hold the input whole (over its capacity) is skipped: *read_it 0. */
static snn_st_file *read_pipe(const uint8_t *data, size_t size, int *read_it)
{
    int p[2];
    char path[32], err[512];
    if (pipe(p) || fcntl(p[1], F_SETFL, O_NONBLOCK)) {
        perror("fuzz_safetensors: a pipe");
        abort();
    }
    *read_it = !size || write(p[1], data, size) == (ssize_t)size;
    close(p[1]);
    snprintf(path, sizeof path, "/proc/self/fd/%d", p[0]);
    snn_st_file *f = *read_it ? snn_st_read(path, err, sizeof err) : NULL;
    close(p[0]);
    return f;
}

/* Both refused, or both accepted with the same tensors, byte for byte. */
static void same(const snn_st_file *a, const snn_st_file *b)
{
    if (!a != !b)
        abort(); /* one reading accepted what the other refused */
    if (!a)
        return;
    if (snn_st_count(a) != snn_st_count(b))
        abort();
    for (int i = 0; i < snn_st_count(a); i++) {
        const snn_st_tensor *x = snn_st_at(a, i), *y = snn_st_at(b, i);
        size_t bytes = snn_st_bytes(x);
        if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->rank != y->rank ||
            memcmp(x->shape, y->shape, x->rank * sizeof(*x->shape)) || snn_st_bytes(y) != bytes ||
            (bytes && memcmp(x->data, y->data, bytes)))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    const char *file_path = fuzz_input_file("st", data, size);
    char err[512] = "", file_err[512] = "";
    snn_st_file *f = snn_st_parse(copy, size, file_path, err, sizeof(err));
    if (f) {
        volatile uint8_t sum = 0;
        for (int i = 0; i < snn_st_count(f); i++) {
            const snn_st_tensor *t = snn_st_at(f, i);
            size_t bytes = snn_st_bytes(t);
            for (size_t k = 0; k < bytes; k++)
                sum += ((const uint8_t *)t->data)[k];
            if (snn_st_find(f, t->name) != t)
                abort(); /* names are unique: the lookup finds this one */
        }
        (void)snn_st_meta_get(f, "format");
    } else if (!err[0]) {
        abort(); /* a refusal always says why */
    }

    snn_st_file *from_file = snn_st_read(file_path, file_err, sizeof(file_err));
    same(f, from_file);
    if (!f && strcmp(err, file_err))
        abort(); /* a file is refused as its bytes are */
    int piped;
    snn_st_file *from_pipe = read_pipe(data, size, &piped);
    if (piped)
        same(f, from_pipe);
    snn_st_close(from_pipe);
    snn_st_close(from_file);
    snn_st_close(f);
    free(copy);
    return 0;
}
