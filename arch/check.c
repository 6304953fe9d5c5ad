#include "snn_check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char who[64] = "mnist";

void snn_check_name(const char *name) { snprintf(who, sizeof(who), "%s", name); }

void snn_die_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s: error: ", who);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (file)
        fprintf(stderr, "  at %s:%d\n", file, line);
    exit(1);
}

void snn_die_sys(const char *file, int line, const char *what)
{
    snn_die_at(file, line, "%s: %s", what, strerror(errno));
}

void *snn_xmalloc(size_t bytes, const char *what)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        snn_die("out of host memory allocating %zu bytes for %s", bytes, what);
    return p;
}
