/* epsched: prints the schedule that epsim and epref execute for a configuration.
 *
 *   epsched [Megatron flags and @files] [--rank R] [--csv] [--check]
 *
 * Text (default): per rank, per stream, ops in host launch order with kind, communicator and the
 * ops they wait for. --csv: one row per op (docs/schedule.md, "CSV"). --check: runs
 * ep_sched_check and reports the result. Errors: one line on stderr, exit status 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ep_config.h"
#include "ep_opts.h"
#include "ep_sched.h"

typedef struct {
    int rank, csv, check, help;
} sched_opts;

/* --rank R: a rank to print (checked against the world once the configuration is) */
static int take_rank(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)row;
    sched_opts *o = ctx;
    char *end;
    long r = strtol(v, &end, 10);
    if (*end || r < 0) {
        snprintf(err, EP_ERRLEN, "--rank needs a non-negative integer (got '%.60s')", v);
        return -1;
    }
    o->rank = (int)r;
    return 0;
}

static int unknown(const char *arg, void *ctx, char err[EP_ERRLEN]) {
    (void)ctx;
    snprintf(err, EP_ERRLEN, "unknown flag '%.100s' (see --help)", arg);
    return -1;
}

/* epsched's own flags (the configuration's are ep_config_parse's); o NULL: for --help. */
static const ep_opt *sched_table(sched_opts *o) {
    static sched_opts none;
    static ep_opt rows[5];
    if (!o) o = &none;
    const ep_opt t[] = {
        {.name = "--rank",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .fn = take_rank,
         .arg = "R",
         .help = "print rank R only (default: every rank)",
         .missing = "--rank needs a non-negative integer (got '')"},
        {.name = "--csv",
         .kind = EP_OPT_FLAG,
         .target = &o->csv,
         .set = 1,
         .help = "one CSV row per op instead of text"},
        {.name = "--check",
         .kind = EP_OPT_FLAG,
         .target = &o->check,
         .set = 1,
         .help = "check the schedule (deps, collectives, names, deadlock freedom);\n"
                 "prints one line and exits 0 when it holds, 2 otherwise"},
        /* taken before the configuration is parsed (main) */
        {.name = "--help", .kind = EP_OPT_FLAG, .target = &o->help, .set = 1, .help = "this text"},
        {.name = NULL},
    };
    _Static_assert(sizeof t <= sizeof rows, "sched_table: rows too small");
    memcpy(rows, t, sizeof t);
    return rows;
}

static void usage(FILE *f) {
    fprintf(f, "usage: epsched [flags and @files] [--rank R] [--csv] [--check]\n"
               "\n"
               "Prints the generated schedule of one training iteration: per rank and stream, the\n"
               "ops in host launch order (docs/schedule.md).\n"
               "\n"
               "epsched flags:\n");
    ep_opts_print_help(f, sched_table(NULL), 13);
    fprintf(f, "\n"
               "Configuration flags:\n");
    ep_config_print_help(f);
}

static int fail(const char *msg) {
    fprintf(stderr, "epsched: %s\n", msg);
    return 2;
}

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    char err[EP_ERRLEN];
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
    ep_config cfg;
    ep_arglist positional = {0}, own = {0};
    ep_config_defaults(&cfg);
    if (ep_config_parse(&cfg, argc, argv, &positional, &own, err) != 0) return fail(err);
    if (positional.count > 0) {
        snprintf(err, sizeof err, "unexpected argument '%.100s'", positional.items[0]);
        return fail(err);
    }
    sched_opts o = {.rank = -1};
    /* the flags ep_config_parse handed back, each with the value that followed it */
    ep_opts p = {sched_table(&o), unknown, &o, 1};
    if (ep_opts_parse(&p, own.count, (char *const *)own.items, err) != 0) return fail(err);
    int rank = o.rank, csv = o.csv, check = o.check;
    if (ep_config_validate(&cfg, err) != 0) return fail(err);
    if (cfg.ignored_flags[0])
        fprintf(stderr, "epsched: note: accepted without effect on the schedule: %s\n",
                cfg.ignored_flags);
    if (rank >= cfg.world_size) {
        snprintf(err, sizeof err, "--rank %d is outside the world of %d ranks", rank,
                 cfg.world_size);
        return fail(err);
    }
    ep_sched s;
    double t0 = seconds();
    if (ep_sched_build(&cfg, &s, err) != 0) return fail(err);
    double built = seconds() - t0;
    int rc = 0;
    if (check) {
        t0 = seconds();
        if (ep_sched_check(&s, err) != 0) {
            rc = fail(err);
        } else {
            long long ops = 0;
            for (int r = 0; r < s.world; r++)
                ops += s.ranks[r].nops;
            printf("schedule ok: %d ranks, %lld ops, %d communicators, %d traffic instances "
                   "(built in %.2f s, checked in %.2f s)\n",
                   s.world, ops, s.ngroups, s.ntraffic, built, seconds() - t0);
        }
    } else if (csv) {
        ep_sched_print_csv(&s, stdout, rank);
    } else {
        ep_sched_print(&s, stdout, rank);
    }
    ep_sched_free(&s);
    if (rc == 0 && fflush(stdout) != 0) return fail("cannot write the output");
    return rc;
}
