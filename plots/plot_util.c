/* Helpers shared by the plot data writers (plot_util.h). */
#include "plot_util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

char *plot_read_file(const char *path, size_t *len, char err[EP_ERRLEN]) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, EP_ERRLEN, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        cap *= 2;
        char *nb = realloc(buf, cap);
        if (!nb) {
            free(buf);
            buf = NULL;
        } else {
            buf = nb;
        }
    }
    if (!buf) {
        fclose(f);
        snprintf(err, EP_ERRLEN, "cannot read %s: out of memory", path);
        return NULL;
    }
    if (ferror(f)) {
        snprintf(err, EP_ERRLEN, "cannot read %s: %s", path, strerror(errno));
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    buf[n] = 0;
    if (memchr(buf, 0, n)) {
        snprintf(err, EP_ERRLEN, "%s: not a text file (NUL byte)", path);
        free(buf);
        return NULL;
    }
    if (len) *len = n;
    return buf;
}

json_t *plot_load_json(const char *path, char err[EP_ERRLEN]) {
    FILE *f = fopen(path, "rb"); /* jansson's message for this case names no reason */
    if (!f) {
        snprintf(err, EP_ERRLEN, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!root)
        snprintf(err, EP_ERRLEN, "%s:%d:%d: malformed JSON: %s", path, je.line, je.column, je.text);
    return root;
}

int plot_parse_number(const char *s, double *out) {
    char *end;
    while (*s == ' ' || *s == '\t')
        s++;
    if (!*s) return -1;
    errno = 0;
    double v = strtod(s, &end);
    while (*end == ' ' || *end == '\t')
        end++;
    if (*end || errno == ERANGE || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

void plot_gp_string(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('\'', f);
}

void plot_data_field(FILE *f, const char *s) {
    if (!s || !*s) {
        fputc('-', f);
        return;
    }
    for (; *s; s++)
        fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, f);
}

void plot_basename(const char *path, const char *const *suffixes, char *buf, size_t len) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    for (int i = 0; suffixes && suffixes[i]; i++) {
        size_t k = strlen(suffixes[i]);
        if (n > k && !strcmp(b + n - k, suffixes[i])) {
            n -= k;
            break;
        }
    }
    snprintf(buf, len, "%.*s", (int)n, b);
}
