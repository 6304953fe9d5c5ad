/* IDX files (LeCun's MNIST format), raw or gzip-compressed.
 *
 * A file is read to its end, which must come right after the last item: a
 * gzip file is one or more whole members (each one's CRC-32 and length
 * checked) with nothing after the last, and the bytes they hold are read
 * as a raw file's would be.
 *
 * Every function returns 0 on success, or -1 with a one-line message in err
 * that starts with the path and says exactly what is wrong. */
#ifndef SNN_IDX_H
#define SNN_IDX_H

#include <stddef.h>
#include <stdint.h>

#define SNN_IDX_MAGIC_IMAGES 0x00000803u /* ubyte, 3 dims: count, rows, cols */
#define SNN_IDX_MAGIC_LABELS 0x00000801u /* ubyte, 1 dim: count */

/* Reads only the magic and the item count (first 8 bytes), checking the magic. */
int snn_idx_read_count(const char *path, uint32_t magic, uint32_t *count, char *err, size_t errlen);

/* Reads expect_count images of rows x cols bytes into dst. */
int snn_idx_read_images(const char *path, uint8_t *dst, uint32_t expect_count, uint32_t rows, uint32_t cols,
                        char *err, size_t errlen);

/* Reads expect_count labels into dst; each must be below classes. */
int snn_idx_read_labels(const char *path, uint8_t *dst, uint32_t expect_count, uint32_t classes, char *err,
                        size_t errlen);

#endif
