/* A program's option table (ep_opts.h). */
#include "ep_opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The row named by arg ("--opt", or "--opt=..." for a row with a value); *value gets the text
 * after '=' (NULL without one). */
static const ep_opt *find(const ep_opt *rows, const char *arg, const char **value) {
    for (const ep_opt *r = rows; r->name; r++) {
        size_t n = strlen(r->name);
        if (!n || strncmp(arg, r->name, n) != 0) continue;
        if (!arg[n]) {
            *value = NULL;
            return r;
        }
        if (arg[n] == '=' && r->takes != EP_OPT_NO_VALUE) {
            *value = arg + n + 1;
            return r;
        }
    }
    return NULL;
}

static int number(const ep_opt *r, const char *v, char err[EP_ERRLEN]) {
    char *end;
    errno = 0;
    double x = r->kind == EP_OPT_INT ? (double)strtol(v, &end, 10) : strtod(v, &end);
    if (end == v || *end || errno || !(x >= r->min && x <= r->max)) {
        if (r->bad)
            snprintf(err, EP_ERRLEN, "%s %.64s%s", r->name, v, r->bad);
        else
            snprintf(err, EP_ERRLEN, "%s %.64s is out of range (%g to %g)", r->name, v, r->min,
                     r->max);
        return -1;
    }
    if (r->kind == EP_OPT_INT)
        *(int *)r->target = (int)x;
    else
        *(double *)r->target = x;
    return 0;
}

/* One row with its value (NULL: none given, or missing). */
static int apply(const ep_opts *p, const ep_opt *r, const char *v, char err[EP_ERRLEN]) {
    if (!v && r->takes == EP_OPT_VALUE) {
        if (r->missing)
            snprintf(err, EP_ERRLEN, "%s", r->missing);
        else
            snprintf(err, EP_ERRLEN, "%s needs a value", r->name);
        return -1;
    }
    if (r->kind == EP_OPT_CALL) return r->fn(r, v, p->ctx, err);
    if (r->kind == EP_OPT_FLAG) {
        *(int *)r->target = r->set;
        return 0;
    }
    if (r->kind == EP_OPT_STRING) {
        *(const char **)r->target = v;
        return 0;
    }
    return number(r, v, err);
}

int ep_opts_parse(const ep_opts *p, int n, char *const *args, char err[EP_ERRLEN]) {
    for (int i = 0; i < n; i++) {
        const char *v;
        const ep_opt *r = find(p->rows, args[i], &v);
        int rc;
        if (!r) {
            if (p->other) {
                rc = p->other(args[i], p->ctx, err);
            } else {
                snprintf(err, EP_ERRLEN, "unknown option %.200s", args[i]);
                rc = -1;
            }
        } else if (r->takes == EP_OPT_VALUE && !v) {
            const char *next = i + 1 < n ? args[i + 1] : NULL;
            int missing = !next || (!p->any_value && (!next[0] || strncmp(next, "--", 2) == 0));
            if (!missing) i++;
            rc = apply(p, r, missing ? NULL : next, err);
        } else {
            /* "--opt=" is a missing value unless any value goes (EP_OPT_JOINED: fn decides) */
            int empty = r->takes == EP_OPT_VALUE && v && !v[0] && !p->any_value;
            rc = apply(p, r, empty ? NULL : v, err);
        }
        if (rc != 0) return rc;
    }
    return 0;
}

void ep_opts_print_help(FILE *f, const ep_opt *rows, int width) {
    for (const ep_opt *r = rows; r->name; r++) {
        if (!r->help) continue;
        if (!r->name[0]) {
            fprintf(f, "  %s\n", r->help);
            continue;
        }
        char label[128];
        if (r->shown)
            snprintf(label, sizeof label, "%s", r->shown);
        else
            snprintf(label, sizeof label, "%s%s%s", r->name,
                     !r->arg                     ? ""
                     : r->takes == EP_OPT_JOINED ? "="
                                                 : " ",
                     r->arg ? r->arg : "");
        const char *line = r->help;
        fprintf(f, "  %-*s ", width - 1, label);
        for (const char *nl; (nl = strchr(line, '\n')); line = nl + 1)
            fprintf(f, "%.*s\n%*s", (int)(nl - line), line, width + 2, "");
        fprintf(f, "%s\n", line);
    }
}
