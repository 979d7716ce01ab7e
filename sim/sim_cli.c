/* One epsim run from the command line (sim_cli.h). */
#include "sim_cli.h"

#include <ctype.h>
#include <errno.h>
#include <simgrid/engine.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xbt/config.h>
#include <xbt/log.h>

#include "ep_config.h"
#include "ep_io.h"
#include "ep_opts.h"
#include "ep_sched.h"
#include "sim_calib.h"
#include "sim_engine.h"
#include "sim_platform.h"
#include "sim_report.h"
#include "sim_sample.h"

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(epsim_cli, root, "epsim: command line");

#define DEFAULT_PRESET       "deepseek-v3-proxy16"
#define DEFAULT_MICROBATCHES 8

typedef struct {
    const char *topo, *calib, *summary, *trace, *csv, *max_memory;
    int stats, no_preset, help, version, has_argfile;
    const char *sample; /* --sample-microbatches N or auto (NULL, 0: the whole step) */
    int progress; /* -1: when stderr is a terminal */
} cli_opts;

/* What parsing fills: the options, the SimGrid arguments (sg) and the config flags (rest). */
typedef struct {
    cli_opts *o;
    int *nsg;
    char **sg;
    int *nrest;
    char **rest;
} split_ctx;

static int check_log(const char *arg, char err[EP_ERRLEN]);

/* --log=SETTINGS: checked here, then SimGrid's. */
static int cli_log(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)row;
    split_ctx *c = ctx;
    if (!v) {
        snprintf(err, EP_ERRLEN, "--log takes =SETTINGS, e.g. --log=epsim_engine.thres:debug");
        return -1;
    }
    if (check_log(v, err) != 0) return -1;
    c->sg[(*c->nsg)++] = (char *)v - strlen("--log="); /* its argument: v is the text after = */
    return 0;
}

static int cli_cfg(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    (void)row, (void)v, (void)ctx;
    snprintf(err, EP_ERRLEN,
             "--cfg: SimGrid settings are not taken (epsim sets the models it needs); "
             "--log=... is");
    return -1;
}

/* Anything else is a config flag, its value or an @file. */
static int cli_other(const char *arg, void *ctx, char err[EP_ERRLEN]) {
    (void)err;
    split_ctx *c = ctx;
    if (arg[0] == '@') c->o->has_argfile = 1;
    c->rest[(*c->nrest)++] = (char *)arg;
    return 0;
}

/* epsim's options; c NULL: for --help. */
static const ep_opt *cli_table(split_ctx *c) {
    static cli_opts none;
    cli_opts *o = c ? c->o : &none;
    static ep_opt rows[20];
    const ep_opt t[] = {
        {.name = "--topo",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &o->topo,
         .arg = "T",
         .help = "platform file, or a bundled name: h200x2 h200x4 dgx8 dgx16 dgx64\n"
                 "dgx256 dgx1024 nvl72 (default dgx16)"},
        {.name = "--calib",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &o->calib,
         .arg = "FILE",
         .help = "calibration JSON (docs/calibration.md), a name under\n"
                 "traces/calib, or none (built-in defaults); default: the one\n"
                 "the topology names (h200x2, h200x4: their own; dgx*: h100)"},
        {.name = "--summary-json",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &o->summary,
         .arg = "P",
         .help = "write the summary as JSON"},
        {.name = "--trace",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &o->trace,
         .arg = "P",
         .help = "write a Chrome trace (Perfetto)"},
        {.name = "--csv",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &o->csv,
         .arg = "P",
         .help = "write one row per op\n"
                 "(outputs appear together or not at all; - is standard output,\n"
                 "then the summary goes to stderr)"},
        {.name = "--no-preset",
         .kind = EP_OPT_FLAG,
         .target = &o->no_preset,
         .set = 1,
         .help = "start from the library defaults, not the DeepSeek-V3 proxy"},
        {.name = "--max-memory",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &o->max_memory,
         .arg = "GIB", /* checked after --help, in sim_cli_run */
         .help = "refuse a run whose estimated memory exceeds GIB (default: 80%\n"
                 "of this machine's memory; 0: no limit)"},
        {.name = "--sample-microbatches",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &o->sample,
         .arg = "N", /* checked once the layout is known, in sim_cli_run */
         .help = "simulate the steps of N and 2N microbatches per pipeline and\n"
                 "extrapolate the step linearly (N >= 2 x PP; auto: 2 x PP;\n"
                 "0: the whole step; docs/epsim.md, \"Sampled steps\")"},
        {.name = "--stats",
         .kind = EP_OPT_FLAG,
         .target = &o->stats,
         .set = 1,
         .help = "print wall/CPU time per phase, peak RSS, ops/s on stderr"},
        {.name = "--progress",
         .kind = EP_OPT_FLAG,
         .target = &o->progress,
         .set = 1,
         .shown = "--progress, --no-progress ",
         .help = "a progress line on stderr once the run took 2 s\n"
                 "(default: when stderr is a terminal)"},
        {.name = "--no-progress", .kind = EP_OPT_FLAG, .target = &o->progress, .set = 0},
        {.name = "--log",
         .takes = EP_OPT_JOINED,
         .kind = EP_OPT_CALL,
         .fn = cli_log,
         .arg = "...",
         .help = "SimGrid log control, e.g. --log=epsim_engine.thres:debug"},
        {.name = "--cfg", .takes = EP_OPT_JOINED, .kind = EP_OPT_CALL, .fn = cli_cfg},
        {.name = "--help", .kind = EP_OPT_FLAG, .target = &o->help, .set = 1},
        {.name = "-h", .kind = EP_OPT_FLAG, .target = &o->help, .set = 1},
        {.name = "--version", .kind = EP_OPT_FLAG, .target = &o->version, .set = 1},
        {.name = NULL},
    };
    _Static_assert(sizeof t <= sizeof rows, "cli_table: rows too small");
    memcpy(rows, t, sizeof t);
    return rows;
}

static void usage(FILE *f) {
    fputs(
        "usage: epsim [--topo T] [options] [Megatron flags] [@argfile ...]\n"
        "       epsim sweep --grid \"flag=v1,v2;flag2=a,b\" [--jobs N] [--shard i/n] --out CSV"
        " [flags]\n"
        "       epsim compare RUN [--topo T] [--calib FILE] [--json OUT] [--csv OUT]   (RUN.args + "
        "RUN.trace.json"
        " of a measured run)\n"
        "       epsim calibrate DIR [DIR ...] [--topo T] [--out FILE]   (fit from epref bench"
        " calib files)\n"
        "       epsim --version\n"
        "epsim options:\n",
        f);
    ep_opts_print_help(f, cli_table(NULL), 20);
    fputs("Without an @file the 16-layer DeepSeek-V3 proxy preset is read first; with one, the\n"
          "@file is the model (on the library defaults). The summary's first line names it.\n"
          "Unset parallel sizes default to the topology (docs/epsim.md, \"Default layout\").\n"
          "Bad input: one line on stderr, exit 2, no output file (docs/epsim.md, \"Failure\n"
          "behaviour\"). Config flags, with the defaults epsim uses:\n",
          f);
}

/* --help: the flag table with the values epsim starts from (the preset on the library defaults)
 * and the settings it takes from the topology. */
static void help(FILE *f) {
    static const char *const from_topo[] = {
        "expert-model-parallel-size",
        "from --topo: the largest divisor of the experts in a node",
        "global-batch-size",
        "micro batch x DP x 8 microbatches (2 x PP when PP > 1)",
        "world-size",
        "the GPUs of --topo",
        "gpus-per-node",
        "from --topo",
        NULL};
    usage(f);
    ep_config cfg;
    ep_config_defaults(&cfg);
    char path[4096], arg[4200], err[EP_ERRLEN];
    char *argv[] = {"epsim", arg, NULL};
    if (sim_find_bundled("configs", DEFAULT_PRESET, ".args", path, sizeof path) == 0) {
        snprintf(arg, sizeof arg, "@%s", path);
        if (ep_config_parse(&cfg, 2, argv, NULL, NULL, err) != 0) ep_config_defaults(&cfg);
    }
    ep_config_print_help_from(f, &cfg, from_topo,
                              "Defaults shown: the preset configs/" DEFAULT_PRESET
                              ".args on the library defaults\n(with an @file or --no-preset: "
                              "the library defaults, `epsched --help`).\n");
}

/* SimGrid's log control (xbt_log_control_set) aborts the process on a setting it cannot parse,
 * so epsim takes only what it can: space-separated CATEGORY.KEY:VALUE settings with KEY thres
 * (a level), fmt (known % sequences), add (additivity) or app (file:PATH). */
static int check_log(const char *arg, char err[EP_ERRLEN]) {
    static const char *const levels[] = {"trace",   "debug", "verbose",  "info",
                                         "warning", "error", "critical", NULL};
    char buf[1024];
    if (strlen(arg) >= sizeof buf) {
        snprintf(err, EP_ERRLEN, "--log=: setting longer than %zu characters", sizeof buf - 1);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *save = NULL, *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        char *dot = strchr(w, '.'), *sep = dot ? strpbrk(dot, ":=") : NULL;
        int ok = dot && sep && dot > w;
        for (char *q = w; ok && q < dot; q++)
            ok = isalnum((unsigned char)*q) || *q == '_';
        if (!ok) {
            snprintf(err, EP_ERRLEN,
                     "--log=%.100s: '%.100s' is not CATEGORY.KEY:VALUE (e.g. "
                     "--log=epsim_engine.thres:debug)",
                     arg, w);
            return -1;
        }
        *sep = 0;
        const char *key = dot + 1, *val = sep + 1;
        if (!strcmp(key, "thres") || !strcmp(key, "threshold")) {
            int k = 0;
            while (levels[k] && strcasecmp(levels[k], val))
                k++;
            if (!levels[k]) {
                snprintf(err, EP_ERRLEN,
                         "--log=%.100s: level '%.40s' is not one of trace, debug, verbose, info, "
                         "warning, error, critical",
                         arg, val);
                return -1;
            }
        } else if (!strcmp(key, "fmt") || !strcmp(key, "format")) {
            for (const char *q = val; *q; q++) {
                if (*q != '%') continue;
                q++;
                while (isdigit((unsigned char)*q))
                    q++;
                if (!*q || !strchr("mcpFLMlhaidr%ne", *q)) {
                    snprintf(err, EP_ERRLEN,
                             "--log=%.100s: format sequences are %%m %%c %%p %%F %%L %%M %%l %%h "
                             "%%a %%i %%d %%r %%%% %%n %%e",
                             arg);
                    return -1;
                }
            }
        } else if (!strcmp(key, "app") || !strcmp(key, "appender")) {
            if (strncmp(val, "file:", 5) != 0 || !val[5]) {
                snprintf(err, EP_ERRLEN, "--log=%.100s: the appender epsim takes is file:PATH",
                         arg);
                return -1;
            }
        } else if (strcmp(key, "add") && strcmp(key, "additivity")) {
            snprintf(err, EP_ERRLEN, "--log=%.100s: '%.40s' is not thres, fmt, add or app", arg,
                     key);
            return -1;
        }
    }
    return 0;
}

/* Splits argv into epsim options, SimGrid options (sg) and config flags (rest). */
static int split_args(int argc, char **argv, cli_opts *o, int *nsg, char **sg, int *nrest,
                      char **rest, char err[EP_ERRLEN]) {
    split_ctx c = {o, nsg, sg, nrest, rest};
    ep_opts p = {cli_table(&c), cli_other, &c, 0};
    return ep_opts_parse(&p, argc - 1, argv + 1, err) < 0 ? -1 : 0;
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
        int etp = ep_config_expert_tensor_parallel(cfg);
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
        struct stat st;
        if (arg && stat(arg, &st) != 0 && errno != ENOENT && errno != ENOTDIR)
            snprintf(err, EP_ERRLEN, "--calib %s: %s", arg, strerror(errno));
        else if (arg)
            snprintf(err, EP_ERRLEN, "--calib %s: no such calibration file", arg);
        else
            snprintf(err, EP_ERRLEN, "platform %s names calibration %s, which is not found",
                     p->name, name);
        return -1;
    }
    return sim_calib_load(c, path, err);
}

static int fail2(const char *msg) {
    char safe[EP_ERRLEN * 4];
    fprintf(stderr, "epsim: %s\n", ep_escape_text(msg, safe, sizeof safe));
    return 2;
}

/* The default memory limit: 80% of this machine's memory, or of the cgroup's limit if lower. */
static double default_memory_limit(void) {
    double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (f) {
        double cg;
        if (fscanf(f, "%lf", &cg) == 1 && cg > 0 && (phys <= 0 || cg < phys)) phys = cg;
        fclose(f);
    }
    return phys > 0 ? 0.8 * phys : 0;
}

/* The simulator's memory for a configuration, estimated before the schedule is built (measured
 * with --stats: 54-78 ops per rank, microbatch and layer with MoE layers - 78 for DeepSeek-V3 with
 * MLA, TP 2 and recomputation on dgx1024, whose 1.6e8 ops took 21.3 GB resident -, 36 for dense
 * ones with TP and FP8 casts; ~130 bytes per op with its times (Llama 3.1 405B on dgx1024: 14.2
 * GiB resident for 1.1e8 ops), plus SimGrid and the platform; docs/epsim.md, "Failure
 * behaviour"). The op counts carry the margin. */
static double memory_estimate(const ep_config *c, double *ops) {
    double nmb = ep_config_num_microbatches(c);
    double layers = (double)(c->num_layers + c->mtp_num_layers) / c->pipeline_model_parallel_size;
    if (layers < 1) layers = 1;
    *ops = (double)c->world_size * nmb * layers * (c->num_experts > 0 ? 84 : 40);
    return 64.0 * 1048576 + *ops * 130;
}

static const char *human_bytes(double b, char *buf, size_t n) {
    if (b >= 1099511627776.0)
        snprintf(buf, n, "%.1f TiB", b / 1099511627776.0);
    else
        snprintf(buf, n, "%.1f GiB", b / 1073741824.0);
    return buf;
}

/* Every output path checked before any work: writable, not a directory, no two the same. */
static int check_outputs(const cli_opts *o, char err[EP_ERRLEN]) {
    const char *path[3] = {o->summary, o->csv, o->trace};
    const char *flag[3] = {"--summary-json", "--csv", "--trace"};
    for (int i = 0; i < 3; i++) {
        if (!path[i]) continue;
        char e[EP_ERRLEN];
        if (ep_output_check(path[i], e) != 0) {
            snprintf(err, EP_ERRLEN, "%s: %s", flag[i], e);
            return -1;
        }
        struct stat a, b;
        for (int j = 0; j < i; j++) {
            if (!path[j]) continue;
            int same = strcmp(path[i], path[j]) == 0 ||
                       (stat(path[i], &a) == 0 && stat(path[j], &b) == 0 && a.st_dev == b.st_dev &&
                        a.st_ino == b.st_ino && S_ISREG(a.st_mode));
            if (same) {
                snprintf(err, EP_ERRLEN, "%s and %s name the same file %s", flag[j], flag[i],
                         path[i]);
                return -1;
            }
        }
    }
    return 0;
}

/* A file of the current directory taken for a name that is also bundled: say which one. */
static void note_shadow(const char *kind, const char *flag, const char *arg, const char *suffix,
                        const char *used) {
    char bundled[4096];
    if (!arg || strchr(arg, '/') || strcmp(used, arg) != 0) return;
    if (sim_find_bundled(kind, arg, suffix, bundled, sizeof bundled) != 0) return;
    char safe[1024];
    fprintf(stderr,
            "epsim: note: %s %s is the file ./%s of the current directory, not the bundled %s "
            "(give a path to choose: ./%s or %s)\n",
            flag, ep_escape_text(arg, safe, sizeof safe), arg, bundled, arg, bundled);
}

/* Writes the outputs as one set: each into its temporary (devices and FIFOs last, in place),
 * then all renamed, or none on any error. */
static int write_outputs(const cli_opts *o, const char *model, const ep_sched *s,
                         const sim_result *res, const sim_metrics *m, const sim_platform *p,
                         const sim_calib *c, char err[EP_ERRLEN]) {
    ep_outputs_begin();
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        /* pass 0: files through temporaries; pass 1: written in place */
        if (o->summary && ep_output_in_place(o->summary) == pass)
            rc = sim_write_summary_json(o->summary, model, s, m, p, c, err);
        if (rc == 0 && o->csv && ep_output_in_place(o->csv) == pass)
            rc = sim_write_csv(o->csv, s, res, err);
        if (rc == 0 && o->trace && ep_output_in_place(o->trace) == pass)
            rc = sim_write_trace(o->trace, s, res, p, err);
    }
    if (rc != 0) {
        ep_outputs_abort();
        return -1;
    }
    return ep_outputs_commit(err);
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
    if (o.help || o.version) {
        if (o.help)
            help(stdout);
        else
            printf("epsim %s (%s)\n", ep_version(), ep_git_revision());
        rc = 0;
        goto out;
    }
    /* everything that can be checked without simulating is, before anything else */
    double mem_limit = default_memory_limit();
    if (o.max_memory) {
        char *end;
        errno = 0;
        double g = strtod(o.max_memory, &end);
        if (*end || errno || !(g >= 0) || g > 1e9) {
            snprintf(err, EP_ERRLEN, "--max-memory '%.64s' is not a size in GiB (0: no limit)",
                     o.max_memory);
            rc = fail2(err);
            goto out;
        }
        mem_limit = g * 1073741824.0;
    }
    if (check_outputs(&o, err) != 0) {
        rc = fail2(err);
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
    note_shadow("topos", "--topo", o.topo, ".xml", plat.path);
    if (o.calib && strcmp(o.calib, "none") != 0)
        note_shadow("calib", "--calib", o.calib, ".json", calib.source);

    /* config: preset first (unless an @file or --no-preset), then the flags given */
    ep_config cfg;
    ep_config_defaults(&cfg);
    cfg.expert_model_parallel_size = 0;
    cfg.global_batch_size = 0;
    cfg.gpus_per_node = 0;
    char preset_arg[4200], model[1024];
    char **cargv = calloc((size_t)nrest + 2, sizeof *cargv);
    if (!cargv) {
        rc = 1;
        goto out_plat;
    }
    int cargc = 0;
    cargv[cargc++] = argv[0];
    if (!o.has_argfile && !o.no_preset) {
        char path[4096];
        if (sim_find_bundled("configs", DEFAULT_PRESET, ".args", path, sizeof path) != 0) {
            free(cargv);
            rc = fail2("cannot find the default preset configs/" DEFAULT_PRESET ".args");
            goto out_plat;
        }
        snprintf(preset_arg, sizeof preset_arg, "@%s", path);
        cargv[cargc++] = preset_arg;
    }
    int preset = cargc > 1;
    /* the model, as the summary's first line names it: the @files, the preset or the defaults */
    size_t used = 0;
    int nflags = 0;
    model[0] = 0;
    for (int i = 1; i < nrest; i++) {
        if (rest[i][0] != '@') {
            nflags += strncmp(rest[i], "--", 2) == 0;
            continue;
        }
        const char *base = strrchr(rest[i] + 1, '/');
        char safe[256];
        ep_escape_text(base ? base + 1 : rest[i] + 1, safe, sizeof safe);
        used +=
            (size_t)snprintf(model + used, sizeof model - used, "%s%s", used ? " + " : "", safe);
        if (used >= sizeof model) used = sizeof model - 1;
    }
    if (preset)
        snprintf(model, sizeof model, "%s.args", DEFAULT_PRESET);
    else if (!o.has_argfile)
        snprintf(model, sizeof model, "built-in default");
    used = strlen(model);
    if (nflags && used + 16 < sizeof model) snprintf(model + used, sizeof model - used, " + flags");
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
    /* --sample-microbatches: the steps of N and 2N microbatches instead of the whole step; a
     * large step without the flag is sampled too (sim_sample_default) */
    ep_config short_cfg, long_cfg;
    int sample_n;
    double whole_ops;
    memory_estimate(&cfg, &whole_ops);
    const char *sample = sim_sample_default(o.sample, whole_ops, o.csv || o.trace);
    int sampled = sim_sample_plan(sample, &cfg, &sample_n, &short_cfg, &long_cfg, err);
    /* not asked for: a step that cannot be sampled runs whole */
    if (sampled < 0 && !o.sample) sampled = 0;
    if (sampled > 0 && (o.csv || o.trace)) {
        snprintf(err, EP_ERRLEN,
                 "--sample-microbatches simulates part of the step: --csv and --trace need the "
                 "whole step");
        sampled = -1;
    }
    if (sampled < 0) {
        rc = fail2(err);
        goto out_plat;
    }
    const ep_config *run_cfg = sampled ? &long_cfg : &cfg;
    double ops_est, mem_est = memory_estimate(run_cfg, &ops_est);
    if (mem_limit > 0 && mem_est > mem_limit) {
        char a[64], b[64];
        snprintf(err, EP_ERRLEN,
                 "the simulation would need about %s of memory (%.3g ops: %d ranks x %d "
                 "microbatches x %d layers), above the limit of %s (%s); simulate part of the "
                 "step (--sample-microbatches N) or set --max-memory GIB",
                 human_bytes(mem_est, a, sizeof a), ops_est, cfg.world_size,
                 ep_config_num_microbatches(run_cfg), cfg.num_layers + cfg.mtp_num_layers,
                 human_bytes(mem_limit, b, sizeof b),
                 o.max_memory ? "--max-memory" : "80% of this machine's memory");
        rc = fail2(err);
        goto out_plat;
    }
    if (cfg.ignored_flags[0]) {
        char safe[1024];
        fprintf(stderr, "epsim: note: accepted without effect on the simulated step: %s\n",
                ep_escape_text(cfg.ignored_flags, safe, sizeof safe));
    }
    sim_metrics short_m;
    if (sampled && sim_sample_run_child(&short_cfg, &plat, &calib, &short_m, err) != 0) {
        fprintf(stderr, "epsim: %s\n", err);
        rc = 1;
        goto out_plat;
    }
    ep_sched s;
    if (ep_sched_build(run_cfg, &s, err) != 0) {
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
        if (rc == 0 && sampled) { /* the figures and the config of the step asked for */
            sim_metrics long_m = m;
            sim_sample_extrapolate(&short_m, &long_m, sample_n, ep_config_num_microbatches(&cfg),
                                   &m);
            m.sample_default = !o.sample;
            s.cfg = cfg;
            s.num_microbatches = ep_config_num_microbatches(&cfg);
        }
        int note = eo.progress && (o.csv || o.trace) && t_sim - t0 > 2.0;
        if (note) fputs("epsim: writing the per-op outputs\r", stderr);
        if (rc == 0 && write_outputs(&o, model, &s, &res, &m, &plat, &calib, err) != 0)
            rc = fail2(err);
        if (note) fputs("\033[K", stderr);
        /* the human summary; on stderr when an output took standard output */
        int dash = (o.summary && !strcmp(o.summary, "-")) || (o.csv && !strcmp(o.csv, "-")) ||
                   (o.trace && !strcmp(o.trace, "-"));
        if (rc == 0) sim_print_summary(dash ? stderr : stdout, model, &s, &m, &plat, &calib);
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
