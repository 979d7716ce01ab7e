/* epsim search: the legal layouts of a model on a topology at a global batch, pruned by memory,
 * dominance and a compute lower bound, the rest simulated within a budget (sim_cli.h;
 * docs/epsim.md, "Search").
 *
 * 1. Enumerate: the product of the axes below (an axis whose flag is on the command line keeps
 *    the value given); each combination is checked by ep_config_validate, nothing else.
 * 2. Estimate: for each legal layout, the schedule of one rank per pipeline stage
 *    (ep_sched_build_ranks) with at most 2 x PP microbatches: its peak memory (ep_mem_rank_peak)
 *    and a lower bound on the step (per rank, the larger of its host's issue time and each
 *    stream's ops at their standalone cost, sim_cost, collectives at what must cross links,
 *    coll_bound_s; per-microbatch ops scaled to the full count; with a pipeline, each stage's
 *    compute plus the fill and drain of the stages before it). In worker processes (--jobs), a
 *    layout group at a time.
 *    The same pass estimates the step: each rank's longest path through its ops at their
 *    standalone times (stream order, dependencies, the host's issue), scaled to the step's
 *    microbatches - no bound, but it counts the transfers the compute waits for.
 * 3. Prune: model state alone above the GPU memory (the rest of that layout group needs no
 *    build); estimated peak above it; recomputation where the same layout fits with less
 *    (recomputation only adds compute ops); then, simulating by increasing estimate, every
 *    layout whose bound is not below the best simulated step time; and what the --budget leaves.
 */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS: the workers' shared records */
#include "sim_cli.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xbt/config.h>
#include <xbt/log.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>

#include "ep_config.h"
#include "ep_groups.h"
#include "ep_io.h"
#include "ep_route.h"
#include "ep_xfer.h"
#include "ep_memory.h"
#include "sim_algo.h"
#include "ep_opts.h"
#include "ep_sched.h"
#include "sim_calib.h"
#include "sim_cost.h"
#include "sim_platform.h"
#include "sim_runs.h"

#define GIB 1073741824.0
#define MAX_VALS  40
#define MAX_WORDS 8
#define NAXES     10

/* One value of an axis: its label and the flags that set it ("" words: the base's value). */
typedef struct {
    char label[48];
    char words[MAX_WORDS][200];
    int nwords;
} value;

typedef struct {
    const char *name;         /* CSV column */
    const char *flags[6];     /* flags that fix the axis when given on the command line */
    value v[MAX_VALS];
    int n;
} axis;

enum { AX_TP, AX_CP, AX_PIPE, AX_EP, AX_ETP, AX_DP, AX_DISP, AX_OVL, AX_MBS, AX_RC };

/* A candidate's fate (CSV status). */
enum {
    ST_NONE,
    ST_STATE,     /* model state alone exceeds the GPU memory */
    ST_MEMORY,    /* estimated peak exceeds it */
    ST_RECOMPUTE, /* the same layout fits with less recomputation */
    ST_FIT,       /* estimated to fit: simulated, or pruned by bound or budget below */
    ST_BOUND,
    ST_BUDGET,
    ST_SIM,       /* simulated (res) */
    ST_ERROR,     /* the estimate's schedule could not be built */
    ST_NUM
};
static const char *const k_status[ST_NUM] = {
    "",
    "pruned: model state exceeds the GPU memory",
    "pruned: estimated peak memory exceeds the GPU memory",
    "pruned: dominated (fits with less recomputation)",
    "fits",
    "pruned: compute lower bound not below the best simulated step",
    "not simulated: budget",
    "ok",
    "estimate failed"};

typedef struct {
    long index;            /* in the enumeration (all combinations) */
    unsigned char vi[NAXES];
    long group;            /* candidates differing only in recomputation share it */
    long key;              /* ... and in dispatcher, overlap, micro batch: model state */
    int status;
    double state, mem, lb; /* estimates, bytes and seconds */
    double est;            /* the step's estimate that orders the simulations (estimate()) */
    sim_run_result res;
} cand;

typedef struct {
    const char *topo, *calib, *out, *max_mem;
    const char *sample; /* --sample-microbatches, passed to every simulation */
    int jobs, budget, show;
    sim_runs_shard shard;
    char **common;
    int ncommon;
} search_opts;

static int search_other(const char *arg, void *ctx, char err[EP_ERRLEN]) {
    (void)err;
    search_opts *o = ctx;
    o->common[o->ncommon++] = (char *)arg;
    return 0;
}

static int fail(const char *msg) {
    char safe[EP_ERRLEN * 4];
    fprintf(stderr, "epsim search: %s\n", ep_escape_text(msg, safe, sizeof safe));
    return 2;
}

/* Whether the flag appears among the arguments (as --flag V or --flag=V). */
static int given(int n, char **args, const char *flag) {
    size_t k = strlen(flag);
    for (int i = 0; i < n; i++)
        if (strncmp(args[i], "--", 2) == 0 && strncmp(args[i] + 2, flag, k) == 0 &&
            (args[i][k + 2] == 0 || args[i][k + 2] == '='))
            return 1;
    return 0;
}

static void add(axis *a, const char *label, const char *w0, const char *w1, const char *w2,
                const char *w3) {
    value *v = &a->v[a->n++];
    memset(v, 0, sizeof *v);
    snprintf(v->label, sizeof v->label, "%s", label);
    const char *w[4] = {w0, w1, w2, w3};
    for (int i = 0; i < 4; i++)
        if (w[i]) snprintf(v->words[v->nwords++], sizeof v->words[0], "%s", w[i]);
}

/* The pipeline values: PP 1..16 with VPP 1, 2, and every larger VPP that cuts the stages evenly
 * into model chunks of 1-4 layers; a layer count PP x VPP does not divide gets uneven first and
 * last stages (VPP 1) or a --pipeline-model-parallel-layout (VPP 2). */
static void pipeline_values(axis *a, const ep_config *base, int world) {
    int L = base->num_layers;
    char w[4][200], label[48];
    for (int pp = 1; pp <= 16 && pp <= L && pp <= world; pp *= 2)
        for (int vpp = 1; vpp <= (pp > 1 ? L / pp : 1); vpp++) {
            int V = pp * vpp;
            if (V > L || (vpp > 2 && (L % V != 0 || L / V > 4))) continue;
            snprintf(w[0], sizeof w[0], "--pipeline-model-parallel-size=%d", pp);
            snprintf(w[1], sizeof w[1], "--num-virtual-stages-per-pipeline-rank=%d", vpp);
            if (L % V == 0) {
                snprintf(label, sizeof label, "%d/%d", pp, vpp);
                add(a, label, w[0], vpp > 1 ? w[1] : NULL, NULL, NULL);
            } else if (vpp == 1) {
                int f, l;
                if (pp == 2) {
                    f = L / 2, l = L - f;
                } else { /* middle stages m each, first and last the rest, at most m each */
                    int m = (L + pp - 1) / pp;
                    while ((pp - 2) * m < L && L - (pp - 2) * m > 2 * m)
                        m++;
                    int rest = L - (pp - 2) * m;
                    if (rest < 2) continue;
                    f = rest / 2, l = rest - f;
                }
                snprintf(label, sizeof label, "%d/1 first %d last %d", pp, f, l);
                snprintf(w[1], sizeof w[1], "--decoder-first-pipeline-num-layers=%d", f);
                snprintf(w[2], sizeof w[2], "--decoder-last-pipeline-num-layers=%d", l);
                add(a, label, w[0], w[1], w[2], NULL);
            } else if (!base->hybrid_override_pattern[0]) {
                int q = L / V, r = L % V, k = snprintf(w[2], sizeof w[2],
                                                        "--pipeline-model-parallel-layout=E");
                for (int s = 0; s < V && k < (int)sizeof w[2]; s++)
                    k += snprintf(w[2] + k, sizeof w[2] - (size_t)k, "%st*%d", s ? "|" : "",
                                  q + (s >= 1 && s <= r));
                for (int m = 0; m < base->mtp_num_layers && k < (int)sizeof w[2]; m++)
                    k += snprintf(w[2] + k, sizeof w[2] - (size_t)k, "m");
                if (k < (int)sizeof w[2]) snprintf(w[2] + k, sizeof w[2] - (size_t)k, "L");
                snprintf(label, sizeof label, "%d/%d layout", pp, vpp);
                add(a, label, w[0], w[2], NULL, NULL);
            }
        }
}

/* An axis that means nothing to the model keeps one value without flags: a dense model's ETP,
 * dispatcher and EP overlap, whose values would only repeat the same layout. */
static void not_applicable(axis *a) {
    a->n = 0;
    add(a, "n/a", NULL, NULL, NULL, NULL);
}

static void make_axes(axis *ax, const ep_config *base, int world, int gpn) {
    char w[200], l[48];
    memset(ax, 0, sizeof(axis) * NAXES);
    ax[AX_TP] = (axis){.name = "tp", .flags = {"tensor-model-parallel-size"}};
    for (int t = 1; t <= gpn && t <= 8; t *= 2) {
        snprintf(w, sizeof w, "--tensor-model-parallel-size=%d", t);
        snprintf(l, sizeof l, "%d", t);
        add(&ax[AX_TP], l, w, NULL, NULL, NULL);
    }
    ax[AX_CP] = (axis){.name = "cp", .flags = {"context-parallel-size"}};
    add(&ax[AX_CP], "1", "--context-parallel-size=1", NULL, NULL, NULL);
    add(&ax[AX_CP], "2", "--context-parallel-size=2", NULL, NULL, NULL);
    ax[AX_PIPE] = (axis){.name = "pp_vpp", .flags = {"pipeline-model-parallel-size", "num-virtual-stages-per-pipeline-rank",
                          "pipeline-model-parallel-layout", "decoder-first-pipeline-num-layers",
                          "decoder-last-pipeline-num-layers"}};
    pipeline_values(&ax[AX_PIPE], base, world);
    ax[AX_EP] = (axis){.name = "ep", .flags = {"expert-model-parallel-size"}};
    int E = base->num_experts > 0 ? base->num_experts : 1;
    for (int e = 1; e <= E && e <= world && ax[AX_EP].n < MAX_VALS; e++)
        if (E % e == 0) {
            snprintf(w, sizeof w, "--expert-model-parallel-size=%d", e);
            snprintf(l, sizeof l, "%d", e);
            add(&ax[AX_EP], l, w, NULL, NULL, NULL);
        }
    ax[AX_ETP] = (axis){.name = "etp", .flags = {"expert-tensor-parallel-size"}};
    add(&ax[AX_ETP], "1", "--expert-tensor-parallel-size=1", NULL, NULL, NULL);
    add(&ax[AX_ETP], "tp", NULL, NULL, NULL, NULL); /* 0: ETP = TP (a duplicate at TP 1) */
    ax[AX_DP] = (axis){.name = "dp_sharding", .flags = {"use-distributed-optimizer", "use-megatron-fsdp", "use-torch-fsdp2",
                        "num-distributed-optimizer-instances", "data-parallel-sharding-strategy"}};
    add(&ax[AX_DP], "ddp", "--overlap-grad-reduce", NULL, NULL, NULL);
    add(&ax[AX_DP], "distopt", "--use-distributed-optimizer", "--overlap-grad-reduce",
        "--overlap-param-gather", NULL);
    add(&ax[AX_DP], "fsdp", "--use-megatron-fsdp",
        "--data-parallel-sharding-strategy=optim_grads_params", "--overlap-grad-reduce",
        "--overlap-param-gather");
    add(&ax[AX_DP], "hsdp2", "--use-megatron-fsdp",
        "--data-parallel-sharding-strategy=optim_grads_params", "--overlap-grad-reduce",
        "--num-distributed-optimizer-instances=2");
    ax[AX_DISP] = (axis){.name = "dispatcher", .flags = {"moe-token-dispatcher-type", "moe-flex-dispatcher-backend"}};
    add(&ax[AX_DISP], "alltoall", "--moe-token-dispatcher-type=alltoall", NULL, NULL, NULL);
    add(&ax[AX_DISP], "deepep", "--moe-token-dispatcher-type=flex",
        "--moe-flex-dispatcher-backend=deepep", NULL, NULL);
    add(&ax[AX_DISP], "hybridep", "--moe-token-dispatcher-type=flex",
        "--moe-flex-dispatcher-backend=hybridep", NULL, NULL);
    ax[AX_OVL] = (axis){.name = "ep_overlap", .flags = {"overlap-moe-expert-parallel-comm", "delay-wgrad-compute"}};
    add(&ax[AX_OVL], "off", NULL, NULL, NULL, NULL);
    add(&ax[AX_OVL], "on", "--overlap-moe-expert-parallel-comm", NULL, NULL, NULL);
    add(&ax[AX_OVL], "on+wgrad", "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute",
        NULL, NULL);
    ax[AX_MBS] = (axis){.name = "mbs", .flags = {"micro-batch-size"}};
    add(&ax[AX_MBS], "1", "--micro-batch-size=1", NULL, NULL, NULL);
    add(&ax[AX_MBS], "2", "--micro-batch-size=2", NULL, NULL, NULL);
    /* last: a group's recomputation variants are consecutive, least recomputation first */
    ax[AX_RC] = (axis){.name = "recompute", .flags = {"recompute-granularity", "recompute-method", "recompute-num-layers",
                        "recompute-modules"}};
    add(&ax[AX_RC], "none", NULL, NULL, NULL, NULL);
    add(&ax[AX_RC], "selective", "--recompute-granularity=selective", NULL, NULL, NULL);
    add(&ax[AX_RC], "full", "--recompute-granularity=full", "--recompute-method=uniform",
        "--recompute-num-layers=1", NULL);
    if (base->num_experts <= 0) {
        not_applicable(&ax[AX_ETP]);
        not_applicable(&ax[AX_DISP]);
        not_applicable(&ax[AX_OVL]);
    }
}

/* An axis the command line fixes keeps one value: the base's. */
static void fix_given(axis *ax, int n, char **args) {
    for (int a = 0; a < NAXES; a++)
        for (int f = 0; f < 6 && ax[a].flags[f]; f++)
            if (given(n, args, ax[a].flags[f])) {
                ax[a].n = 0;
                add(&ax[a], "given", NULL, NULL, NULL, NULL);
                break;
            }
}

/* cfg = base + the candidate's flags; 0 when legal, else -1 with err. */
static int apply(const ep_config *base, const axis *ax, const unsigned char *vi, ep_config *cfg,
                 char err[EP_ERRLEN]) {
    *cfg = *base;
    for (int a = 0; a < NAXES; a++) {
        const value *v = &ax[a].v[vi[a]];
        for (int w = 0; w < v->nwords; w++) {
            char name[200];
            snprintf(name, sizeof name, "%s", v->words[w] + 2);
            char *eq = strchr(name, '=');
            const char *val = "true";
            if (eq) *eq = 0, val = eq + 1;
            if (ep_config_set(cfg, name, val, err) != 0) return -1;
        }
    }
    return ep_config_validate(cfg, err);
}

/* --- the estimate ---------------------------------------------------------------------------- */

typedef struct {
    int ngpus, gpn;
    double peak_flops, hbm_bw, hbm_bytes;
    double nvl_bw, net_bw; /* route bandwidth GPU 0 -> 1 and GPU 0 -> the next node's first (0:
                              none) */
    char calib[4096]; /* the calibration file, "" for the built-in defaults */
} plat_info;

/* What a transfer must move at full link bandwidth: its time over NVLink and over the NICs (it
 * takes at least the larger), and its NVLink flows' typical bytes (a per-flow efficiency curve is
 * read there). */
typedef struct {
    double nvl, net, flow;
} link_time;

static double bound_of(link_time l) {
    return fmax(l.nvl, l.net);
}

/* At the efficiencies its algorithm moves at (sim_algo_efficiency): what the estimate takes. */
static double at_efficiency(link_time l, sim_algo_eff e) {
    double nvl = e.nvl_by_flow && e.nvl_by_flow->n ? sim_table_eval(e.nvl_by_flow, l.flow) : e.nvl;
    return fmax(nvl > 0 ? l.nvl / nvl : l.nvl, e.net > 0 ? l.net / e.net : l.net);
}

/* A lower bound on a collective's time from what must cross links, whatever the algorithm: every
 * member receives its share through its own link (the kind's link bytes over the node's link
 * bandwidth), and over several nodes each node imports what the other nodes hold (all_gather:
 * the others' contributions; reduce_scatter, all_reduce: the partial sums of its shards, and for
 * all_reduce the reduced shards back). The group's members in a node get their share of its
 * NICs, one NIC per GPU: the node's other GPUs are members of groups of the same kind that move
 * as much (a layout is the same on every rank of a stage), so over an iteration the node's NICs
 * carry all of it - with one member per node, one NIC's worth. 0 for other kinds.
 * nodes_of: per group, the nodes it spans (ep_route_nodes), 0 until first asked; scratch: room for
 * a group's ranks. */
static link_time coll_bound_s(const plat_info *pi, const ep_sched *s, const ep_op *op,
                              int *nodes_of, int *scratch) {
    link_time l = {0, 0, 0};
    if (op->group < 0 || (op->kind != EP_OP_ALL_GATHER && op->kind != EP_OP_REDUCE_SCATTER &&
                          op->kind != EP_OP_ALL_REDUCE))
        return l;
    const ep_group *g = &s->groups[op->group];
    int n = g->size;
    if (n < 2) return l;
    int gpn = pi->gpn > 0 ? pi->gpn : 1;
    if (!nodes_of[op->group]) nodes_of[op->group] = ep_route_nodes(g->ranks, n, gpn, scratch);
    int nodes = nodes_of[op->group];
    double link = ep_xfer_size_of(op->kind, n, op->bytes).link;
    l.nvl = pi->nvl_bw > 0 ? link / pi->nvl_bw : 0;
    l.flow = link;
    if (nodes > 1 && pi->net_bw > 0) {
        double B = op->bytes, N = nodes, imp = op->kind == EP_OP_ALL_GATHER
                                                   ? (N - 1) * (n / N) * B
                                                   : (op->kind == EP_OP_ALL_REDUCE ? 2 : 1) *
                                                         B * (N - 1) / N;
        double members = n / N < gpn ? n / N : gpn; /* of this group in a node */
        l.net = imp / (members * pi->net_bw);
    }
    return l;
}

/* A lower bound on a token all-to-all's time at member `me` of its group (global rank r): inside
 * the node, what it sends to and receives from the node's other members through its own NVLink
 * (the larger of the two over the link bandwidth); across nodes, what its node's members of the
 * group send to and receive from the other nodes (one copy per node where the traffic has node
 * totals, the deepep/hybridep transport) over their NICs, one per GPU. Both take the larger of
 * the two directions, so dispatch and combine (the traffic transposed) have the same bound. 0 for
 * other ops. */
static link_time a2a_bound_s(const plat_info *pi, const ep_sched *s, const ep_op *op, int r) {
    link_time l = {0, 0, 0};
    if (op->traffic < 0 || (op->kind != EP_OP_A2A_DISPATCH && op->kind != EP_OP_A2A_COMBINE))
        return l;
    const ep_traffic *tr = &s->traffic[op->traffic];
    const ep_group *g = &s->groups[tr->group];
    const int n = tr->n;
    int me = -1;
    for (int i = 0; i < n && me < 0; i++)
        if (g->ranks[i] == r) me = i;
    if (me < 0) return l;
    const int home = tr->node_of[me];
    double out = 0, in = 0, xout = 0, xin = 0; /* dispatch direction; x: across nodes */
    int k = 0;                                 /* the group's members in my node */
    int peers = 0;                             /* of them, the ones I send to */
    for (int i = 0; i < n; i++) {
        if (tr->node_of[i] != home) continue;
        k++;
        for (int j = 0; j < n; j++) {
            if (j == i) continue;
            double ij = (double)tr->bytes[i * n + j], ji = (double)tr->bytes[j * n + i];
            if (tr->node_of[j] != home) {
                if (!tr->node_bytes) xout += ij, xin += ji;
            } else if (i == me) {
                out += ij, in += ji;
                peers += ij > 0;
            }
        }
    }
    if (tr->node_bytes) /* one copy per destination node: my node's export and import */
        for (int i = 0; i < n; i++)
            for (int m = 0; m < tr->nnodes; m++) {
                double b = (double)tr->node_bytes[i * tr->nnodes + m];
                if (tr->node_of[i] == home && m != home) xout += b;
                if (tr->node_of[i] != home && m == home) xin += b;
            }
    l.nvl = pi->nvl_bw > 0 ? fmax(out, in) / pi->nvl_bw : 0;
    l.flow = peers ? out / peers : 0;
    if (tr->nnodes > 1 && pi->net_bw > 0 && k > 0) l.net = fmax(xout, xin) / (k * pi->net_bw);
    return l;
}

/* How long an op that takes alone s alone and shared s beside another runs when the other goes on
 * for `overlap` s after its start: at the shared rate while both run, then alone. */
static double beside(double alone, double shared, double overlap) {
    if (overlap <= 0 || shared <= alone) return alone;
    if (overlap >= shared) return shared;
    return overlap + (1 - overlap / shared) * alone;
}

/* Peak memory, model state, the compute lower bound of cfg (legal) and an estimate of its step from
 * one rank per pipeline stage. The estimate is each rank's longest path through its ops at their
 * standalone times (after the op before it on its stream, its dependencies and its issue by the
 * host, which waits at host syncs), over the microbatches built and scaled to the step's: unlike
 * the bound it counts a transfer the compute waits for, so a layout whose all-to-alls are exposed
 * comes after one that hides them; it is no bound (the pipeline's warm-up is scaled too) and only
 * orders the simulations. Returns 0, or -1 with err. */
static int estimate(const ep_config *full, const plat_info *pi, const sim_calib *calib,
                    double *state, double *mem, double *lb, double *est, int state_only,
                    char err[EP_ERRLEN]) {
    ep_config cfg = *full;
    cfg.routing_budget = 1;      /* one draw, shared by microbatches and EP groups, */
    cfg.routing_layer_draws = 1; /* and by the layers: the rows of a layer, not of each */
    int pp = cfg.pipeline_model_parallel_size, nmb = ep_config_num_microbatches(&cfg);
    int nmb2 = state_only ? pp : 2 * pp;
    if (nmb2 < 2) nmb2 = 2;
    if (nmb2 < nmb) { /* in-flight microbatches are at most ~2 x PP: the peak is reached */
        cfg.global_batch_size = cfg.micro_batch_size * cfg.data_parallel_size * nmb2;
        if (ep_config_validate(&cfg, err) != 0) return -1;
    } else {
        nmb2 = nmb;
    }
    unsigned char *only = calloc((size_t)cfg.world_size, 1);
    if (!only) return snprintf(err, EP_ERRLEN, "out of memory"), -1;
    for (int r = 0; r < cfg.world_size; r++) {
        ep_coords d, e;
        ep_rank_coords(&cfg, r, &d, &e);
        only[r] = d.tp == 0 && d.cp == 0 && d.dp == 0;
    }
    ep_sched s;
    int rc = ep_sched_build_ranks(&cfg, only, &s, err);
    if (rc != 0) {
        free(only);
        return -1;
    }
    ep_mem_model mm;
    ep_mem_model_default(&mm);
    sim_cost cost;
    if (!state_only) sim_cost_init(&cost, calib, &cfg);
    /* coll_bound_s: the nodes each group spans, counted once per group */
    int *nodes_of = calloc((size_t)s.ngroups + 1, sizeof *nodes_of);
    int *scratch = malloc(((size_t)s.world + 1) * sizeof *scratch);
    if (!nodes_of || !scratch) rc = -1, snprintf(err, EP_ERRLEN, "out of memory");
    double scale = (double)nmb / nmb2;
    /* per stage: its microbatches' compute, and microbatch 0's first model chunk forward and
     * backward, for the pipeline's fill and drain below */
    double *stage_t = calloc(3 * (size_t)pp, sizeof *stage_t);
    if (!stage_t) rc = -1, snprintf(err, EP_ERRLEN, "out of memory");
    *state = *mem = *lb = *est = 0;
    double *fin = NULL; /* per op of the rank: when it ends on the longest path */
    for (int r = 0; r < s.world && rc == 0; r++) {
        if (!only[r]) continue;
        if (s.ranks[r].model_state_bytes > *state) *state = s.ranks[r].model_state_bytes;
        if (state_only) continue;
        ep_mem_peak pk;
        if (ep_mem_rank_peak(&s, r, &mm, &pk) != 0) {
            snprintf(err, EP_ERRLEN, "out of memory");
            rc = -1;
            break;
        }
        if (pk.total > *mem) *mem = pk.total;
        ep_coords d;
        ep_rank_coords(&cfg, r, &d, NULL);
        int stage = d.pp;
        double host = 0, stream[EP_NUM_STREAMS] = {0};
        double issued = 0, last[EP_NUM_STREAMS] = {0}, path = 0;
        /* on the path: when the last transfer of each class ends (and the SMs of the last
         * SM-driven one), when the last compute op ends */
        double xfer_end[SIM_XF_NUM] = {0}, comp_end = 0;
        int xfer_sms = 0;
        const ep_rank_sched *rk = &s.ranks[r];
        double *f = realloc(fin, ((size_t)rk->nops + 1) * sizeof *f);
        if (!f) {
            snprintf(err, EP_ERRLEN, "out of memory");
            rc = -1;
            break;
        }
        fin = f;
        for (int i = 0; i < rk->nops; i++) {
            const ep_op *op = &rk->ops[i];
            double k = op->mb >= 0 ? scale : 1;
            int gsize = op->group >= 0 ? s.groups[op->group].size : 1;
            double h = sim_op_host_s(&cost, op, gsize);
            host += k * h;
            /* the longest path: the op starts once issued, after its stream's last op and its
             * dependencies; t is what it adds below */
            issued += h;
            double start = fmax(issued, last[op->stream]);
            for (int d = 0; d < op->ndeps; d++)
                start = fmax(start, fin[rk->deps[op->deps_off + d]]);
            double t = 0, tp; /* t: alone, for the bound; tp: on the path, beside the others */
            if (ep_op_is_comm(op)) {
                /* a stream runs its ops one after another: their bounds add up. A collective
                 * of two or more also pays its algorithm's fixed cost (the simulation adds it to
                 * the transfer; send/recv pairs are left out: a batched send and receive may
                 * share one) */
                double base = gsize >= 2 && op->kind != EP_OP_SEND && op->kind != EP_OP_RECV
                                  ? sim_algo_base_s(calib, op, gsize)
                                  : 0;
                link_time l = op->kind == EP_OP_A2A_DISPATCH || op->kind == EP_OP_A2A_COMBINE
                                  ? a2a_bound_s(pi, &s, op, r)
                                  : coll_bound_s(pi, &s, op, nodes_of, scratch);
                t = base + bound_of(l);
                stream[op->stream] += k * t;
                /* on the path: at its algorithm's efficiencies, and slowed by compute running
                 * beside it, as in the simulation */
                double te =
                    base + at_efficiency(l, sim_algo_efficiency(calib, &s, op, gsize, pi->net_bw));
                sim_xfer_class xc = sim_xfer_class_of(&cfg, op);
                tp = beside(te, te * sim_xfer_slowdown(calib, xc), comp_end - start);
                if (start + tp > xfer_end[xc]) xfer_end[xc] = start + tp;
                if (xc == SIM_XF_KERNEL) xfer_sms = op->sms;
            } else if (op->kind != EP_OP_HOST_SYNC) {
                sim_work w;
                sim_op_work(&cost, op, pi->peak_flops, pi->hbm_bw, &w);
                t = sim_work_alone(&w);
                stream[op->stream] += k * t;
                /* transfers still running when it starts slow it (sim_share_slowdown) */
                int running[SIM_XF_NUM] = {0};
                double until = start;
                for (int c = 0; c < SIM_XF_NUM; c++)
                    if (xfer_end[c] > start) running[c] = 1, until = fmax(until, xfer_end[c]);
                double slow = sim_share_slowdown(calib, &w, running, 0, xfer_sms);
                tp = beside(t, w.t0 + fmax(w.t_flop * slow, w.t_mem), until - start);
                if (start + tp > comp_end) comp_end = start + tp;
            } else {
                tp = 0;
            }
            fin[i] = last[op->stream] = start + tp;
            if (fin[i] > path) path = fin[i];
            if (op->kind == EP_OP_HOST_SYNC && fin[i] > issued) issued = fin[i]; /* it waits */
            if (ep_op_is_comm(op) || op->kind == EP_OP_HOST_SYNC) continue;
            if (op->stream == EP_STREAM_COMP && op->mb >= 0) {
                double *st = stage_t + 3 * stage;
                st[0] += k * t;
                if (op->mb == 0 && op->chunk <= 0 && op->phase == EP_PHASE_FWD) st[1] += t;
                if (op->mb == 0 && op->chunk <= 0 && op->phase == EP_PHASE_BWD) st[2] += t;
            }
        }
        double b = host;
        for (int t = 0; t < EP_NUM_STREAMS; t++)
            if (stream[t] > b) b = stream[t];
        if (b > *lb) *lb = b;
        if (path * scale > *est) *est = path * scale;
    }
    free(fin);
    /* The pipeline fills and drains: stage p's first forward waits for model chunk 0 of
     * microbatch 0 on stages 0..p-1, and after its last backward (chunk 0 of the last microbatch)
     * those stages still run theirs - the 1F1B bubble, (PP - 1) / (VPP x microbatches) of the
     * step with even stages; the optimizer, after the last backward, is left out. */
    for (int p = 0; rc == 0 && !state_only && p < pp; p++) {
        double fill = 0;
        for (int q = 0; q < p; q++)
            fill += stage_t[3 * q + 1] + stage_t[3 * q + 2];
        if (fill + stage_t[3 * p] > *lb) *lb = fill + stage_t[3 * p];
    }
    if (*lb > *est) *est = *lb;
    free(stage_t);
    if (!state_only) sim_cost_free(&cost);
    ep_sched_free(&s);
    free(only);
    free(nodes_of);
    free(scratch);
    return rc;
}

typedef struct {
    long i;
    int status;
    double state, mem, lb, est;
} est_rec;

/* Workers share one mapping: the next layout to claim, then a record per candidate. */
typedef struct {
    long next_unit;
    est_rec rec[];
} est_shared;

/* All of the peak but the model state (activations, buffers, margin, FSDP's unsharded buffers) of
 * a candidate's least-memory variant (EP overlap off, micro batch 1, full recomputation: every
 * other variant of its layout, dispatcher and DP sharding holds at least these), -1 when it cannot
 * be estimated. */
static double least_activations(const ep_config *base, const axis *ax, const unsigned char *vi_of,
                                const plat_info *pi, const sim_calib *calib) {
    unsigned char vi[NAXES];
    memcpy(vi, vi_of, sizeof vi);
    vi[AX_OVL] = 0, vi[AX_MBS] = 0, vi[AX_RC] = (unsigned char)(ax[AX_RC].n - 1);
    ep_config cfg;
    double state, mem, lb, est;
    char err[EP_ERRLEN];
    if (apply(base, ax, vi, &cfg, err) != 0 ||
        estimate(&cfg, pi, calib, &state, &mem, &lb, &est, 0, err) != 0)
        return -1;
    return mem - state;
}

/* A worker claims layouts one at a time: the keys from unit_first[u] to unit_first[u + 1] (in
 * key_first) differ only in the DP sharding. Beyond the model state, the memory model counts of
 * the sharding only FSDP's unsharded buffers, which depend on its kind (ep_mem_fsdp_kind: none,
 * gradients, gradients and parameters; not the DP group's size: they are unsharded), so the
 * least-memory shortcut is shared by the shardings of a kind. The bound is not (HSDP's
 * collectives and their issue differ from FSDP's of the same kind: reusing FSDP's put the bound
 * above HSDP's simulated step), so every candidate left is estimated on its own. Within a key,
 * recomputation variants run least first; each candidate's record goes to sh->rec[i]. Claiming
 * balances the workers however the layouts prune. */
static void worker(cand *c, const long *key_first, const long *unit_first, long nunits,
                   const ep_config *base, const axis *ax, const plat_info *pi, double hbm,
                   est_shared *sh) {
    sim_calib calib;
    sim_calib_default(&calib);
    char err[EP_ERRLEN];
    if (pi->calib[0] && sim_calib_load(&calib, pi->calib, err) != 0) _exit(3);
    double least_act[MAX_VALS][EP_MEM_FSDP_KINDS];
    for (;;) {
        long u = __atomic_fetch_add(&sh->next_unit, 1, __ATOMIC_RELAXED);
        if (u >= nunits) break;
        for (int d = 0; d < MAX_VALS; d++)
            for (int f = 0; f < EP_MEM_FSDP_KINDS; f++)
                least_act[d][f] = -2; /* -2 unknown, -1 no shortcut */
        for (long k = unit_first[u]; k < unit_first[u + 1]; k++) {
            double key_state = -1, least[MAX_VALS];
            long fit_group = -1;
            for (int d = 0; d < MAX_VALS; d++)
                least[d] = -1;
            for (long i = key_first[k]; i < key_first[k + 1]; i++) {
                est_rec rec = {i, ST_ERROR, 0, 0, 0, 0};
                ep_config cfg;
                if (apply(base, ax, c[i].vi, &cfg, err) != 0) { /* legal: cannot happen */
                    sh->rec[i] = rec;
                    continue;
                }
                if (i == key_first[k]) { /* model state: one build of the key */
                    double m, l, e;
                    if (estimate(&cfg, pi, &calib, &key_state, &m, &l, &e, 1, err) != 0)
                        key_state = -1;
                }
                /* The dispatcher's least-memory variant: when it does not fit, none does, and
                 * one estimate settles them all. */
                int d = c[i].vi[AX_DISP], kind = ep_mem_fsdp_kind(&cfg);
                double *la = &least_act[d][kind];
                if (hbm > 0 && key_state >= 0 && key_state <= hbm && least[d] < 0) {
                    if (*la == -2) *la = least_activations(base, ax, c[i].vi, pi, &calib);
                    least[d] = *la >= 0 ? key_state + *la : 0; /* 0: none */
                }
                if (hbm > 0 && key_state > hbm) {
                    rec.status = ST_STATE, rec.state = key_state;
                } else if (hbm > 0 && least[d] > hbm) {
                    rec.status = ST_MEMORY, rec.state = key_state, rec.mem = least[d];
                } else if (c[i].group == fit_group) {
                    rec.status = ST_RECOMPUTE;
                } else if (estimate(&cfg, pi, &calib, &rec.state, &rec.mem, &rec.lb, &rec.est, 0,
                                    err) == 0) {
                    rec.status = hbm > 0 && rec.mem > hbm ? ST_MEMORY : ST_FIT;
                    if (rec.status == ST_FIT) fit_group = c[i].group;
                }
                sh->rec[i] = rec;
            }
        }
    }
    sim_calib_free(&calib);
    _exit(0);
}

/* The platform's GPUs and calibration, read in a child (SimGrid runs once per process). */
static int probe(const char *topo, const char *calib_arg, plat_info *pi, char err[EP_ERRLEN]) {
    int fd[2];
    if (pipe(fd) != 0) return snprintf(err, EP_ERRLEN, "pipe: %s", strerror(errno)), -1;
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) {
        close(fd[0]);
        struct {
            plat_info pi;
            char err[EP_ERRLEN];
            int rc;
        } out;
        memset(&out, 0, sizeof out);
        int argc = 1;
        char *argv[] = {"epsim", NULL};
        xbt_log_control_set("root.thres:critical");
        simgrid_init(&argc, argv);
        sim_platform pl;
        out.rc = sim_platform_load(&pl, topo, out.err);
        if (out.rc == 0) {
            out.pi.ngpus = pl.ngpus;
            out.pi.gpn = pl.gpus_per_node;
            out.pi.peak_flops = pl.peak_flops[0];
            out.pi.hbm_bw = pl.hbm_bw[0];
            out.pi.hbm_bytes = pl.hbm_bytes;
            sim_platform_seal(); /* routes exist from here */
            if (pl.ngpus > 1)
                out.pi.nvl_bw = sg_host_get_route_bandwidth(pl.host[0], pl.host[1]);
            if (pl.ngpus > pl.gpus_per_node && pl.gpus_per_node > 0) { /* NIC to NIC where
                                                                        the platform has them */
                sg_host_t *h = pl.nic ? pl.nic : pl.host;
                out.pi.net_bw = sg_host_get_route_bandwidth(h[0], h[pl.gpus_per_node]);
            }
            const char *name = calib_arg ? calib_arg : pl.calib[0] ? pl.calib : NULL;
            if (name && strcmp(name, "none") != 0 &&
                sim_find_data("calib", name, ".json", out.pi.calib, sizeof out.pi.calib) != 0) {
                snprintf(out.err, sizeof out.err, "--calib %s: no such calibration file", name);
                out.rc = -1;
            }
        }
        if (write(fd[1], &out, sizeof out) != (ssize_t)sizeof out) _exit(1);
        _exit(0);
    }
    close(fd[1]);
    struct {
        plat_info pi;
        char err[EP_ERRLEN];
        int rc;
    } in;
    ssize_t got = 0, k;
    while (got < (ssize_t)sizeof in && (k = read(fd[0], (char *)&in + got, sizeof in - got)) > 0)
        got += k;
    close(fd[0]);
    waitpid(p, NULL, 0);
    if (got != (ssize_t)sizeof in) return snprintf(err, EP_ERRLEN, "cannot read --topo"), -1;
    if (in.rc != 0) return snprintf(err, EP_ERRLEN, "%s", in.err), -1;
    *pi = in.pi;
    return 0;
}

/* --- simulation ------------------------------------------------------------------------------ */

typedef struct {
    cand *c;
    long *pick;
    const axis *ax;
    const search_opts *so;
    long done_before, budget;
} run_ctx;

static char **run_args(void *ctx, long i) {
    run_ctx *r = ctx;
    const cand *c = &r->c[r->pick[i]];
    char **a = calloc((size_t)r->so->ncommon + NAXES * MAX_WORDS + 6, sizeof *a);
    if (!a) return NULL;
    int k = 0;
    for (int j = 0; j < r->so->ncommon; j++)
        a[k++] = r->so->common[j];
    if (r->so->topo) a[k++] = "--topo", a[k++] = (char *)r->so->topo;
    if (r->so->calib) a[k++] = "--calib", a[k++] = (char *)r->so->calib;
    if (r->so->sample) a[k++] = "--sample-microbatches", a[k++] = (char *)r->so->sample;
    for (int x = 0; x < NAXES; x++) {
        const value *v = &r->ax[x].v[c->vi[x]];
        for (int w = 0; w < v->nwords; w++)
            a[k++] = (char *)v->words[w];
    }
    return a;
}

static void run_show(void *ctx, long done, long running, long left, double elapsed) {
    run_ctx *r = ctx;
    (void)left;
    fprintf(stderr, "\repsim search: %ld of at most %ld simulated, %ld running, %.0f s elapsed\033[K",
            r->done_before + done, r->budget, running, elapsed);
    fflush(stderr);
}

static int by_est(const void *a, const void *b, void *cs) {
    const cand *c = cs;
    const cand *x = &c[*(const long *)a], *y = &c[*(const long *)b];
    if (x->est != y->est) return x->est < y->est ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* qsort with a context: the candidates of by_est */
static cand *g_sort;
static int by_est_g(const void *a, const void *b) {
    return by_est(a, b, g_sort);
}

static int ranked(const void *a, const void *b) {
    const cand *x = a, *y = b;
    int sx = x->status == ST_SIM && x->res.ok, sy = y->status == ST_SIM && y->res.ok;
    if (sx != sy) return sy - sx;
    if (sx && x->res.iter != y->res.iter) return x->res.iter < y->res.iter ? -1 : 1;
    if (x->status != y->status) return x->status > y->status ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static void flags_text(const axis *ax, const cand *c, char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int a = 0; a < NAXES; a++) {
        const value *v = &ax[a].v[c->vi[a]];
        for (int w = 0; w < v->nwords && k < n; w++)
            k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? " " : "", v->words[w]);
    }
}

#define DEFAULT_PRESET "deepseek-v3-proxy16"

int sim_search_main(int argc, char **argv) {
    char err[EP_ERRLEN];
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    search_opts so = {.jobs = ncpu > 0 ? (int)ncpu : 1, .budget = 32, .show = -1,
                      .shard = {0, 1}};
    so.common = calloc((size_t)argc + 1, sizeof *so.common);
    if (!so.common) return 1;
    const ep_opt rows[] = {
        {.name = "--topo", .takes = EP_OPT_VALUE, .kind = EP_OPT_STRING, .target = &so.topo},
        {.name = "--calib", .takes = EP_OPT_VALUE, .kind = EP_OPT_STRING, .target = &so.calib},
        {.name = "--out", .takes = EP_OPT_VALUE, .kind = EP_OPT_STRING, .target = &so.out},
        {.name = "--budget",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_INT,
         .target = &so.budget,
         .min = 1,
         .max = 1000000,
         .bad = ": give the most simulations to run, from 1 to 1000000"},
        {.name = "--max-gpu-memory",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &so.max_mem},
        {.name = "--sample-microbatches",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_STRING,
         .target = &so.sample},
        SIM_RUNS_OPT_ROWS(&so.jobs, &so.shard, &so.show, "a search"),
        {.name = NULL},
    };
    ep_opts p = {rows, search_other, &so, 0};
    int rc = 2;
    if (ep_opts_parse(&p, argc - 1, argv + 1, err) != 0) {
        rc = fail(err);
        goto out;
    }
    double hbm_user = -1;
    if (so.max_mem) {
        char *end;
        errno = 0;
        double g = strtod(so.max_mem, &end);
        if (*end || errno || !(g > 0) || g > 1e9) {
            snprintf(err, EP_ERRLEN, "--max-gpu-memory '%.64s' is not a size in GiB",
                     so.max_mem);
            rc = fail(err);
            goto out;
        }
        hbm_user = g * GIB;
    }
    if (!so.out) {
        rc = fail("needs --out CSV (every legal layout, the simulated ones ranked first)");
        goto out;
    }
    if (!given(so.ncommon, so.common, "global-batch-size")) {
        rc = fail("needs --global-batch-size (the search keeps the global batch fixed)");
        goto out;
    }
    if (ep_output_check(so.out, err) != 0) {
        char m[EP_ERRLEN];
        snprintf(m, sizeof m, "--out: %s", err);
        rc = fail(m);
        goto out;
    }
    plat_info pi;
    if (probe(so.topo ? so.topo : "dgx16", so.calib, &pi, err) != 0) {
        rc = fail(err);
        goto out;
    }
    double hbm = hbm_user > 0 ? hbm_user : pi.hbm_bytes;
    /* the base config, as a run reads it: the preset unless an @file or --no-preset */
    ep_config base;
    ep_config_defaults(&base);
    char **cargv = calloc((size_t)so.ncommon + 3, sizeof *cargv);
    char preset[4200];
    int cargc = 0, argfile = 0, no_preset = 0;
    cargv[cargc++] = "epsim";
    for (int i = 0; i < so.ncommon; i++) {
        argfile |= so.common[i][0] == '@';
        no_preset |= !strcmp(so.common[i], "--no-preset");
    }
    int use_preset = !argfile && !no_preset;
    if (use_preset) {
        char path[4096];
        if (sim_find_bundled("configs", DEFAULT_PRESET, ".args", path, sizeof path) == 0) {
            snprintf(preset, sizeof preset, "@%s", path);
            cargv[cargc++] = preset;
        }
    }
    for (int i = 0; i < so.ncommon; i++)
        if (strcmp(so.common[i], "--no-preset") != 0) cargv[cargc++] = so.common[i];
    int prc = ep_config_parse(&base, cargc, cargv, NULL, NULL, err);
    free(cargv);
    if (prc != 0) {
        rc = fail(err);
        goto out;
    }
    if (use_preset && given(so.ncommon, so.common, "num-layers") &&
        !given(so.ncommon, so.common, "moe-layer-freq") && base.num_layers > 1)
        snprintf(base.moe_layer_freq, sizeof base.moe_layer_freq, "([0]*1+[1]*%d)",
                 base.num_layers - 1);
    if (base.gpus_per_node == 8 && !given(so.ncommon, so.common, "gpus-per-node"))
        base.gpus_per_node = pi.gpn;
    if (!given(so.ncommon, so.common, "world-size") &&
        !given(so.ncommon, so.common, "data-parallel-size"))
        base.world_size = pi.ngpus;
    if (base.world_size > pi.ngpus) {
        snprintf(err, EP_ERRLEN, "world size %d does not fit the topology's %d GPUs",
                 base.world_size, pi.ngpus);
        rc = fail(err);
        goto out;
    }
    axis *ax = calloc(NAXES, sizeof *ax);
    if (!ax) goto out;
    make_axes(ax, &base, base.world_size ? base.world_size : pi.ngpus, pi.gpn);
    fix_given(ax, so.ncommon, so.common);
    /* 1. enumerate: the product, first axis slowest; index = position */
    long total = 1;
    for (int a = 0; a < NAXES; a++)
        total *= ax[a].n;
    long cap = 1024, nc = 0, dup = 0, illegal = 0, mine = 0;
    cand *c = malloc((size_t)cap * sizeof *c);
    double t0 = sim_runs_clock();
    for (long k = 0; k < total && c; k++) {
        if (!sim_runs_mine(k, &so.shard)) continue;
        mine++;
        unsigned char vi[NAXES];
        long rem = k;
        for (int a = NAXES - 1; a >= 0; a--) {
            vi[a] = (unsigned char)(rem % ax[a].n);
            rem /= ax[a].n;
        }
        /* ETP = TP at TP 1 is ETP 1 again */
        if (ax[AX_ETP].n == 2 && ax[AX_TP].n > 0 && vi[AX_ETP] == 1 &&
            ax[AX_TP].v[vi[AX_TP]].nwords && !strcmp(ax[AX_TP].v[vi[AX_TP]].label, "1")) {
            dup++;
            continue;
        }
        ep_config cfg;
        if (apply(&base, ax, vi, &cfg, err) != 0) {
            illegal++;
            continue;
        }
        /* with one data-parallel replica of every weight (dense and expert DP 1) the distributed
         * optimizer shards nothing: DDP again */
        if (!strcmp(ax[AX_DP].v[vi[AX_DP]].label, "distopt") && cfg.data_parallel_size == 1 &&
            ep_config_expert_data_parallel(&cfg) == 1) {
            dup++;
            continue;
        }
        if (nc == cap) {
            cand *q = realloc(c, (size_t)(cap *= 2) * sizeof *c);
            if (!q) {
                free(c);
                c = NULL;
                break;
            }
            c = q;
        }
        memset(&c[nc], 0, sizeof c[nc]);
        c[nc].index = k;
        memcpy(c[nc].vi, vi, sizeof vi);
        c[nc].group = k / ax[AX_RC].n;
        c[nc].key = k / (ax[AX_RC].n * ax[AX_MBS].n * ax[AX_OVL].n * ax[AX_DISP].n);
        nc++;
    }
    if (!c) {
        fprintf(stderr, "epsim search: out of memory\n");
        rc = 1;
        goto out_ax;
    }
    if (nc == 0) {
        char m[EP_ERRLEN];
        snprintf(m, sizeof m, "none of the %ld layouts is legal (the last refusal: %s)", mine,
                 err);
        rc = fail(m);
        goto out_c;
    }
    double t_enum = sim_runs_clock();
    /* 2. estimate in workers, which claim keys from a shared counter and write their records
     * into a shared mapping */
    int nw = so.jobs < nc ? so.jobs : (int)nc;
    long nkeys = 0, *key_first = malloc(((size_t)nc + 1) * sizeof *key_first);
    size_t shbytes = sizeof(est_shared) + (size_t)nc * sizeof(est_rec);
    est_shared *sh = mmap(NULL, shbytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t *wp = calloc((size_t)nw, sizeof *wp);
    if (!key_first || sh == MAP_FAILED || !wp) {
        fprintf(stderr, "epsim search: out of memory\n");
        rc = 1;
        goto out_c;
    }
    long nunits = 0, *unit_first = malloc(((size_t)nc + 1) * sizeof *unit_first);
    if (!unit_first) {
        fprintf(stderr, "epsim search: out of memory\n");
        rc = 1;
        goto out_c;
    }
    for (long i = 0; i < nc; i++) {
        if (i == 0 || c[i].key != c[i - 1].key) {
            /* a new layout unless only the DP sharding (the key's last axis) changed */
            if (nkeys == 0 || memcmp(c[i].vi, c[key_first[nkeys - 1]].vi, AX_DP) != 0)
                unit_first[nunits++] = nkeys;
            key_first[nkeys++] = i;
        }
        sh->rec[i] = (est_rec){i, ST_ERROR, 0, 0, 0, 0};
    }
    key_first[nkeys] = nc;
    unit_first[nunits] = nkeys;
    sh->next_unit = 0;
    fflush(NULL);
    for (int w = 0; w < nw; w++) {
        wp[w] = fork();
        if (wp[w] == 0) worker(c, key_first, unit_first, nunits, &base, ax, &pi, hbm, sh);
    }
    for (int w = 0; w < nw; w++)
        if (wp[w] > 0) waitpid(wp[w], NULL, 0);
    for (long i = 0; i < nc; i++) {
        cand *x = &c[i];
        x->status = sh->rec[i].status;
        x->state = sh->rec[i].state;
        x->mem = sh->rec[i].mem;
        x->lb = sh->rec[i].lb;
        x->est = sh->rec[i].est;
    }
    munmap(sh, shbytes);
    free(wp);
    free(key_first);
    free(unit_first);
    double t_est = sim_runs_clock();
    /* 3. simulate by increasing estimate within the budget, skipping every layout whose bound is
     * not below the best step simulated so far: the best only falls, so none skipped could beat
     * the final best, and with budget enough the best layout is simulated */
    long nfit = 0;
    long *order = malloc((size_t)nc * sizeof *order);
    for (long i = 0; i < nc; i++)
        if (c[i].status == ST_FIT) order[nfit++] = i;
    g_sort = c;
    qsort(order, (size_t)nfit, sizeof *order, by_est_g);
    if (so.show < 0) so.show = isatty(STDERR_FILENO);
    double best = INFINITY;
    long next = 0, nsim = 0;
    sim_run_result *res = calloc((size_t)so.jobs + 1, sizeof *res);
    long *ids = calloc((size_t)so.jobs + 1, sizeof *ids);
    while (next < nfit && nsim < so.budget) {
        long take = 0, pick[SIM_RUNS_MAX_JOBS];
        while (take < so.jobs && next < nfit && nsim + take < so.budget) {
            long i = order[next++];
            if (c[i].lb >= best) {
                c[i].status = ST_BOUND;
                continue;
            }
            pick[take] = i;
            ids[take] = c[i].index;
            take++;
        }
        if (take == 0) break; /* nothing left below the best, or the budget spent */
        run_ctx rx = {c, pick, ax, &so, nsim, so.budget};
        sim_runs runs = {"epsim search", take, ids, so.jobs, so.show, run_args, run_show, &rx};
        if (sim_runs_exec(&runs, res) != 0) {
            rc = 1;
            goto out_c;
        }
        for (long j = 0; j < take; j++) {
            cand *x = &c[pick[j]];
            x->status = ST_SIM;
            x->res = res[j];
            int fits = !(hbm > 0 && x->res.mem_peak > hbm);
            if (x->res.ok && !fits)
                snprintf(x->res.status, sizeof x->res.status,
                         "simulated; peak memory exceeds the GPU memory");
            if (x->res.ok && fits && x->res.iter < best) best = x->res.iter;
        }
        nsim += take;
    }
    for (; next < nfit; next++)
        c[order[next]].status = c[order[next]].lb >= best ? ST_BOUND : ST_BUDGET;
    free(order);
    free(res);
    free(ids);
    double t_sim = sim_runs_clock();
    /* counts */
    long count[ST_NUM] = {0};
    for (long i = 0; i < nc; i++)
        count[c[i].status]++;
    /* a simulated layout that does not fit ranks after those that do */
    for (long i = 0; i < nc; i++)
        if (c[i].status == ST_SIM && c[i].res.ok && hbm > 0 && c[i].res.mem_peak > hbm)
            c[i].res.ok = 0;
    qsort(c, (size_t)nc, sizeof *c, ranked);
    /* outputs: the CSV, then the table */
    ep_outfile o;
    if (ep_outfile_open(&o, so.out, err) != 0) {
        rc = fail(err);
        goto out_c;
    }
    fputs("rank,index", o.f);
    for (int a = 0; a < NAXES; a++)
        fprintf(o.f, ",%s", ax[a].name);
    fputs(",iteration_time_s,tokens_per_s_per_gpu,tflops_per_gpu,mfu,exposed_dispatch_s,"
          "exposed_combine_s,exposed_dp_s,exposed_pp_s,exposed_other_s,exposed_total_s,"
          "host_wait_s,peak_memory_gib,peak_memory_of_gpu,est_peak_memory_gib,model_state_gib,"
          "lower_bound_s,estimated_step_s,sampled_microbatches,"
          "flags,status\n",
          o.f);
    long nok = 0, nsampled = 0;
    char fl[2048];
    for (long i = 0; i < nc; i++) {
        cand *x = &c[i];
        nsampled += x->status == ST_SIM && x->res.sampled > 0;
        if (x->status == ST_SIM && x->res.ok)
            fprintf(o.f, "%ld,%ld", ++nok, x->index);
        else
            fprintf(o.f, ",%ld", x->index);
        for (int a = 0; a < NAXES; a++)
            fprintf(o.f, ",%s", ax[a].v[x->vi[a]].label);
        const sim_run_result *r = &x->res;
        if (x->status == ST_SIM && r->mem_peak > 0) {
            fprintf(o.f, ",%.9f,%.6f,%.3f,%.5f", r->iter, r->tps_gpu, r->tflops, r->mfu);
            for (int k = 0; k < 6; k++)
                fprintf(o.f, ",%.9f", r->exp[k]);
            fprintf(o.f, ",%.9f,%.3f,", r->host_wait, r->mem_peak / GIB);
            if (hbm > 0) fprintf(o.f, "%.4f", r->mem_peak / hbm);
        } else {
            fputs(",,,,,,,,,,,,,", o.f);
        }
        fputc(',', o.f);
        if (x->mem > 0) fprintf(o.f, "%.3f", x->mem / GIB);
        fputc(',', o.f);
        if (x->state > 0) fprintf(o.f, "%.3f", x->state / GIB);
        fputc(',', o.f);
        if (x->lb > 0) fprintf(o.f, "%.6f", x->lb);
        fputc(',', o.f);
        if (x->est > 0) fprintf(o.f, "%.6f", x->est);
        fputc(',', o.f);
        if (x->status == ST_SIM && r->sampled > 0) fprintf(o.f, "%d", r->sampled);
        flags_text(ax, x, fl, sizeof fl);
        fprintf(o.f, ",%s,%s\n", fl, x->status == ST_SIM ? r->status : k_status[x->status]);
    }
    if (ep_outfile_commit(&o, err) != 0) {
        rc = fail(err);
        goto out_c;
    }
    printf("epsim search: %ld combinations%s (%ld duplicates), %ld legal layouts, %ld illegal "
           "(ep_config_validate), %.1f s\n",
           mine, so.shard.n > 1 ? " in this shard" : "", dup, nc, illegal, t_enum - t0);
    printf("  GPU memory %.1f GiB%s; estimates %.1f s, simulations %.1f s (--jobs %d)\n",
           hbm / GIB, hbm_user > 0 ? " (--max-gpu-memory)" : "", t_est - t_enum, t_sim - t_est,
           so.jobs);
    printf("  pruned: %ld model state > GPU memory, %ld estimated peak > GPU memory, %ld "
           "dominated (fit with less recomputation), %ld compute lower bound >= best simulated, "
           "%ld left by --budget %d; %ld estimates failed\n",
           count[ST_STATE], count[ST_MEMORY], count[ST_RECOMPUTE], count[ST_BOUND],
           count[ST_BUDGET], so.budget, count[ST_ERROR]);
    printf("  simulated %ld (%ld fit, ranked by step time) -> %s\n", count[ST_SIM], nok, so.out);
    if (nsampled > 0) /* docs/epsim.md, "Sampled steps" */
        printf("  %ld steps extrapolated from shorter ones (--sample-microbatches %s; the CSV's "
               "sampled_microbatches)\n",
               nsampled, so.sample ? so.sample : "not given: auto for the large ones");
    if (nok > 0)
        printf("  %4s %10s %8s %8s %8s %8s %8s %8s %8s  %s\n", "rank", "step s", "TFLOPS",
               "peak GiB", "exp disp", "exp comb", "exp dp", "exp pp", "launch", "layout");
    for (long i = 0; i < nc && i < 10 && i < nok; i++) {
        const cand *x = &c[i];
        char lay[512];
        size_t k = 0;
        lay[0] = 0;
        for (int a = 0; a < NAXES; a++)
            k += (size_t)snprintf(lay + k, sizeof lay - k, "%s%s %s", a ? " " : "", ax[a].name,
                                  ax[a].v[x->vi[a]].label);
        printf("  %4ld %10.6f %8.1f %8.1f %8.4f %8.4f %8.4f %8.4f %8.4f  %s\n", i + 1, x->res.iter,
               x->res.tflops, x->res.mem_peak / GIB, x->res.exp[0], x->res.exp[1], x->res.exp[2],
               x->res.exp[3], x->res.host_wait, lay);
    }
    rc = 0;
out_c:
    free(c);
out_ax:
    free(ax);
out:
    free(so.common);
    return rc;
}
