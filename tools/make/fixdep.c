/* fixdep DEPFILE CONFIG_DIR: rewrites the compiler's dependency file of one object so that it depends on
 * the configuration symbols its sources name, not on the whole generated/config.h (Linux's
 * scripts/basic/fixdep.c does this for Kbuild). Every dependency but config.h is kept; every file is
 * scanned for CONFIG_ names, and each name becomes $(wildcard CONFIG_DIR/a/b.h), the file that
 * tools/make/kconfig.py (kconfiglib's sync_deps) touches when symbol A_B changes. A derived constant,
 * CONFIG_X_VALUE, _NONZERO or _ABSOLUTE (tools/make/kconfig.py), also depends on its symbol X.
 * Changing the learning rate then rebuilds what names it, not every object.
 *
 * A file that pastes names together (CONFIG_##x) hides which it reads: its object keeps depending on
 * config.h whole.
 *
 * Reads gcc's and nvcc's forms: "target: a b \" continued, then "a:" lines (-MP). Paths with spaces are
 * not supported (the tree has none). One message and exit 1 on any failure. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...)
{
    va_list ap;
    fputs("fixdep: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap && !(buf = realloc(buf, (cap *= 2) + 1)))
            break;
    if (!buf || ferror(f))
        die("cannot read %s", path);
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

/* The symbols seen so far, each once. */
static char **symbols;
static size_t nsymbols, capsymbols;

static void add_symbol(const char *name, size_t len)
{
    for (size_t i = 0; i < nsymbols; i++)
        if (strlen(symbols[i]) == len && !memcmp(symbols[i], name, len))
            return;
    if (nsymbols == capsymbols && !(symbols = realloc(symbols, (capsymbols = capsymbols * 2 + 64) * sizeof(*symbols))))
        die("out of memory");
    if (!(symbols[nsymbols] = strndup(name, len)))
        die("out of memory");
    nsymbols++;
}

static int ends_with(const char *s, size_t len, const char *suffix)
{
    size_t k = strlen(suffix);
    return len > k && !memcmp(s + len - k, suffix, k);
}

static int pastes; /* a dependency builds CONFIG_ names with ## */

/* Every CONFIG_NAME in the file, and the symbol a derived constant stands for. */
static void scan(const char *path)
{
    size_t len;
    char *text = read_all(path, &len);
    if (!text)
        die("cannot open %s, a dependency", path);
    static const char *const derived[] = {"_VALUE", "_NONZERO", "_ABSOLUTE"};
    for (char *p = text; (p = strstr(p, "CONFIG_")); p += 7) {
        if (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_'))
            continue; /* inside a longer name */
        const char *name = p + 7;
        size_t n = 0;
        if (name[0] == '#' && name[1] == '#')
            pastes = 1;
        while (isalnum((unsigned char)name[n]) || name[n] == '_')
            n++;
        if (!n)
            continue;
        add_symbol(name, n);
        for (size_t i = 0; i < sizeof(derived) / sizeof(derived[0]); i++)
            if (ends_with(name, n, derived[i]))
                add_symbol(name, n - strlen(derived[i]));
    }
    free(text);
}

/* The symbol's file under dir: A_B_C -> dir/a/b/c.h, as kconfiglib's sync_deps names it. */
static void print_symbol_file(FILE *out, const char *dir, const char *name)
{
    fprintf(out, " \\\n  $(wildcard %s/", dir);
    for (const char *c = name; *c; c++)
        fputc(*c == '_' ? '/' : tolower((unsigned char)*c), out);
    fputs(".h)", out);
}

static int is_config_h(const char *path)
{
    const char *tail = "include/generated/config.h";
    size_t n = strlen(path), k = strlen(tail);
    return n >= k && !strcmp(path + n - k, tail);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        die("usage: fixdep DEPFILE CONFIG_DIR");
    const char *depfile = argv[1], *dir = argv[2];
    size_t len;
    char *text = read_all(depfile, &len);
    if (!text)
        die("cannot open %s", depfile);
    /* The first rule: up to the first newline not escaped by a backslash. */
    char *colon = strchr(text, ':'), *end = colon;
    if (!colon)
        die("%s: no rule", depfile);
    while (*end && !(*end == '\n' && end[-1] != '\\'))
        end++;
    *colon = 0;
    *end = 0;
    char *target = text;
    for (char *t = target + strlen(target); t > target && isspace((unsigned char)t[-1]);)
        *--t = 0;

    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.fixdep", depfile) >= sizeof(tmp))
        die("%s: path too long", depfile);
    FILE *out = fopen(tmp, "w");
    if (!out)
        die("cannot write %s", tmp);
    fprintf(out, "%s:", target);
    char **deps = NULL;
    size_t ndeps = 0;
    const char *config_h = NULL;
    for (char *tok = strtok(colon + 1, " \t\\\n"); tok; tok = strtok(NULL, " \t\\\n")) {
        if (is_config_h(tok)) {
            config_h = tok;
            continue;
        }
        scan(tok);
        fprintf(out, " \\\n  %s", tok);
        if (!(deps = realloc(deps, (ndeps + 1) * sizeof(*deps))))
            die("out of memory");
        deps[ndeps++] = tok;
    }
    if (pastes && config_h)
        fprintf(out, " \\\n  %s", config_h);
    for (size_t i = 0; i < nsymbols; i++)
        print_symbol_file(out, dir, symbols[i]);
    fputs("\n\n", out);
    for (size_t i = 1; i < ndeps; i++) /* as -MP: a header removed later breaks no build */
        fprintf(out, "%s:\n\n", deps[i]);
    if (fclose(out) != 0 || rename(tmp, depfile) != 0)
        die("cannot write %s", depfile);
    return 0;
}
