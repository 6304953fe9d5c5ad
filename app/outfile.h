/* The program's output files. A regular file (or a name not there yet) is
 * written to a temporary beside it, fsynced and renamed into place, then its
 * directory is fsynced: readers see the old file or the new one, whole. A
 * device, FIFO or terminal (/dev/null, a pipe, /dev/stdout) is written in
 * place. A dump directory is staged whole under a temporary name the same
 * way. No temporary outlives the process: exit, a fatal error or a signal
 * removes it (SIGKILL aside). Every failure is one message and exit 1. */
#ifndef SNN_OUTFILE_H
#define SNN_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct snn_out snn_out;

/* Opens path for writing, or dies saying why (a missing directory, no
 * permission): call it before the work whose result it will hold. */
snn_out *snn_out_open(const char *path);
FILE *snn_out_stream(snn_out *o);
/* Puts the file in place (or closes a special file), or dies. Frees o. */
void snn_out_commit(snn_out *o);
/* Drops what was written: the temporary is removed, the old file kept. Frees o. */
void snn_out_abandon(snn_out *o);

/* A directory written whole: its files go into a staging directory, which
 * commit renames to dir (replacing an earlier dump there). */
typedef struct snn_out_dir snn_out_dir;
snn_out_dir *snn_out_dir_open(const char *dir, const char *marker);
/* Writes one whole file into the staged directory. */
void snn_out_dir_write(snn_out_dir *d, const char *name, const void *data, size_t bytes);
/* dir/name inside the staging directory, for a file written through snn_out_open. */
void snn_out_dir_path(const snn_out_dir *d, const char *name, char *path, size_t len);
void snn_out_dir_commit(snn_out_dir *d);
/* Removes the staging directory; dir stays as it was. Frees d. */
void snn_out_dir_abandon(snn_out_dir *d);

/* Removes every temporary file and staging directory still open; safe in a
 * signal handler. */
void snn_out_remove_temporaries(void);

#endif
