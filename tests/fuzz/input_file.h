/* The fuzz targets' input as a file the readers can open by path: one temporary per process, unlinked at
 * once and reopened through /proc/self/fd, rewritten for every input. */
#ifndef SNN_FUZZ_INPUT_FILE_H
#define SNN_FUZZ_INPUT_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Writes data as the file's whole content; returns its path. name goes into the temporary's name. */
static const char *fuzz_input_file(const char *name, const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char path[32];
    if (fd < 0) {
        const char *dir = getenv("TMPDIR");
        char tmpl[4096];
        snprintf(tmpl, sizeof tmpl, "%s/snn-fuzz-%s.XXXXXX", dir && *dir ? dir : "/tmp", name);
        if ((fd = mkstemp(tmpl)) < 0) {
            perror(tmpl);
            abort();
        }
        unlink(tmpl);
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    /* Write, then cut to size: ext4 flushes a file truncated to 0 when it
     * is closed, which would make every input wait for the disk. */
    if (pwrite(fd, data, size, 0) != (ssize_t)size || ftruncate(fd, (off_t)size)) {
        perror("writing the fuzz input");
        abort();
    }
    return path;
}

#endif
