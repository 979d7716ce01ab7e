/* One epsim run from the command line (sim_cli.h). */
#include "sim_cli.h"

#include <xbt/config.h>
#include <simgrid/engine.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <xbt/log.h>

#include "ep_config.h"
#include "ep_sched.h"
#include "sim_calib.h"
#include "sim_engine.h"
#include "sim_platform.h"
#include "sim_report.h"

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(epsim_cli, root, "epsim: command line");

#define DEFAULT_PRESET       "deepseek-v3-proxy16"
#define DEFAULT_MICROBATCHES 8

static void usage(FILE *f) {
    fputs("usage: epsim [--topo T] [options] [Megatron flags] [@argfile ...]\n"
          "       epsim sweep --grid \"flag=v1,v2;flag2=a,b\" [--jobs N] [--shard i/n] --out CSV"
          " [flags]\n"
          "       epsim compare RUN [--topo T] [--calib FILE] [--json OUT]   (RUN.args + "
          "RUN.trace.json"
          " of a measured run)\n"
          "       epsim calibrate DIR [DIR ...] [--topo T] [--out FILE]   (fit from epref bench"
          " calib files)\n"
          "epsim options:\n"
          "  --topo T            platform file, or a bundled name: h200x2 h200x4 dgx8 dgx16 dgx64\n"
          "                      dgx256 dgx1024 nvl72 (default dgx16)\n"
          "  --calib FILE        calibration JSON (docs/calibration.md), a name under\n"
          "                      traces/calib, or none (built-in defaults); default: the one\n"
          "                      the topology names (h200x2, h200x4: their own; dgx*: h100)\n"
          "  --summary-json P    write the summary as JSON\n"
          "  --trace P           write a Chrome trace (Perfetto)\n"
          "  --csv P             write one row per op\n"
          "  --no-preset         start from the library defaults, not the DeepSeek-V3 proxy\n"
          "  --stats             print wall/CPU time per phase, peak RSS, ops/s on stderr\n"
          "  --progress, --no-progress  a progress line on stderr once the run took 2 s\n"
          "                      (default: when stderr is a terminal)\n"
          "  --log=...           SimGrid log control, e.g. --log=epsim_engine.thres:debug\n"
          "Without an @file the 16-layer DeepSeek-V3 proxy preset is read first. Unset parallel\n"
          "sizes default to the topology (docs/epsim.md, \"Default layout\"). Config flags:\n",
          f);
    ep_config_print_help(f);
}

typedef struct {
    const char *topo, *calib, *summary, *trace, *csv;
    int stats, no_preset, help, has_argfile;
    int progress; /* -1: when stderr is a terminal */
} cli_opts;

static int take_value(int argc, char **argv, int *i, const char *name, const char **out,
                      char err[EP_ERRLEN]) {
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) == 0 && argv[*i][n] == '=') {
        *out = argv[*i] + n + 1;
        return 1;
    }
    if (strcmp(argv[*i], name) != 0) return 0;
    if (*i + 1 >= argc || strncmp(argv[*i + 1], "--", 2) == 0) {
        snprintf(err, EP_ERRLEN, "%s needs a value", name);
        return -1;
    }
    *out = argv[++*i];
    return 1;
}

/* Splits argv into epsim options, SimGrid options (sg) and config flags (rest). */
static int split_args(int argc, char **argv, cli_opts *o, int *nsg, char **sg, int *nrest,
                      char **rest, char err[EP_ERRLEN]) {
    static const char *names[] = {"--topo", "--calib", "--summary-json", "--trace", "--csv"};
    const char **slots[] = {&o->topo, &o->calib, &o->summary, &o->trace, &o->csv};
    for (int i = 1; i < argc; i++) {
        int hit = 0;
        for (int k = 0; k < 5 && !hit; k++) {
            hit = take_value(argc, argv, &i, names[k], slots[k], err);
            if (hit < 0) return -1;
        }
        if (hit) continue;
        if (strcmp(argv[i], "--stats") == 0)
            o->stats = 1;
        else if (strcmp(argv[i], "--progress") == 0 || strcmp(argv[i], "--no-progress") == 0)
            o->progress = argv[i][2] == 'p';
        else if (strcmp(argv[i], "--no-preset") == 0)
            o->no_preset = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            o->help = 1;
        else if (strncmp(argv[i], "--log=", 6) == 0 || strncmp(argv[i], "--cfg=", 6) == 0)
            sg[(*nsg)++] = argv[i];
        else {
            if (argv[i][0] == '@') o->has_argfile = 1;
            rest[(*nrest)++] = argv[i];
        }
    }
    return 0;
}

/* Whether the flag appears among the arguments (as --flag V or --flag=V). */
static int given(int n, char **args, const char *flag) {
    size_t k = strlen(flag);
    for (int i = 1; i < n; i++)
        if (strncmp(args[i], flag, k) == 0 && (args[i][k] == 0 || args[i][k] == '=')) return 1;
    return 0;
}

static int largest_divisor(int a, int b, int cap) {
    int best = 1;
    for (int d = 1; d <= cap; d++)
        if (a % d == 0 && b % d == 0) best = d;
    return best;
}

/* Fills the parallel sizes left unset (0) from the topology: docs/epsim.md, "Default layout". */
static void default_layout(ep_config *cfg, const sim_platform *p) {
    if (cfg->gpus_per_node == 0) cfg->gpus_per_node = p->gpus_per_node;
    if (cfg->world_size == 0 && cfg->data_parallel_size == 0) cfg->world_size = p->ngpus;
    int world = cfg->world_size ? cfg->world_size : p->ngpus;
    int mp = cfg->tensor_model_parallel_size * cfg->context_parallel_size *
             cfg->pipeline_model_parallel_size;
    int dp = mp > 0 && world % mp == 0 ? world / mp : 1;
    if (cfg->expert_model_parallel_size == 0) {
        /* EP x ETP ranks hold one copy of the experts: divide TP x CP x DP, stay in a node */
        int etp = cfg->expert_tensor_parallel_size ? cfg->expert_tensor_parallel_size
                                                   : cfg->tensor_model_parallel_size;
        int ranks = dp * cfg->context_parallel_size * cfg->tensor_model_parallel_size;
        int cap = etp > 0 && p->gpus_per_node / etp > 1 ? p->gpus_per_node / etp : 1;
        cfg->expert_model_parallel_size = cfg->num_experts > 0 && etp > 0 && ranks % etp == 0
                                              ? largest_divisor(cfg->num_experts, ranks / etp, cap)
                                              : 1;
    }
    if (cfg->global_batch_size == 0) {
        int pp = cfg->pipeline_model_parallel_size;
        int nmb = pp > 1 ? 2 * pp : DEFAULT_MICROBATCHES;
        cfg->global_batch_size = cfg->micro_batch_size * dp * nmb;
    }
}

/* This process's resource use so far, for --stats: CPU seconds (user + system), the kernel's
 * share of them (mostly first-touch page faults), minor page faults and peak RSS. */
typedef struct {
    double cpu, sys;
    long minflt, rss_kib;
} usage_t;

static usage_t resources(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    double sys = u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
    return (usage_t){u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + sys, sys, u.ru_minflt,
                     u.ru_maxrss /* KiB on Linux */};
}

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* --calib FILE, else the topology's default calibration, on top of the built-in defaults;
 * "--calib none" keeps the built-in defaults alone. */
static int load_calibration(sim_calib *c, const char *arg, const sim_platform *p,
                            char err[EP_ERRLEN]) {
    const char *name = arg ? arg : p->calib[0] ? p->calib : NULL;
    if (!name || strcmp(name, "none") == 0) return 0;
    char path[4096];
    if (sim_find_data("calib", name, ".json", path, sizeof path) != 0) {
        if (arg)
            snprintf(err, EP_ERRLEN, "--calib %s: no such calibration file", arg);
        else
            snprintf(err, EP_ERRLEN, "platform %s names calibration %s, which is not found",
                     p->name, name);
        return -1;
    }
    return sim_calib_load(c, path, err);
}

static int fail2(const char *msg) {
    fprintf(stderr, "epsim: %s\n", msg);
    return 2;
}

int sim_cli_run(int argc, char **argv) {
    double t0 = wall();
    usage_t u0 = resources();
    char err[EP_ERRLEN];
    cli_opts o;
    memset(&o, 0, sizeof o);
    o.topo = "dgx16";
    o.progress = -1;
    char **sg = calloc((size_t)argc + 4, sizeof *sg);
    char **rest = calloc((size_t)argc + 4, sizeof *rest);
    int nsg = 0, nrest = 0;
    if (!sg || !rest) return 1;
    int rc = 2;
    sg[nsg++] = argv[0];
    rest[nrest++] = argv[0];
    if (split_args(argc, argv, &o, &nsg, sg, &nrest, rest, err) != 0) {
        rc = fail2(err);
        goto out;
    }
    if (o.help) {
        usage(stdout);
        rc = 0;
        goto out;
    }
    /* SimGrid: quiet unless asked (user --log options come after and win), ptask model */
    xbt_log_control_set("root.thres:critical");
    simgrid_init(&nsg, sg);
    sg_cfg_set_string("host/model", "ptask_L07");

    sim_calib calib;
    sim_calib_default(&calib);
    sim_platform plat;
    if (sim_platform_load(&plat, o.topo, err) != 0 ||
        load_calibration(&calib, o.calib, &plat, err) != 0) {
        rc = fail2(err);
        goto out_plat;
    }

    /* config: preset first (unless an @file or --no-preset), then the flags given */
    ep_config cfg;
    ep_config_defaults(&cfg);
    cfg.expert_model_parallel_size = 0;
    cfg.global_batch_size = 0;
    cfg.gpus_per_node = 0;
    char preset_arg[4200];
    char **cargv = calloc((size_t)nrest + 2, sizeof *cargv);
    int cargc = 0;
    cargv[cargc++] = argv[0];
    if (!o.has_argfile && !o.no_preset) {
        char path[4096];
        if (sim_find_data("configs", DEFAULT_PRESET, ".args", path, sizeof path) != 0) {
            free(cargv);
            rc = fail2("cannot find the default preset configs/" DEFAULT_PRESET ".args");
            goto out_plat;
        }
        snprintf(preset_arg, sizeof preset_arg, "@%s", path);
        cargv[cargc++] = preset_arg;
    }
    int preset = cargc > 1;
    for (int i = 1; i < nrest; i++)
        cargv[cargc++] = rest[i];
    int prc = ep_config_parse(&cfg, cargc, cargv, NULL, NULL, err);
    free(cargv);
    /* a pattern given on top of the preset decides the layer kinds: the preset's dense first
     * layer (--moe-layer-freq) yields to it unless given too */
    if (prc == 0 && preset && given(nrest, rest, "--hybrid-override-pattern") &&
        !given(nrest, rest, "--moe-layer-freq"))
        snprintf(cfg.moe_layer_freq, sizeof cfg.moe_layer_freq, "1");
    /* --num-layers N on top of the preset keeps its shape: the first layer dense, the rest MoE */
    else if (prc == 0 && preset && given(nrest, rest, "--num-layers") &&
             !given(nrest, rest, "--moe-layer-freq") && cfg.num_layers > 1)
        snprintf(cfg.moe_layer_freq, sizeof cfg.moe_layer_freq, "([0]*1+[1]*%d)",
                 cfg.num_layers - 1);
    if (prc != 0) {
        rc = fail2(err);
        goto out_plat;
    }
    default_layout(&cfg, &plat);
    if (cfg.world_size > plat.ngpus) {
        snprintf(err, EP_ERRLEN, "world size %d does not fit topology %s with %d GPUs",
                 cfg.world_size, plat.name, plat.ngpus);
        rc = fail2(err);
        goto out_plat;
    }
    if (ep_config_validate(&cfg, err) != 0) {
        rc = fail2(err);
        goto out_plat;
    }
    if (cfg.ignored_flags[0])
        fprintf(stderr, "epsim: note: accepted without effect on the simulated step: %s\n",
                cfg.ignored_flags);
    ep_sched s;
    if (ep_sched_build(&cfg, &s, err) != 0) {
        rc = fail2(err);
        goto out_plat;
    }
    double t_built = wall();
    usage_t u_built = resources();
    sim_result res;
    sim_engine_opts eo = sim_engine_defaults();
    eo.progress = o.progress < 0 ? isatty(STDERR_FILENO) : o.progress;
    eo.t0 = t0;
    if (sim_engine_run(&s, &plat, &calib, &eo, &res, err) != 0) {
        fprintf(stderr, "epsim: %s\n", err);
        rc = 1;
    } else {
        double t_sim = wall();
        usage_t u_sim = resources();
        sim_metrics m;
        rc = 0;
        if (sim_metrics_compute(&s, &res, &plat, &m) != 0) {
            fprintf(stderr, "epsim: out of memory computing metrics\n");
            rc = 1;
        }
        if (rc == 0 && o.summary && sim_write_summary_json(o.summary, &s, &m, &plat, &calib, err))
            rc = 2;
        int note = eo.progress && (o.csv || o.trace) && t_sim - t0 > 2.0;
        if (note) fputs("epsim: writing the per-op outputs\r", stderr);
        if (rc == 0 && o.csv && sim_write_csv(o.csv, &s, &res, err)) rc = 2;
        if (rc == 0 && o.trace && sim_write_trace(o.trace, &s, &res, &plat, err)) rc = 2;
        if (note) fputs("\033[K", stderr);
        if (rc == 2) fprintf(stderr, "epsim: %s\n", err);
        if (rc == 0) sim_print_summary(stdout, &s, &m, &plat, &calib);
        if (o.stats) {
            double t1 = wall();
            usage_t u1 = resources();
            fprintf(
                stderr,
                "epsim stats: wall %.3f s (schedule %.3f, simulation %.3f, outputs %.3f), "
                "%ld ops, %.0f ops/s simulated, %ld transfers (%ld timed by the engine), %ld events, "
                "%ld SimGrid waits, %ld sharing solves (%ld bandwidth changes without one)\n",
                t1 - t0, t_built - t0, t_sim - t_built, t1 - t_sim, res.nops,
                res.nops / (t_sim - t_built > 0 ? t_sim - t_built : 1e-9), res.ntransfers,
                res.ndirect, res.nevents, res.nwaits, res.nsolves, res.nkept);
            fprintf(stderr,
                    "epsim stats: cpu %.3f s (schedule %.3f, simulation %.3f, outputs %.3f), "
                    "peak RSS %ld MiB (%ld after the schedule, %ld after the simulation)\n",
                    u1.cpu - u0.cpu, u_built.cpu - u0.cpu, u_sim.cpu - u_built.cpu,
                    u1.cpu - u_sim.cpu, u1.rss_kib / 1024, u_built.rss_kib / 1024,
                    u_sim.rss_kib / 1024);
            fprintf(stderr,
                    "epsim stats: system cpu %.3f s (schedule %.3f, simulation %.3f, outputs "
                    "%.3f), %ld minor page faults\n",
                    u1.sys - u0.sys, u_built.sys - u0.sys, u_sim.sys - u_built.sys,
                    u1.sys - u_sim.sys, u1.minflt);
        }
        sim_result_free(&res);
    }
    ep_sched_free(&s);
out_plat:
    sim_platform_free(&plat);
    sim_calib_free(&calib);
out:
    free(sg);
    free(rest);
    return rc;
}
