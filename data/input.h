/* Opening and reading the readers' input files (IDX, safetensors, images).
 *
 * open() of a FIFO waits until a writer opens it, and no signal of ours
 * ends that wait; opened without blocking, a FIFO with no writer reads as
 * empty instead. */
#ifndef SNN_INPUT_H
#define SNN_INPUT_H

#include <stddef.h>
#include <sys/stat.h>

/* Opens path for reading without waiting for a writer (O_NONBLOCK, kept:
 * snn_input_read waits in poll) and fstats it into st. Returns the
 * descriptor, or -1 with "PATH: cannot open: REASON" in err. */
int snn_input_open(const char *path, struct stat *st, char *err, size_t errlen);

/* Reads until n bytes or the end of the file (*got < n only there); 0, or
 * the errno of a failed read: EINTR when a signal came while it waited for
 * a pipe's data. */
int snn_input_read(int fd, void *dst, size_t n, size_t *got);

/* Why an input may have read as empty: " (a FIFO or pipe with no writer?)"
 * for those, "" for other files. */
const char *snn_input_empty_hint(const struct stat *st);

#endif
