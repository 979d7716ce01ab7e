/* bench_main: the command line of `epref bench NAME` - flags, the benchmark looked up in
 * bench_list.c, the checks every benchmark of one EP group needs, the JSON at the end. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "ep_opts.h"
#include "ref_check.h"

typedef struct {
    bench *b;
    const ep_arglist *rest;
} bench_args;

static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 24 || n == max) return -1;
        out[n++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

/* --tokens LIST */
static int take_tokens(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)row;
    bench *b = ((bench_args *)ctx)->b;
    if ((b->ntokens = parse_list(v, b->tokens, BENCH_MAX_SIZES)) < 1) {
        snprintf(err, EP_ERRLEN, "--tokens needs a list of positive counts");
        return -1;
    }
    return 0;
}

/* A count from row->min up (atoi's reading, as before the table: "12x" is 12, "x" is 0). */
static int take_count(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)ctx;
    int *dst = row->target;
    *dst = atoi(v);
    if (*dst < row->min) {
        snprintf(err, EP_ERRLEN, "%s %s is out of range", row->name, v);
        return -1;
    }
    return 0;
}

static void usage(FILE *f);

static int take_help(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)row, (void)v, (void)ctx, (void)err;
    usage(stdout);
    return 1;
}

/* Not a bench flag: the last one is reported as lacking its value (as before the table). */
static int unknown(const char *arg, void *ctx, char err[EP_ERRLEN]) {
    const ep_arglist *rest = ((bench_args *)ctx)->rest;
    if (arg == rest->items[rest->count - 1])
        snprintf(err, EP_ERRLEN, "%s needs a value", arg);
    else
        snprintf(err, EP_ERRLEN, "unknown flag %s", arg);
    return -1;
}

/* The bench flags (the model's are ep_config_parse's); b NULL: for --help. */
static const ep_opt *bench_table(bench *b) {
    static bench none;
    static ep_opt rows[16];
    if (!b) b = &none;
    const ep_opt t[] = {
        {.name = "--tokens",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .fn = take_tokens,
         .arg = "LIST",
         .help = "tokens per rank (default 128,512,1024,2048,4096,8192,16384)"},
        {.name = "--num-sms",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .fn = take_count,
         .target = &b->num_sms,
         .min = 1,
         .arg = "N",
         .help = "NVLink sender blocks, one per SM (default 16)"},
        {.name = "--permute-blocks",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .fn = take_count,
         .target = &b->permute_blocks,
         .min = 0,
         .arg = "N",
         .help = "extra blocks of the fused dispatch permute (default 8)"},
        {.name = "--reduce-blocks",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .fn = take_count,
         .target = &b->reduce_blocks,
         .min = 0,
         .arg = "N",
         .help = "extra blocks of the fused combine sum (default 8)"},
        {.name = "--iters",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .fn = take_count,
         .target = &b->iters,
         .min = 1,
         .arg = "N",
         .help = "timed iterations (default 50), --warmup N (default 10)"},
        {.name = "--warmup",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .fn = take_count,
         .target = &b->warmup,
         .min = 0,
         .arg = "N"},
        {.name = "--json",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &b->json_path,
         .arg = "PATH",
         .help = "write the results as a JSON array"},
        {.name = "", .help = "calib only (docs/calibration.md):"},
        {.name = "--out",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &b->out_dir,
         .arg = "DIR",
         .help = "directory of compute/comm/host/interference.json (required)"},
        {.name = "--models",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &b->models,
         .arg = "FILE[,FILE]",
         .help = "lines 'name flags...': also time every distinct compute op\n"
                 "of any rank of each model's schedule"},
        {.name = "--parts",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &b->parts,
         .arg = "LIST",
         .help = "of host,compute,comm,interference,waiting,corun (default all);\n"
                 "attention, memory: only that part of compute's grid;\n"
                 "models: only the --models files' ops; grouped-steps: only the\n"
                 "grid's grouped GEMMs at rows per expert between powers of two;\n"
                 "grouped-off-grid: grouped GEMMs at rows per expert off the grid;\n"
                 "dense: only the grid's dense GEMMs; dense-steps: dense GEMMs with\n"
                 "rows or widths between powers of two;\n"
                 "nvl: only comm's NVLink transport (nvl_a2a);\n"
                 "draw: what compute ops draw toward the power cap (draw.json,\n"
                 "not in the default; about 8 minutes on one GPU); draw-wide:\n"
                 "only its grouped GEMMs of the widest FFN;\n"
                 "interference-shapes: a grid of ops beside the NCCL all-to-all\n"
                 "and NVLink stores (interference.json, 2+ ranks, not in the default);\n"
                 "nccl-issue: an NCCL send/recv after a host sync against queued\n"
                 "(host.json, 2+ ranks, not in the default)"},
        {.name = "--l2-flush",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .fn = take_count,
         .target = &b->flush_mb,
         .min = 0,
         .arg = "MIB",
         .help = "stream MIB through HBM before each compute timing (default 0)"},
        {.name = "--help", .kind = EP_OPT_CALL, .fn = take_help},
        {.name = NULL},
    };
    _Static_assert(sizeof t <= sizeof rows, "bench_table: rows too small");
    memcpy(rows, t, sizeof t);
    return rows;
}

static void usage(FILE *f) {
    char names[128];
    bench_names(names, sizeof names);
    fprintf(f,
            "usage: epref [--nproc N] bench NAME [bench flags] [model flags]\n"
            "  NAME                 %s\n",
            names);
    ep_opts_print_help(f, bench_table(NULL), 21);
    fputs("  model flags: Megatron names, e.g. --hidden-size 7168 --num-experts 256\n"
          "  --moe-router-topk 8 --moe-ffn-hidden-size 2048 (see epsim --help)\n",
          f);
}

int bench_main(ref_ctx *ctx, int argc, char **argv) {
    static bench b; /* large: rows table */
    memset(&b, 0, sizeof b);
    b.ctx = ctx;
    b.num_sms = 16;
    b.permute_blocks = 8;
    b.reduce_blocks = 8;
    b.iters = 50;
    b.warmup = 10;
    const int def[] = {128, 512, 1024, 2048, 4096, 8192, 16384};
    b.ntokens = 7;
    memcpy(b.tokens, def, sizeof def);
    if (argc < 1) {
        usage(stderr);
        return 2;
    }
    b.name = argv[0];
    ep_config_defaults(&b.cfg);
    ep_arglist pos, rest;
    memset(&pos, 0, sizeof pos);
    memset(&rest, 0, sizeof rest);
    char err[EP_ERRLEN];
    b.parts = "host,compute,comm,interference,waiting,corun";
    if (ep_config_parse(&b.cfg, argc, argv, &pos, &rest, err)) {
        fprintf(stderr, "epref: %s\n", err);
        return 2;
    }
    /* the flags ep_config_parse handed back, each with the value that followed it, whatever it
     * is */
    bench_args ba = {&b, &rest};
    ep_opts p = {bench_table(&b), unknown, &ba, 1};
    int prc = ep_opts_parse(&p, rest.count, (char *const *)rest.items, err);
    if (prc > 0) return 0; /* --help */
    if (prc < 0) {
        fprintf(stderr, "epref: %s\n", err);
        return 2;
    }
    if (pos.count != 0) { /* argv[0] is the benchmark's name */
        fprintf(stderr, "epref: unexpected argument '%s'\n", pos.items[0]);
        return 2;
    }
    const bench_entry *e = bench_find(b.name);
    if (!e) {
        char names[128];
        bench_names(names, sizeof names);
        fprintf(stderr, "epref: unknown benchmark '%s' (%s)\n", b.name, names);
        return 2;
    }
    const char *out_dir = b.out_dir;
    if (e->own_models) { /* its models come from --models, not the flags */
        if (!out_dir) {
            fprintf(stderr, "epref: bench calib needs --out DIR\n");
            return 2;
        }
        if (calib_has_part(b.parts, "models") && !b.models) {
            fprintf(stderr, "epref: bench calib --parts models needs --models FILE\n");
            return 2;
        }
        /* before any timing: a missing folder is made, anything else in the way is an error */
        struct stat sb;
        if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "epref: bench calib: cannot make --out %s: %s\n", out_dir,
                    strerror(errno));
            return 2;
        }
        if (stat(out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "epref: bench calib: --out %s is not a folder\n", out_dir);
            return 2;
        }
        int rc = e->run(&b);
        for (int k = 0; k < 2; k++)
            if (b.flush[k]) CUDA_CHECK(cudaFree(b.flush[k]));
        return rc;
    }
    if (b.cfg.world_size == 0) b.cfg.world_size = ctx->w.size;
    if (b.cfg.expert_model_parallel_size != ctx->w.size) {
        fprintf(stderr,
                "epref: bench runs one EP group: --expert-model-parallel-size %d must "
                "equal the number of ranks (%d)\n",
                b.cfg.expert_model_parallel_size, ctx->w.size);
        return 2;
    }
    if (ep_config_validate(&b.cfg, err)) {
        fprintf(stderr, "epref: %s\n", err);
        return 2;
    }
    int rc = e->run(&b);
    if (rc == 0 && b.json_path && ctx->w.rank == 0) rc = bench_write_json(&b) ? 1 : 0;
    return rc;
}
