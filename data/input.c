#include "data/input.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int snn_input_open(const char *path, struct stat *st, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0 && fstat(fd, st) == 0)
        return fd;
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

int snn_input_read(int fd, void *dst, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n) {
        size_t chunk = n - *got < (size_t)1 << 30 ? n - *got : (size_t)1 << 30;
        ssize_t r = read(fd, (uint8_t *)dst + *got, chunk);
        /* The descriptor stays non-blocking: a FIFO with no writer reads as its end at once, and one whose
         * writer has sent nothing yet is waited for in poll(), which a signal ends (EINTR): the stop
         * handlers ask for restarts, and a blocking read() would wait past them. */
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, -1) < 0)
                return errno;
            continue;
        }
        if (r < 0)
            return errno;
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    return 0;
}

const char *snn_input_empty_hint(const struct stat *st)
{
    return S_ISFIFO(st->st_mode) ? " (a FIFO or pipe with no writer?)" : "";
}
