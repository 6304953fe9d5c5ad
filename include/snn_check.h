/* Errors: one clear message, file and line, a hint, and a non-zero exit. */
#ifndef SNN_CHECK_H
#define SNN_CHECK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Prints "mnist: error: <message>" (the name as snn_check_name set it; and "  at file:line" when file is set) and exits 1. */
__attribute__((noreturn, format(printf, 3, 4))) void snn_die_at(const char *file, int line, const char *fmt, ...);
#define snn_die(...) snn_die_at(NULL, 0, __VA_ARGS__)
/* The name the messages start with, "mnist" until set ("mnist: rank 1" in a data-parallel rank). */
void snn_check_name(const char *name);

/* A libc call that returns NULL or -1 on failure (errno set). */
#define SNN_CHECK_SYS(cond, what) \
    do { if (!(cond)) snn_die_sys(__FILE__, __LINE__, what); } while (0)
__attribute__((noreturn)) void snn_die_sys(const char *file, int line, const char *what);

/* Checked malloc for host-side bookkeeping outside the arena. */
void *snn_xmalloc(size_t bytes, const char *what);

#ifdef __cplusplus
}
#endif
#endif
