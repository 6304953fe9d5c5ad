/* safetensors files (Hugging Face's weight format): an 8-byte little-endian
 * header length N, N bytes of JSON naming each tensor's dtype, shape and
 * byte range, then the tensors' bytes, little-endian, back to back. The JSON
 * is written and parsed by cJSON; the container is this file's.
 *
 * Functions that can fail return 0 (or a pointer) on success, or -1 (NULL)
 * with a one-line message in err that starts with the file's name and says
 * exactly what is wrong. Little-endian hosts only (x86-64, AArch64). */
#ifndef SNN_SAFETENSORS_H
#define SNN_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SNN_ST_MAX_RANK 8
#define SNN_ST_MAX_HEADER 100000000 /* bytes, the reference implementation's limit */

/* The dtypes of the specification; the engine writes F32, I32 and U64. */
typedef enum {
    SNN_ST_BOOL, SNN_ST_U8, SNN_ST_I8, SNN_ST_F8_E5M2, SNN_ST_F8_E4M3, SNN_ST_I16, SNN_ST_U16, SNN_ST_F16,
    SNN_ST_BF16, SNN_ST_I32, SNN_ST_U32, SNN_ST_F32, SNN_ST_F64, SNN_ST_I64, SNN_ST_U64, SNN_ST_DTYPES
} snn_st_dtype;

typedef struct {
    const char *name;
    snn_st_dtype dtype;
    int rank;
    int64_t shape[SNN_ST_MAX_RANK];
    const void *data; /* rank 0 is a scalar; a zero in shape, no bytes */
} snn_st_tensor;

typedef struct {
    const char *key, *value; /* the specification's __metadata__: strings only */
} snn_st_meta;

/* Writes the tensors in the order given (their bytes in that order) and the
 * metadata; the header is padded with spaces to a multiple of 8 bytes so the
 * data starts aligned. Write errors are left to the stream's owner to see. */
int snn_st_write(FILE *f, const char *name, const snn_st_tensor *tensors, int count, const snn_st_meta *meta,
                 int meta_count, char *err, size_t errlen);

typedef struct snn_st_file snn_st_file;

/* Parses and validates buf (len bytes; kept, not copied, until snn_st_close):
 * the header length within the file and SNN_ST_MAX_HEADER, the header one
 * JSON object, every tensor's entry exactly {dtype, shape, data_offsets}
 * with a known dtype, a shape whose bytes are its byte range's length,
 * ranges that tile the data from 0 to its end without gap or overlap, names
 * unique, __metadata__ an object of strings with unique keys; and, where
 * cJSON is lenient, the text UTF-8, no \u0000 escape, numbers plain whole
 * numbers. name is used in messages. */
snn_st_file *snn_st_parse(const uint8_t *buf, size_t len, const char *name, char *err, size_t errlen);
/* Reads the file as snn_st_parse would check its bytes, in stages, each
 * checked before the next is read: the header length, the header (against
 * the data's length: a regular file's size less the header's, or for a
 * pipe what the header's ranges declare), then the data alone, which
 * snn_st_close frees; nothing may follow a pipe's data. A FIFO with no
 * writer reads as empty (data/input.h). */
snn_st_file *snn_st_read(const char *path, char *err, size_t errlen);
void snn_st_close(snn_st_file *f);

int snn_st_count(const snn_st_file *f);
const snn_st_tensor *snn_st_at(const snn_st_file *f, int i); /* in the header's order */
const snn_st_tensor *snn_st_find(const snn_st_file *f, const char *name);
const char *snn_st_meta_get(const snn_st_file *f, const char *key); /* NULL when absent */

/* The tensor name with exactly this dtype and shape, or NULL and err naming
 * what differs (missing, dtype, shape). */
const snn_st_tensor *snn_st_expect(const snn_st_file *f, const char *name, snn_st_dtype dtype, int rank,
                                   const int64_t *shape, char *err, size_t errlen);

size_t snn_st_bytes(const snn_st_tensor *t); /* elements x dtype size */

#endif
