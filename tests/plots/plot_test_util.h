/* Helpers shared by the epplot suites: small input files written into /tmp. */
#ifndef PLOT_TEST_UTIL_H
#define PLOT_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* /tmp/epplot_test_<pid>_<name> into buf; returns buf. */
static inline char *pt_path(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "/tmp/epplot_test_%ld_%s", (long)getpid(), name);
    return buf;
}

/* Writes text to /tmp/epplot_test_<pid>_<name> (path into buf); returns buf. */
static inline char *pt_write(char *buf, size_t len, const char *name, const char *text) {
    pt_path(buf, len, name);
    FILE *f = fopen(buf, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return buf;
}

/* Reads a whole (small) file into a malloc'd string, or NULL. */
static inline char *pt_slurp(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf) {
        n = (long)fread(buf, 1, (size_t)n, f);
        buf[n] = 0;
    }
    fclose(f);
    if (len) *len = n;
    return buf;
}

static inline int pt_count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

#endif
