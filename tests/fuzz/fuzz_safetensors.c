/* libFuzzer target for the safetensors reader (data/safetensors.c), built
 * with ASan and UBSan by tests/host/test_fuzz.sh. The input is copied into a
 * buffer of exactly its size, so a read past it is an ASan report; every
 * tensor the parser accepts is read whole and looked up by name, so a range
 * it let through that lies outside the buffer is one too. Bad input must only
 * give NULL and a message. */
#include "data/safetensors.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    char err[512] = "";
    snn_st_file *f = snn_st_parse(copy, size, "input", err, sizeof(err));
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
        snn_st_close(f);
    } else if (!err[0]) {
        abort(); /* a refusal always says why */
    }
    free(copy);
    return 0;
}
