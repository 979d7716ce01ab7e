/* CSV reading (format in plot_csv.h). The whole file is read at once: the tables plotted here are
 * validation runs and sweep results, a few thousand rows at most. */
#include "plot_csv.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plot_util.h"

typedef struct {
    char **v;
    int n, cap;
} fields;

static int push(fields *f, const char *s, size_t len) {
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 16;
        char **p = realloc(f->v, (size_t)cap * sizeof *p);
        if (!p) return -1;
        f->v = p;
        f->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return -1;
    memcpy(c, s, len);
    c[len] = 0;
    f->v[f->n++] = c;
    return 0;
}

static void fields_free(fields *f) {
    for (int i = 0; i < f->n; i++)
        free(f->v[i]);
    free(f->v);
    memset(f, 0, sizeof *f);
}

/* Splits one record starting at *pp into out (appended); advances *pp past the record and its
 * line end, counting the lines a quoted field spans. Returns 0, -1 on a bad quote, -2 on no memory.
 */
static int record(const char **pp, fields *out, int *lines) {
    const char *p = *pp;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        len = 0;
        int quoted = *p == '"';
        if (quoted) {
            p++;
            for (;;) {
                if (!*p) {
                    free(buf);
                    return -1; /* unterminated quote */
                }
                if (*p == '"' && p[1] == '"') {
                    p++;
                } else if (*p == '"') {
                    p++;
                    break;
                }
                if (*p == '\n') ++*lines;
                if (len + 1 >= cap) {
                    cap = cap ? 2 * cap : 64;
                    char *nb = realloc(buf, cap);
                    if (!nb) {
                        free(buf);
                        return -2;
                    }
                    buf = nb;
                }
                buf[len++] = *p++;
            }
            if (*p && *p != ',' && *p != '\n' && *p != '\r') {
                free(buf);
                return -1; /* text after a closing quote */
            }
            if (push(out, buf ? buf : "", len) != 0) {
                free(buf);
                return -2;
            }
        } else {
            const char *s = p;
            while (*p && *p != ',' && *p != '\n' && *p != '\r')
                p++;
            if (memchr(s, '"', (size_t)(p - s))) {
                free(buf);
                return -1; /* a quote inside an unquoted field */
            }
            if (push(out, s, (size_t)(p - s)) != 0) {
                free(buf);
                return -2;
            }
        }
        if (*p == ',') {
            p++;
            continue;
        }
        break;
    }
    if (*p == '\r') p++;
    if (*p == '\n') p++;
    ++*lines;
    *pp = p;
    free(buf);
    return 0;
}

static int blank_line(const char *p) {
    return *p == '\n' || (*p == '\r' && p[1] == '\n');
}

int plot_csv_load(const char *path, plot_csv *t, char err[EP_ERRLEN]) {
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    char *text = plot_read_file(path, NULL, err);
    if (!text) return -1;
    fields cells = {0}, hdr = {0};
    int *lines = NULL, nlines_cap = 0, line = 1, rc = -1;
    const char *p = text;
    while (blank_line(p))
        p += *p == '\r' ? 2 : 1, line++;
    if (!*p) {
        snprintf(err, EP_ERRLEN, "%s: empty file, expected a header row", path);
        goto out;
    }
    int at = line, r = record(&p, &hdr, &line);
    if (r != 0) {
        snprintf(err, EP_ERRLEN, r == -2 ? "%s: out of memory" : "%s:%d: malformed quoted field",
                 path, at);
        fields_free(&hdr);
        goto out;
    }
    t->header = hdr.v;
    t->ncols = hdr.n;
    for (int i = 0; i < t->ncols; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(t->header[i], t->header[j])) {
                snprintf(err, EP_ERRLEN, "%s:%d: column '%s' appears twice in the header", path, at,
                         t->header[i]);
                goto out;
            }
    while (*p) {
        if (blank_line(p)) {
            p += *p == '\r' ? 2 : 1;
            line++;
            continue;
        }
        int before = cells.n;
        at = line;
        r = record(&p, &cells, &line);
        if (r != 0) {
            snprintf(err, EP_ERRLEN,
                     r == -2 ? "%s: out of memory" : "%s:%d: malformed quoted field", path, at);
            goto out;
        }
        if (cells.n - before != t->ncols) {
            snprintf(err, EP_ERRLEN, "%s:%d: %d fields, the header has %d", path, at,
                     cells.n - before, t->ncols);
            goto out;
        }
        if (t->nrows == nlines_cap) {
            nlines_cap = nlines_cap ? 2 * nlines_cap : 64;
            int *nl = realloc(lines, (size_t)nlines_cap * sizeof *nl);
            if (!nl) {
                snprintf(err, EP_ERRLEN, "%s: out of memory", path);
                goto out;
            }
            lines = nl;
        }
        lines[t->nrows++] = at;
    }
    rc = 0;
out:
    free(text);
    t->cells = cells.v;
    t->line = lines;
    if (rc != 0) {
        /* cells.n may not be a whole number of rows on error: free by count */
        for (int i = 0; i < cells.n; i++)
            free(cells.v[i]);
        free(cells.v);
        t->cells = NULL;
        t->nrows = 0;
        plot_csv_free(t);
    }
    return rc;
}

void plot_csv_free(plot_csv *t) {
    for (long i = 0; t->cells && i < (long)t->nrows * t->ncols; i++)
        free(t->cells[i]);
    for (int i = 0; t->header && i < t->ncols; i++)
        free(t->header[i]);
    free(t->cells);
    free(t->header);
    free(t->line);
    t->cells = t->header = NULL;
    t->line = NULL;
    t->nrows = t->ncols = 0;
}

int plot_csv_col(const plot_csv *t, const char *name) {
    for (int i = 0; i < t->ncols; i++)
        if (!strcmp(t->header[i], name)) return i;
    return -1;
}

int plot_csv_number(const plot_csv *t, int row, int col, double *out, char err[EP_ERRLEN]) {
    const char *s = plot_csv_cell(t, row, col);
    if (plot_parse_number(s, out) != 0) {
        snprintf(err, EP_ERRLEN, "%s:%d: column '%s': '%s' is not a finite number", t->path,
                 t->line[row], t->header[col], s);
        return -1;
    }
    return 0;
}
