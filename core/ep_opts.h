/* ep_opts: a program's own options (--topo, --out, --jobs, ...) as a table, one row per option:
 * its name, whether it takes a value, the value's kind and where it goes, and its --help line.
 * The Megatron flags are another table (core/config_flags.c, ep_config_parse); an argument that
 * no row names goes to the program's `other`, which passes it on to the flag parser, takes it as
 * a positional argument or refuses it.
 *
 * A row with a value takes "--opt VALUE" and "--opt=VALUE"; a row without takes "--opt" only
 * ("--opt=x" is then no row's: `other` gets it). Bad input is one line in err, without the
 * program's prefix: the program prints it and exits with status 2 (docs/architecture.md,
 * "Contracts"). */
#ifndef EP_OPTS_H
#define EP_OPTS_H

#include <stdio.h>

#include "ep_err.h"

typedef enum {
    EP_OPT_FLAG,   /* no value: *(int *)target = set */
    EP_OPT_STRING, /* *(const char **)target = the value (the argument itself, not a copy) */
    EP_OPT_INT,    /* *(int *)target = an integer from min to max */
    EP_OPT_DOUBLE, /* *(double *)target = a number from min to max */
    EP_OPT_CALL,   /* fn(row, value, ctx, err) does what the option does */
} ep_opt_kind;

typedef enum {
    EP_OPT_NO_VALUE, /* --opt */
    EP_OPT_VALUE,    /* --opt VALUE or --opt=VALUE */
    EP_OPT_JOINED,   /* --opt=VALUE only; "--opt" alone gives fn a NULL value (EP_OPT_CALL) */
} ep_opt_takes;

typedef struct ep_opt ep_opt;
/* An EP_OPT_CALL row's action. value: the option's value (never missing: the parser says so),
 * NULL for a row without one and for EP_OPT_JOINED's "--opt" alone. Returns 0 (go on), 1 (stop: the
 * parser returns 1, e.g. after --help) or -1 with one line in err. */
typedef int (*ep_opt_fn)(const ep_opt *row, const char *value, void *ctx, char err[EP_ERRLEN]);

struct ep_opt {
    const char *name; /* "--topo"; NULL ends the table; "": a heading line of --help (its help) */
    ep_opt_takes takes;
    ep_opt_kind kind;
    void *target;      /* FLAG, INT: int *; STRING: const char **; DOUBLE: double *; CALL: free */
    ep_opt_fn fn;      /* EP_OPT_CALL */
    const char *arg;   /* the value in --help ("T", "FILE") */
    const char *help;  /* its --help text; lines after the first are indented under it; NULL: not
                        * listed (an alias, or named in another row's text) */
    int set;           /* EP_OPT_FLAG: the value stored */
    double min, max;   /* EP_OPT_INT, EP_OPT_DOUBLE; also free for a CALL row's own use */
    const char *bad;   /* EP_OPT_INT, EP_OPT_DOUBLE: what the message "OPT VALUE..." says after the
                        * value (NULL: " is out of range (MIN to MAX)") */
    const char *shown; /* --help's left column when it is not "OPT ARG" */
    const char *missing; /* the message for a missing value (NULL: "OPT needs a value") */
};

typedef struct {
    const ep_opt *rows;
    /* An argument that no row names: 0 (taken), 1 (stop) or -1 with one line in err. NULL: the
     * error "unknown option ARG". */
    int (*other)(const char *arg, void *ctx, char err[EP_ERRLEN]);
    void *ctx;
    /* 0: a value is missing when no argument follows, or the next one is empty or starts with
     * "--" (or "--opt=" is empty). 1: the next argument is the value whatever it is. */
    int any_value;
} ep_opts;

/* Parses args[0..n) in order. Returns 0, 1 when a row or `other` stopped it, or -1 with one line
 * in err: "OPT needs a value" (or the row's `missing`), an INT or DOUBLE row's
 * "OPT VALUE is out of range (MIN to MAX)" (or its `bad`), or what fn or other says. */
int ep_opts_parse(const ep_opts *p, int n, char *const *args, char err[EP_ERRLEN]);

/* The rows with help, one per line: "  " + the left column padded to width - 1 + " " + help. */
void ep_opts_print_help(FILE *f, const ep_opt *rows, int width);

#endif
