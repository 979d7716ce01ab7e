/* bench_main: the command line of `epref bench NAME` - flags, the benchmark looked up in
 * bench_list.c, the checks every benchmark of one EP group needs, the JSON at the end. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "ref_check.h"

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

static void usage(FILE *f) {
    char names[128];
    bench_names(names, sizeof names);
    fprintf(f,
            "usage: epref [--nproc N] bench NAME [bench flags] [model flags]\n"
            "  NAME                 %s\n"
            "  --tokens LIST        tokens per rank (default 128,512,1024,2048,4096,8192,16384)\n"
            "  --num-sms N          NVLink sender blocks, one per SM (default 16)\n"
            "  --permute-blocks N   extra blocks of the fused dispatch permute (default 8)\n"
            "  --reduce-blocks N    extra blocks of the fused combine sum (default 8)\n"
            "  --iters N            timed iterations (default 50), --warmup N (default 10)\n"
            "  --json PATH          write the results as a JSON array\n"
            "  calib only (docs/calibration.md):\n"
            "  --out DIR            directory of compute/comm/host/interference.json (required)\n"
            "  --models FILE[,FILE] lines 'name flags...': also time every distinct compute op\n"
            "                       of any rank of each model's schedule\n"
            "  --parts LIST         of host,compute,comm,interference,corun (default all)\n"
            "  --l2-flush MIB       stream MIB through HBM before each compute timing (default 0)\n"
            "  model flags: Megatron names, e.g. --hidden-size 7168 --num-experts 256\n"
            "  --moe-router-topk 8 --moe-ffn-hidden-size 2048 (see epsim --help)\n",
            names);
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
    const char *out_dir = NULL, *models = NULL, *parts = "host,compute,comm,interference,corun";
    if (ep_config_parse(&b.cfg, argc, argv, &pos, &rest, err)) {
        fprintf(stderr, "epref: %s\n", err);
        return 2;
    }
    for (int i = 0; i < rest.count; i++) {
        const char *f = rest.items[i], *v = i + 1 < rest.count ? rest.items[i + 1] : NULL;
        int *dst = !strcmp(f, "--num-sms")          ? &b.num_sms
                   : !strcmp(f, "--permute-blocks") ? &b.permute_blocks
                   : !strcmp(f, "--reduce-blocks")  ? &b.reduce_blocks
                   : !strcmp(f, "--iters")          ? &b.iters
                   : !strcmp(f, "--warmup")         ? &b.warmup
                   : !strcmp(f, "--l2-flush")       ? &b.flush_mb
                                                    : NULL;
        if (!strcmp(f, "--help")) {
            usage(stdout);
            return 0;
        } else if (!v) {
            fprintf(stderr, "epref: %s needs a value\n", f);
            return 2;
        } else if (!strcmp(f, "--tokens")) {
            if ((b.ntokens = parse_list(v, b.tokens, BENCH_MAX_SIZES)) < 1) {
                fprintf(stderr, "epref: --tokens needs a list of positive counts\n");
                return 2;
            }
        } else if (!strcmp(f, "--json")) {
            b.json_path = v;
        } else if (!strcmp(f, "--out")) {
            out_dir = v;
        } else if (!strcmp(f, "--models")) {
            models = v;
        } else if (!strcmp(f, "--parts")) {
            parts = v;
        } else if (dst) {
            *dst = atoi(v);
            if (*dst < 0 || (dst == &b.iters && *dst < 1) || (dst == &b.num_sms && *dst < 1)) {
                fprintf(stderr, "epref: %s %s is out of range\n", f, v);
                return 2;
            }
        } else {
            fprintf(stderr, "epref: unknown flag %s\n", f);
            return 2;
        }
        i++;
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
    b.out_dir = out_dir;
    b.models = models;
    b.parts = parts;
    if (e->own_models) { /* its models come from --models, not the flags */
        if (!out_dir) {
            fprintf(stderr, "epref: bench calib needs --out DIR\n");
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
