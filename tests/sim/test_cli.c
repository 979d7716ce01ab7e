/* epsim end to end: errors, determinism, outputs, the five seed features, sweeps, topologies. */
#include <CUnit/CUnit.h>
#include <math.h>

#include "sim_sample.h"
#include "sim_test_util.h"

/* 4 MoE layers of the DeepSeek-V3 proxy's widths on 2 DGX nodes, EP 8: about a second. */
#define SMALL                                                                                      \
    "--topo dgx16 --num-layers 4 --moe-layer-freq 1 --mtp-num-layers 0 "                           \
    "--expert-model-parallel-size 8"
#define HYBRIDEP "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep"
#define DEEPEP   "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep"

static int same_file(const char *a, const char *b) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", a, b);
    return system(cmd) == 0;
}

/* Runs SMALL + extra, writing a summary; returns the exit status. */
static int run_summary(const char *extra, const char *json) {
    char args[4096];
    snprintf(args, sizeof args, SMALL " %s --summary-json %s", extra, json);
    return epsim_exec(args, NULL, NULL);
}

/* Runs SMALL + extra[i] for i < n, summary i to path[i] (a temporary "<stem><i>.json"); returns 0
 * when every run exited 0. remove_all deletes them again. */
static int run_summaries(int n, const char *stem, const char *const *extra, char path[][512]) {
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s%d.json", stem, i);
        tmp_path(path[i], 512, name);
        if (run_summary(extra[i], path[i]) != 0) return -1;
    }
    return 0;
}

static void remove_all(int n, char path[][512]) {
    for (int i = 0; i < n; i++)
        remove(path[i]);
}

static void expect_error(const char *args) {
    char js[512], full[4096];
    tmp_path(js, sizeof js, "err.json");
    remove(js);
    snprintf(full, sizeof full, "%s --summary-json %s", args, js);
    expect_exit2(full, js);
}

static void test_errors(void) {
    char bad[512];
    tmp_path(bad, sizeof bad, "bad.xml");
    FILE *f = fopen(bad, "w");
    fputs("<?xml version='1.0'?>\n<platform version=\"4.1\"><zone id=\"z\"", f);
    fclose(f);
    expect_error("--topo /nonexistent/platform.xml");
    expect_error("--topo no-such-topology");
    char a[600];
    snprintf(a, sizeof a, "--topo %s", bad);
    expect_error(a);
    expect_error("--topo h200x2 --world-size 4");
    expect_error("--topo h200x2 --expert-model-parallel-size 4");
    expect_error("--topo h200x2 --no-such-flag 3");
    expect_error("--topo h200x2 --calib /nonexistent.json");
    remove(bad);
}

static void test_summary_keys(void) {
    char js[512];
    tmp_path(js, sizeof js, "keys.json");
    CU_ASSERT_EQUAL_FATAL(run_summary("", js), 0);
    static const char *keys[] = {"iteration_time_s",
                                 "tokens_per_s",
                                 "tokens_per_s_per_gpu",
                                 "tflops_per_gpu",
                                 "mfu",
                                 "world_size",
                                 "exposed_comm_s.dispatch",
                                 "exposed_comm_s.combine",
                                 "exposed_comm_s.dp",
                                 "exposed_comm_s.pp",
                                 "config.num_layers",
                                 "model_state_bytes_per_gpu",
                                 "memory_peak_bytes",
                                 "memory_peak.activation_bytes",
                                 "gpu_memory_bytes"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CU_ASSERT_FALSE(isnan(json_num(js, keys[i])));
    CU_ASSERT_EQUAL(json_num(js, "world_size"), 16);
    double t = json_num(js, "iteration_time_s");
    CU_ASSERT(t > 0);
    CU_ASSERT(fabs(json_num(js, "tokens_per_s_per_gpu") * 16 - json_num(js, "tokens_per_s")) <
              1e-6 * json_num(js, "tokens_per_s"));
    CU_ASSERT(json_num(js, "mfu") > 0 && json_num(js, "mfu") < 1);
    CU_ASSERT_EQUAL(json_num(js, "gpu_memory_bytes"), 81559.0 * 1048576); /* H100 80GB */
    CU_ASSERT(json_num(js, "model_state_bytes_per_gpu") > 0);
    /* the peak is the fullest rank's model state, activations, buffers, margin and FSDP buffers */
    double peak = json_num(js, "memory_peak_bytes");
    CU_ASSERT(json_num(js, "memory_peak.activation_bytes") > 0);
    CU_ASSERT(fabs(peak - json_num(js, "memory_peak.model_state_bytes") -
                   json_num(js, "memory_peak.activation_bytes") -
                   json_num(js, "memory_peak.buffer_bytes") -
                   json_num(js, "memory_peak.fragmentation_margin_bytes") -
                   json_num(js, "memory_peak.fsdp_param_bytes") -
                   json_num(js, "memory_peak.fsdp_grad_bytes")) < 1e-6 * peak);
    CU_ASSERT(peak >= json_num(js, "model_state_bytes_per_gpu"));
    /* compute outside the calibrated shapes: counted of all compute ops, a share of their time */
    double nout = json_num(js, "compute_outside_calibration.ops");
    double nall = json_num(js, "compute_outside_calibration.of_ops");
    double frac = json_num(js, "compute_outside_calibration.time_fraction");
    CU_ASSERT(nall > 0 && nout >= 0 && nout <= nall);
    CU_ASSERT(frac >= 0 && frac <= 1 && (nout > 0) == (frac > 0));
    remove(js);
}

/* The summary flags a peak that cannot fit (4 layers of the proxy, 32 experts of 44 M parameters
 * per GPU at EP 8: 5.6 G parameters, 18 bytes each) and not one that fits; the JSON says so. */
static void test_memory_warning(void) {
    char out[512], args[1024];
    tmp_path(out, sizeof out, "mem.txt");
    snprintf(args, sizeof args, SMALL);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, out, NULL), 0);
    const char *warning = "needs more memory than its GPU has";
    CU_ASSERT(file_has(out, warning));
    snprintf(args, sizeof args, SMALL " --num-experts 16 --moe-router-num-groups 8");
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, out, NULL), 0);
    CU_ASSERT_FALSE(file_has(out, warning));
    CU_ASSERT(file_has(out, "% of the GPU's 79.6 GiB)"));
    CU_ASSERT(file_has(out, "peak memory / GPU"));
    remove(out);
}

static void test_deterministic(void) {
    char p[6][512], args[4096];
    const char *names[6] = {"d1.json", "d1.csv", "d1.trace", "d2.json", "d2.csv", "d2.trace"};
    for (int i = 0; i < 6; i++)
        tmp_path(p[i], sizeof p[i], names[i]);
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args,
                 SMALL " --overlap-moe-expert-parallel-comm --summary-json %s "
                       "--csv %s --trace %s",
                 p[3 * k], p[3 * k + 1], p[3 * k + 2]);
        CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    }
    for (int i = 0; i < 3; i++) {
        CU_ASSERT(same_file(p[i], p[i + 3]));
        remove(p[i]);
        remove(p[i + 3]);
    }
}

/* Feature 1: EP overlap cuts exposed dispatch + combine; delayed wgrad cuts exposed dispatch and
 * the iteration further. With epref's own host costs (--calib h100): under Megatron's slower
 * host the overlap alone already hides all but ~1% of the dispatch, leaving delayed wgrad
 * nothing to cut there. */
static void test_feature_overlap(void) {
    char a[512], b[512], c[512];
    tmp_path(a, sizeof a, "ov0.json");
    tmp_path(b, sizeof b, "ov1.json");
    tmp_path(c, sizeof c, "ov2.json");
    CU_ASSERT_EQUAL_FATAL(run_summary("--calib h100", a), 0);
    CU_ASSERT_EQUAL_FATAL(run_summary("--calib h100 --overlap-moe-expert-parallel-comm", b), 0);
    CU_ASSERT_EQUAL_FATAL(
        run_summary("--calib h100 --overlap-moe-expert-parallel-comm --delay-wgrad-compute", c),
        0);
    double e0 = json_num(a, "exposed_comm_s.dispatch") + json_num(a, "exposed_comm_s.combine");
    double e1 = json_num(b, "exposed_comm_s.dispatch") + json_num(b, "exposed_comm_s.combine");
    CU_ASSERT(e1 < 0.7 * e0);
    CU_ASSERT(json_num(b, "iteration_time_s") < json_num(a, "iteration_time_s"));
    CU_ASSERT(json_num(c, "exposed_comm_s.dispatch") < json_num(b, "exposed_comm_s.dispatch"));
    CU_ASSERT(json_num(c, "iteration_time_s") < json_num(b, "iteration_time_s"));
    remove(a);
    remove(b);
    remove(c);
}

/* --moe-shared-expert-overlap hides shared-expert GEMMs behind dispatch and combine: less exposed
 * dispatch, a shorter iteration; without shared experts it changes nothing. */
static void test_shared_expert_overlap(void) {
    const char *extra[] = {"--moe-shared-expert-intermediate-size 8192",
                           "--moe-shared-expert-intermediate-size 8192 --moe-shared-expert-overlap",
                           "--moe-shared-expert-intermediate-size 0",
                           "--moe-shared-expert-intermediate-size 0 --moe-shared-expert-overlap"};
    char p[4][512];
    CU_ASSERT_EQUAL_FATAL(run_summaries(4, "se", extra, p), 0);
    double a2a0 =
        json_num(p[0], "exposed_comm_s.dispatch") + json_num(p[0], "exposed_comm_s.combine");
    double a2a1 =
        json_num(p[1], "exposed_comm_s.dispatch") + json_num(p[1], "exposed_comm_s.combine");
    CU_ASSERT(a2a1 < 0.95 * a2a0);
    CU_ASSERT(json_num(p[1], "iteration_time_s") < 0.98 * json_num(p[0], "iteration_time_s"));
    CU_ASSERT_DOUBLE_EQUAL(json_num(p[2], "iteration_time_s"), json_num(p[3], "iteration_time_s"),
                           0);
    remove_all(4, p);
}

/* Activation recomputation costs time: full layers more than the selective default (core
 * attention); full recomputation of MoE layers reruns their all-to-alls and host syncs. */
static void test_recompute(void) {
    const char *extra[] = {"", "--recompute-granularity selective",
                           "--recompute-granularity full --recompute-method uniform "
                           "--recompute-num-layers 1"};
    char p[3][512];
    CU_ASSERT_EQUAL_FATAL(run_summaries(3, "rc", extra, p), 0);
    double t0 = json_num(p[0], "iteration_time_s"), t1 = json_num(p[1], "iteration_time_s"),
           t2 = json_num(p[2], "iteration_time_s");
    CU_ASSERT(t0 < t1 && t1 < t2);
    CU_ASSERT(t2 < 1.5 * t0); /* a forward is about a third of a forward and backward */
    CU_ASSERT_DOUBLE_EQUAL(json_num(p[1], "host_syncs"), json_num(p[0], "host_syncs"), 0);
    CU_ASSERT_DOUBLE_EQUAL(json_num(p[2], "host_syncs"), 2 * json_num(p[0], "host_syncs"), 0);
    CU_ASSERT(json_num(p[2], "a2a_bytes") > 1.4 * json_num(p[0], "a2a_bytes"));
    remove_all(3, p);
}

/* Idle split by what it waits for: at the proxy's widths the GPUs hardly wait for the host; at toy
 * widths (hidden 256, every op microseconds of GPU time beside Megatron's host cost per op; grouped
 * expert GEMMs, one call each) most of the step is compute waiting for its launch, part of the idle
 * time, and the summary says so. */
static void test_launch_bound(void) {
    const char *extra[] = {"", "--hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 4 "
                               "--kv-channels 64 --q-lora-rank 64 --kv-lora-rank 64 "
                               "--moe-ffn-hidden-size 128 --padded-vocab-size 1024 "
                               "--moe-grouped-gemm"};
    char p[2][512];
    CU_ASSERT_EQUAL_FATAL(run_summaries(2, "lb", extra, p), 0);
    for (int i = 0; i < 2; i++) {
        double idle = json_num(p[i], "idle_s"), host = json_num(p[i], "host_wait_s");
        CU_ASSERT(host >= 0 && host <= idle + 1e-12);
    }
    CU_ASSERT(json_num(p[0], "host_wait_s") < 0.05 * json_num(p[0], "iteration_time_s"));
    CU_ASSERT(json_num(p[1], "host_wait_s") > 0.3 * json_num(p[1], "iteration_time_s"));
    char out[512], cmd[1400];
    tmp_path(out, sizeof out, "lb.txt");
    snprintf(cmd, sizeof cmd, SMALL " %s", extra[1]);
    CU_ASSERT_EQUAL(epsim_exec(cmd, out, NULL), 0);
    CU_ASSERT(file_has(out, "waiting for launches"));
    CU_ASSERT(file_has(out, "launch-bound: "));
    remove(out);
    remove_all(2, p);
}

/* Idle split, the other two causes: with the preset's skewed routing (Zipf 1.0) ranks reach the
 * all-to-alls at different times and most of the idle time waits for peers; with uniform routing
 * almost none does; with PP 2 a stage waits for the other (the bubble). */
static void test_idle_peers_pipeline(void) {
    const char *extra[] = {"", "--routing uniform",
                           "--routing uniform --pipeline-model-parallel-size 2"};
    char p[3][512];
    CU_ASSERT_EQUAL_FATAL(run_summaries(3, "iw", extra, p), 0);
    for (int i = 0; i < 3; i++) {
        double parts = json_num(p[i], "host_wait_s") + json_num(p[i], "peer_wait_s") +
                       json_num(p[i], "pipeline_wait_s");
        CU_ASSERT(parts <= json_num(p[i], "idle_s") + 1e-12);
    }
    CU_ASSERT(json_num(p[0], "peer_wait_s") > 0.5 * json_num(p[0], "idle_s"));
    CU_ASSERT(json_num(p[1], "peer_wait_s") < 0.1 * json_num(p[0], "peer_wait_s"));
    CU_ASSERT_DOUBLE_EQUAL(json_num(p[1], "pipeline_wait_s"), 0, 1e-12);
    CU_ASSERT(json_num(p[2], "pipeline_wait_s") > 0.5 * json_num(p[2], "idle_s"));
    remove_all(3, p);
}

/* Uneven pipeline stages: with the output layer and the loss on the last stage, a 9/7 split of the
 * 16-layer proxy over PP 2 is faster than 8/8 (as Megatron users balance DeepSeek-V3). */
static void test_uneven_pipeline(void) {
    char a[512], b[512];
    tmp_path(a, sizeof a, "pp0.json");
    tmp_path(b, sizeof b, "pp1.json");
    const char *pp = "--topo dgx16 --pipeline-model-parallel-size 2 --expert-model-parallel-size 8";
    char args[1024];
    snprintf(args, sizeof args, "%s --summary-json %s", pp, a);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    snprintf(args, sizeof args,
             "%s --decoder-first-pipeline-num-layers 9 --decoder-last-pipeline-num-layers 7 "
             "--summary-json %s",
             pp, b);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    CU_ASSERT(json_num(b, "iteration_time_s") < 0.97 * json_num(a, "iteration_time_s"));
    CU_ASSERT(file_has(b, "\"decoder_first_pipeline_num_layers\":9"));
    remove(a);
    remove(b);
    expect_error("--topo dgx16 --pipeline-model-parallel-size 2 --expert-model-parallel-size 8 "
                 "--decoder-first-pipeline-num-layers 9 --decoder-last-pipeline-num-layers 8");
}

/* Token dropping under skewed routing: a capacity factor of 1 trims the hot experts' rows (less
 * all-to-all traffic, a shorter iteration); padding to the capacity removes the count exchange's
 * host syncs. */
static void test_capacity_factor(void) {
#define ZIPF "--routing zipf --routing-zipf-s 1 "
    const char *extra[] = {ZIPF, ZIPF "--moe-expert-capacity-factor 1",
                           ZIPF
                           "--moe-expert-capacity-factor 1 --moe-pad-expert-input-to-capacity"};
#undef ZIPF
    char p[3][512];
    CU_ASSERT_EQUAL_FATAL(run_summaries(3, "cap", extra, p), 0);
    CU_ASSERT(json_num(p[1], "a2a_bytes") < json_num(p[0], "a2a_bytes"));
    CU_ASSERT(json_num(p[1], "iteration_time_s") < json_num(p[0], "iteration_time_s"));
    CU_ASSERT(json_num(p[0], "host_syncs") > 0);
    CU_ASSERT_DOUBLE_EQUAL(json_num(p[2], "host_syncs"), 0, 0);
    remove_all(3, p);
}

/* Counts CSV rows of rank 0 with `kind`, and the largest sms of rows with kind2. */
static void csv_stats(const char *path, const char *kind, int *count, const char *kind2,
                      int *maxsms) {
    *count = 0;
    *maxsms = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *fld[10];
        int n = 0;
        for (char *s = NULL, *t = strtok_r(line, ",\n", &s); t && n < 10;
             t = strtok_r(NULL, ",\n", &s))
            fld[n++] = t;
        if (n < 10 || strcmp(fld[0], "0") != 0) continue;
        if (strcmp(fld[3], kind) == 0) (*count)++;
        if (strcmp(fld[3], kind2) == 0 && atoi(fld[9]) > *maxsms) *maxsms = atoi(fld[9]);
    }
    fclose(f);
}

/* Feature 2: permute fused into hybridep dispatch removes the permute kernels and their time, and
 * the dispatch kernel takes more SMs. */
static void test_feature_fused_permute(void) {
    char a[512], b[512], ca[512], cb[512], args[4096];
    tmp_path(a, sizeof a, "fp0.json");
    tmp_path(b, sizeof b, "fp1.json");
    tmp_path(ca, sizeof ca, "fp0.csv");
    tmp_path(cb, sizeof cb, "fp1.csv");
    snprintf(args, sizeof args, SMALL " " HYBRIDEP " --summary-json %s --csv %s", a, ca);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    snprintf(args, sizeof args,
             SMALL " " HYBRIDEP " --moe-hybridep-fuse-permute --summary-json %s --csv %s", b, cb);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    int np0, np1, sms0, sms1;
    csv_stats(ca, "permute", &np0, "a2a_dispatch", &sms0);
    csv_stats(cb, "permute", &np1, "a2a_dispatch", &sms1);
    CU_ASSERT(np0 > 0);
    CU_ASSERT(np1 < np0);
    CU_ASSERT(sms1 > sms0);
    CU_ASSERT(json_num(b, "iteration_time_s") < json_num(a, "iteration_time_s"));
    remove(a);
    remove(b);
    remove(ca);
    remove(cb);
}

/* Feature 3: device-side padding removes the per-layer host syncs of host padding; with a row
 * budget the permuted row count is not read on the host either, and nothing syncs. */
static void test_feature_device_padding(void) {
    char a[512], b[512], c[512];
    tmp_path(a, sizeof a, "pad0.json");
    tmp_path(b, sizeof b, "pad1.json");
    tmp_path(c, sizeof c, "pad2.json");
    CU_ASSERT_EQUAL_FATAL(run_summary(HYBRIDEP " --moe-pad-mode host --moe-pad-multiple 16", a), 0);
    CU_ASSERT_EQUAL_FATAL(run_summary(HYBRIDEP " --moe-pad-mode device --moe-pad-multiple 16", b),
                          0);
    CU_ASSERT_EQUAL_FATAL(run_summary(HYBRIDEP " --moe-pad-mode device --moe-pad-multiple 16"
                                               " --moe-permute-budget 65536",
                                      c),
                          0);
    CU_ASSERT(json_num(b, "host_syncs") > 0);                                  /* the count's */
    CU_ASSERT_EQUAL(json_num(a, "host_syncs"), 2 * json_num(b, "host_syncs")); /* + padding's */
    CU_ASSERT_EQUAL(json_num(c, "host_syncs"), 0);
    CU_ASSERT(json_num(b, "iteration_time_s") < json_num(a, "iteration_time_s"));
    CU_ASSERT(json_num(c, "iteration_time_s") <= json_num(b, "iteration_time_s"));
    remove(a);
    remove(b);
    remove(c);
}

/* Feature 4: THD with hybridep pads to the group maximum (wasted rows reported) and syncs the host
 * every layer; deepep pads nothing. */
static void test_feature_thd(void) {
    char a[512], b[512], c[512];
    tmp_path(a, sizeof a, "thd0.json");
    tmp_path(b, sizeof b, "thd1.json");
    tmp_path(c, sizeof c, "thd2.json");
    CU_ASSERT_EQUAL_FATAL(run_summary(HYBRIDEP, c), 0);
    CU_ASSERT_EQUAL_FATAL(run_summary(HYBRIDEP " --sequence-packing --seqlen-dist uniform", a), 0);
    CU_ASSERT_EQUAL_FATAL(run_summary(DEEPEP " --sequence-packing --seqlen-dist uniform", b), 0);
    CU_ASSERT(json_num(a, "thd.pad_tokens") > 0);
    CU_ASSERT(json_num(a, "thd.wasted_bytes") > 0);
    CU_ASSERT_EQUAL(json_num(b, "thd.pad_tokens"), 0);
    CU_ASSERT(json_num(a, "host_syncs") > json_num(c, "host_syncs"));
    remove(a);
    remove(b);
    remove(c);
}

/* Largest bytes/duration of rank-0 ops of `kind` in a CSV (GB/s). */
static double csv_max_bw(const char *path, const char *kind) {
    FILE *f = fopen(path, "r");
    double best = 0;
    if (!f) return -1;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *fld[10];
        int n = 0;
        for (char *s = NULL, *t = strtok_r(line, ",\n", &s); t && n < 10;
             t = strtok_r(NULL, ",\n", &s))
            fld[n++] = t;
        if (n < 10 || strcmp(fld[0], "0") != 0 || strcmp(fld[3], kind) != 0) continue;
        double d = atof(fld[6]), b = atof(fld[7]);
        if (d > 0 && b / d / 1e9 > best) best = b / d / 1e9;
    }
    fclose(f);
    return best;
}

/* Feature 5: HSDP with 2 instances on 2 nodes keeps the reduce-scatters inside a node (NVLink
 * speed) and leaves only the outer all-reduce, one member per node, on one NIC (<= 50 GB/s);
 * plain FSDP's 16-rank reduce-scatters cross the nodes, one ring per rail (below the 8 NICs'
 * 400 GB/s and slower than HSDP's), and its expert gathers one NIC each. */
static void test_feature_hsdp(void) {
    char a[512], b[512], ca[512], cb[512], args[4096];
    tmp_path(a, sizeof a, "hs0.json");
    tmp_path(b, sizeof b, "hs1.json");
    tmp_path(ca, sizeof ca, "hs0.csv");
    tmp_path(cb, sizeof cb, "hs1.csv");
    const char *fsdp = "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params";
    snprintf(args, sizeof args, SMALL " %s --summary-json %s --csv %s", fsdp, a, ca);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    snprintf(args, sizeof args,
             SMALL " %s --num-distributed-optimizer-instances 2 --summary-json %s --csv %s", fsdp,
             b, cb);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    CU_ASSERT(csv_max_bw(ca, "reduce_scatter") < 400);
    CU_ASSERT(csv_max_bw(ca, "reduce_scatter") < csv_max_bw(cb, "reduce_scatter"));
    CU_ASSERT(csv_max_bw(cb, "reduce_scatter") > 200);
    CU_ASSERT(csv_max_bw(cb, "all_reduce") > 0);
    CU_ASSERT(csv_max_bw(cb, "all_reduce") <= 50);
    CU_ASSERT(json_num(b, "exposed_comm_s.dp") < json_num(a, "exposed_comm_s.dp"));
    remove(a);
    remove(b);
    remove(ca);
    remove(cb);
}

static void test_calibration_file(void) {
    char cal[512], bad[512], a[512], b[512], args[4096];
    tmp_path(cal, sizeof cal, "cal.json");
    tmp_path(bad, sizeof bad, "calbad.json");
    tmp_path(a, sizeof a, "cal0.json");
    tmp_path(b, sizeof b, "cal1.json");
    FILE *f = fopen(cal, "w");
    fputs("{\"_comment\":\"slower NVLink\",\"nccl_nvlink_efficiency\":0.3,"
          "\"gemm_efficiency\":[[1e9,0.2],[1e12,0.5]]}\n",
          f);
    fclose(f);
    f = fopen(bad, "w");
    fputs("{\"nccl_nvlink_eficiency\":0.3}\n", f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(run_summary("", a), 0);
    snprintf(args, sizeof args, "--calib %s", cal);
    CU_ASSERT_EQUAL_FATAL(run_summary(args, b), 0);
    CU_ASSERT(json_num(b, "iteration_time_s") > json_num(a, "iteration_time_s"));
    CU_ASSERT_EQUAL(json_num(b, "calibration.nccl_nvlink_efficiency"), 0.3);
    snprintf(args, sizeof args, "--topo h200x2 --calib %s", bad);
    expect_error(args);
    remove(cal);
    remove(bad);
    remove(a);
    remove(b);
}

static void test_sweep(void) {
    char out[512], args[4096];
    tmp_path(out, sizeof out, "sweep.csv");
    snprintf(args, sizeof args,
             "sweep --grid \"moe-token-dispatcher-type=alltoall,flex;"
             "overlap-moe-expert-parallel-comm=0,1\" --jobs 2 --out %s --topo dgx16 --num-layers 2 "
             "--moe-layer-freq 1 --mtp-num-layers 0 --expert-model-parallel-size 8",
             out);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    CU_ASSERT_EQUAL(lines_of(out), 5);
    FILE *f = fopen(out, "r");
    char line[1024];
    double prev = INFINITY;
    int ok = 1;
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f)); /* header */
    while (fgets(line, sizeof line, f)) {
        char *fld[6];
        int n = 0;
        for (char *s = NULL, *t = strtok_r(line, ",", &s); t && n < 6; t = strtok_r(NULL, ",", &s))
            fld[n++] = t;
        double v = n >= 5 ? atof(fld[4]) : -1;
        ok &= v > 0 && v <= prev;
        prev = v;
    }
    fclose(f);
    CU_ASSERT(ok);  /* ranked by tokens/s/GPU, best first */
    char cmd[1024]; /* the model state columns, a fraction of the H100's memory on every row */
    snprintf(cmd, sizeof cmd,
             "head -1 %s | grep -q ',model_state_gib,model_state_of_gpu,sampled_microbatches,"
             "status$' && tail -n +2 %s | awk -F, "
             "'{ if (!($(NF-2) > 0 && $(NF-3) > 0 && $(NF-1) == \"\")) exit 1 }'",
             out, out);
    CU_ASSERT_EQUAL(system(cmd), 0);
    snprintf(args, sizeof args, "sweep --grid \"a=1\" --shard 2/2 --out %s", out);
    CU_ASSERT_EQUAL(epsim_exec(args, NULL, NULL), 2);
    remove(out);
}

/* The engine's own link sharing against the all-SimGrid reference (EPSIM_TRANSFERS=simgrid), end
 * to end, on deepep with EP 16 over both nodes of dgx16 with EP overlap: the all-to-alls cross
 * the NICs while TP-free compute and the data-parallel rings run; byte-identical CSVs. */
static void test_engine_sharing_is_simgrids(void) {
    char a[512], b[512], args[4096];
    tmp_path(a, sizeof a, "share_engine.csv");
    tmp_path(b, sizeof b, "share_simgrid.csv");
    snprintf(args, sizeof args,
             "--topo dgx16 --num-layers 2 --moe-layer-freq 1 --mtp-num-layers 0 "
             "--expert-model-parallel-size 16 --overlap-moe-expert-parallel-comm " DEEPEP
             " --csv %s",
             a);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    setenv("EPSIM_TRANSFERS", "simgrid", 1);
    snprintf(args + strlen(args) - strlen(a), sizeof args - (strlen(args) - strlen(a)), "%s", b);
    int rc = epsim_exec(args, NULL, NULL);
    unsetenv("EPSIM_TRANSFERS");
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT(same_file(a, b));
    remove(a);
    remove(b);
}

/* --progress and --no-progress: accepted, nothing of them on stdout or in the files; a sweep takes
 * them for its own line. */
static void test_progress_flags(void) {
    char a[512], b[512], o[512], e[512], args[4096];
    tmp_path(a, sizeof a, "prog_on.csv");
    tmp_path(b, sizeof b, "prog_off.csv");
    tmp_path(o, sizeof o, "prog.out");
    tmp_path(e, sizeof e, "prog.err");
    snprintf(args, sizeof args, SMALL " --progress --csv %s", a);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, o, e), 0);
    CU_ASSERT(!file_has(o, "\r")); /* stderr may hold the line: the run may take 2 s */
    snprintf(args, sizeof args, SMALL " --no-progress --csv %s", b);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    CU_ASSERT(same_file(a, b));
    snprintf(args, sizeof args,
             "sweep --progress --grid \"moe-token-dispatcher-type=alltoall,flex\" --out %s "
             "--topo dgx16 --num-layers 2 --moe-layer-freq 1 --mtp-num-layers 0 "
             "--expert-model-parallel-size 8",
             a);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    CU_ASSERT_EQUAL(lines_of(a), 3);
    remove(a);
    remove(b);
    remove(o);
    remove(e);
}

/* The XML files in sim/topos are exactly the generator's output. */
static void test_topologies_regenerate(void) {
    char dir[512], cmd[2048];
    tmp_path(dir, sizeof dir, "topos");
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s && %s/sim/epsim_gen_topos %s && diff -r -q %s %s/sim/topos -x '*.c' "
             ">/dev/null",
             dir, EP_BINARY_DIR, dir, dir, EP_SOURCE_DIR);
    CU_ASSERT_EQUAL(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CU_ASSERT_EQUAL(system(cmd), 0);
}

/* Every bundled topology loads and runs a small model (nvl72 and the fat trees included). */
static void test_bundled_topologies_run(void) {
    static const char *topos[] = {"h200x2", "dgx8", "dgx64", "nvl72"};
    for (size_t i = 0; i < sizeof topos / sizeof topos[0]; i++) {
        char args[1024];
        snprintf(
            args, sizeof args,
            "--topo %s --num-layers 2 --moe-layer-freq 1 --mtp-num-layers 0 --global-batch-size 0",
            topos[i]);
        int rc = epsim_exec(args, NULL, NULL);
        if (rc != 0) fprintf(stderr, "topology %s: exit %d\n", topos[i], rc);
        CU_ASSERT_EQUAL(rc, 0);
    }
}

/* Unset EP keeps EP x ETP ranks (one copy of the experts) inside a node and dividing the ranks. */
static void test_default_layout(void) {
    static const struct {
        const char *flags;
        int ep;
    } cases[] = {
        {"", 8},
        {"--tensor-model-parallel-size 4", 2},                                 /* ETP = TP = 4 */
        {"--tensor-model-parallel-size 4 --expert-tensor-parallel-size 1", 8}, /* ETP 1 */
        {"--tensor-model-parallel-size 2 --sequence-parallel", 4},
    };
    char js[512], args[1024];
    tmp_path(js, sizeof js, "layout.json");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args,
                 "--topo dgx16 --num-layers 2 --moe-layer-freq 1 --mtp-num-layers 0 %s "
                 "--summary-json %s",
                 cases[i].flags, js);
        CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
        double ep = json_num(js, "config.expert_model_parallel_size");
        if (ep != cases[i].ep) fprintf(stderr, "'%s': EP %g\n", cases[i].flags, ep);
        CU_ASSERT_EQUAL(ep, cases[i].ep);
    }
    remove(js);
}

/* A hybrid pattern on top of the default preset replaces the preset's --moe-layer-freq; both
 * given by the user stay an error. */
static void test_pattern_over_preset(void) {
    char js[512], args[1024];
    tmp_path(js, sizeof js, "pattern.json");
    snprintf(args, sizeof args,
             "--topo dgx8 --hybrid-override-pattern 'M*E-M*E-' --num-layers 8 --mtp-num-layers 0 "
             "--summary-json %s",
             js);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    CU_ASSERT(file_has(js, "\"moe_layers\":[2,6]"));
    remove(js);
    expect_error("--topo dgx8 --hybrid-override-pattern 'M*E-' --num-layers 4 --moe-layer-freq 2");
    /* --num-layers alone on the preset: first layer dense, the rest MoE */
    snprintf(args, sizeof args, "--topo dgx8 --num-layers 4 --summary-json %s", js);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    CU_ASSERT(file_has(js, "\"moe_layers\":[1,2,3]"));
    remove(js);
    expect_error("--topo dgx8 --num-layers 4 --moe-layer-freq '([0]*1+[1]*15)'");
}

/* Megatron-LM flags without effect (learning rate, dtype, kernel choices) leave the prediction as
 * it is and are named in one note on stderr. */
static void test_megatron_flags_ignored(void) {
    char a[512], b[512], err[512];
    tmp_path(a, sizeof a, "plain.json");
    tmp_path(b, sizeof b, "ignored.json");
    tmp_path(err, sizeof err, "ignored.err");
    CU_ASSERT_EQUAL_FATAL(run_summary("", a), 0);
    char args[4096];
    snprintf(args, sizeof args,
             SMALL " --lr 3e-4 --bf16 --use-flash-attn --moe-router-fusion --log-interval 1 "
                   "--summary-json %s",
             b);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, err), 0);
    CU_ASSERT_EQUAL(json_num(a, "iteration_time_s"), json_num(b, "iteration_time_s"));
    CU_ASSERT_EQUAL(json_num(a, "tokens_per_s"), json_num(b, "tokens_per_s"));
    CU_ASSERT(file_has(err, "epsim: note: accepted without effect on the simulated step: --lr "
                            "--bf16 --use-flash-attn --moe-router-fusion --log-interval\n"));
    /* --high-priority-a2a-comm-stream: epref's stream priority, no effect in epsim (measured) */
    snprintf(args, sizeof args, "--overlap-moe-expert-parallel-comm");
    CU_ASSERT_EQUAL_FATAL(run_summary(args, a), 0);
    snprintf(args, sizeof args,
             "--overlap-moe-expert-parallel-comm --high-priority-a2a-comm-stream");
    CU_ASSERT_EQUAL_FATAL(run_summary(args, b), 0);
    CU_ASSERT_EQUAL(json_num(a, "iteration_time_s"), json_num(b, "iteration_time_s"));
    remove(a);
    remove(b);
    remove(err);
}

/* --sample-microbatches: a pipeline of 32 microbatches (PP 2, VPP 2) from the steps of 4 and 8
 * gives the whole step's figures (its ranks' waits for each other vary a little from microbatch
 * to microbatch: within 0.2% of the step), the config asked for and the steps it simulated; too
 * short a sample and per-op outputs are refused. */
static void test_sampled_step(void) {
    const char *pipe = "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                       "--global-batch-size 256";
    char whole[512], sampled[512], args[4096];
    tmp_path(whole, sizeof whole, "whole.json");
    tmp_path(sampled, sizeof sampled, "sampled.json");
    CU_ASSERT_EQUAL_FATAL(run_summary(pipe, whole), 0);
    snprintf(args, sizeof args, "%s --sample-microbatches 4", pipe);
    CU_ASSERT_EQUAL_FATAL(run_summary(args, sampled), 0);
    double T = json_num(whole, "iteration_time_s");
    static const char *rates[] = {"iteration_time_s", "tokens_per_s", "mfu"};
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
        CU_ASSERT(fabs(json_num(sampled, rates[i]) / json_num(whole, rates[i]) - 1) < 2e-3);
    static const char *parts[] = {"idle_s", "exposed_comm_s.dispatch", "exposed_comm_s.pp",
                                  "exposed_comm_s.total", "pipeline_wait_s"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        CU_ASSERT(fabs(json_num(sampled, parts[i]) - json_num(whole, parts[i])) < 2e-3 * T);
    /* the peak holds the fill's microbatches, whose expert rows differ by the draw */
    CU_ASSERT(fabs(json_num(sampled, "memory_peak_bytes") / json_num(whole, "memory_peak_bytes") -
                   1) < 1e-3);
    static const char *same[] = {"host_syncs", "config.global_batch_size", "microbatches"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        CU_ASSERT_EQUAL(json_num(sampled, same[i]), json_num(whole, same[i]));
    CU_ASSERT_EQUAL(json_num(sampled, "microbatches"), 32);
    json_error_t je;
    json_t *root = json_load_file(sampled, 0, &je),
           *steps = json_object_get(root, "sampled_microbatches");
    CU_ASSERT(json_integer_value(json_array_get(steps, 0)) == 4 &&
              json_integer_value(json_array_get(steps, 1)) == 8);
    json_decref(root);
    root = json_load_file(whole, 0, &je);
    CU_ASSERT(root && !json_object_get(root, "sampled_microbatches"));
    json_decref(root);
    CU_ASSERT(json_num(sampled, "ops") < json_num(whole, "ops") / 2);
    char autod[512];
    tmp_path(autod, sizeof autod, "auto.json");
    snprintf(args, sizeof args, "%s --sample-microbatches auto", pipe); /* 2 x PP = 4 */
    CU_ASSERT_EQUAL_FATAL(run_summary(args, autod), 0);
    CU_ASSERT_EQUAL(json_num(autod, "iteration_time_s"), json_num(sampled, "iteration_time_s"));
    remove(autod);
    /* a sweep and a search say in their CSVs which steps were sampled */
    char swcsv[512], cmd[2048];
    tmp_path(swcsv, sizeof swcsv, "sampled_sweep.csv");
    snprintf(args, sizeof args,
             "sweep --grid \"moe-token-dispatcher-type=alltoall\" --out %s " SMALL
             " %s --sample-microbatches 4",
             swcsv, pipe);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    snprintf(cmd, sizeof cmd,
             AWK_CSV "{print $h[\"sampled_microbatches\"] "
                     "\" \" $h[\"iteration_time_s\"]}' %s | grep -qx '4 %.9f'",
             swcsv, json_num(sampled, "iteration_time_s"));
    CU_ASSERT_EQUAL(system(cmd), 0);
    snprintf(args, sizeof args,
             "search --out %s --budget 1 --tensor-model-parallel-size 1 "
             "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
             "--expert-model-parallel-size 8 --expert-tensor-parallel-size 1 "
             "--moe-token-dispatcher-type alltoall --no-overlap-moe-expert-parallel-comm "
             "--micro-batch-size 1 --recompute-granularity none " SMALL
             " --global-batch-size 256 --sample-microbatches 4",
             swcsv);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    snprintf(cmd, sizeof cmd,
             AWK_CSV "$h[\"status\"]==\"ok\"{print "
                     "$h[\"sampled_microbatches\"]}' %s | grep -qx 4",
             swcsv);
    CU_ASSERT_EQUAL(system(cmd), 0);
    remove(swcsv);
    snprintf(args, sizeof args, SMALL " %s --sample-microbatches 3", pipe);
    expect_error(args); /* below 2 x PP */
    snprintf(args, sizeof args, SMALL " %s --sample-microbatches some", pipe);
    expect_error(args);
    char csv[512];
    tmp_path(csv, sizeof csv, "sampled.csv");
    snprintf(args, sizeof args, SMALL " %s --sample-microbatches 4 --csv %s", pipe, csv);
    expect_error(args);
    CU_ASSERT(access(csv, F_OK) != 0);
    remove(whole);
    remove(sampled);
}

/* Without --sample-microbatches a step of SIM_SAMPLE_DEFAULT_OPS estimated ops or more is sampled
 * (auto) and the summary says so; a smaller one, one with --csv or --trace, and an explicit count
 * (0: the whole step) keep what they ask (test_sampled_step compares a sampled step with the
 * whole one; the whole step of this one takes 17 s). */
static void test_sampled_by_default(void) {
    CU_ASSERT_PTR_NULL(sim_sample_default(NULL, SIM_SAMPLE_DEFAULT_OPS - 1, 0));
    CU_ASSERT_STRING_EQUAL(sim_sample_default(NULL, SIM_SAMPLE_DEFAULT_OPS, 0), "auto");
    CU_ASSERT_PTR_NULL(sim_sample_default(NULL, 1e9, 1));
    CU_ASSERT_STRING_EQUAL(sim_sample_default("0", 1e9, 0), "0");
    CU_ASSERT_STRING_EQUAL(sim_sample_default("4", 1, 1), "4");
    /* 8 ranks x 32000 microbatches x 2 layers x 40 ops: 2.05e7 estimated */
    const char *big = "--topo dgx8 --no-preset --num-layers 2 --hidden-size 128 "
                      "--num-attention-heads 2 --ffn-hidden-size 256 --seq-length 128 "
                      "--micro-batch-size 1 --padded-vocab-size 1024 --num-experts 0 "
                      "--global-batch-size 256000";
    char json[512], out[512], args[4096];
    tmp_path(json, sizeof json, "default_sampled.json");
    tmp_path(out, sizeof out, "default_sampled.out");
    snprintf(args, sizeof args, "%s --summary-json %s", big, json);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, out, NULL), 0);
    json_error_t je;
    json_t *root = json_load_file(json, 0, &je),
           *steps = json_object_get(root, "sampled_microbatches");
    CU_ASSERT(json_integer_value(json_array_get(steps, 0)) == 2 &&
              json_integer_value(json_array_get(steps, 1)) == 4);
    json_decref(root);
    CU_ASSERT(file_has(out, "(the default for a step of 20 M ops or more; --sample-microbatches 0 "
                            "simulates it whole)"));
    remove(json);
    remove(out);
}

void ep_suite_cli(void) {
    CU_pSuite s = CU_add_suite("sim_cli", NULL, NULL);
    CU_add_test(s, "errors: one line, exit 2, no output file", test_errors);
    CU_add_test(s, "summary JSON keys and consistency", test_summary_keys);
    CU_add_test(s, "model state that cannot fit GPU memory is flagged", test_memory_warning);
    CU_add_test(s, "same inputs give byte-identical outputs", test_deterministic);
    CU_add_test(s, "feature 1: EP overlap and delayed wgrad", test_feature_overlap);
    CU_add_test(s, "idle split: waiting for launches, launch-bound summary", test_launch_bound);
    CU_add_test(s, "idle split: waiting for peers, pipeline waits", test_idle_peers_pipeline);
    CU_add_test(s, "feature 2: permute fused into hybridep dispatch", test_feature_fused_permute);
    CU_add_test(s, "uneven first/last pipeline stages", test_uneven_pipeline);
    CU_add_test(s, "capacity factor drops tokens, padding removes syncs", test_capacity_factor);
    CU_add_test(s, "--moe-shared-expert-overlap hides shared experts behind the a2as",
                test_shared_expert_overlap);
    CU_add_test(s, "recomputation: selective and full cost time", test_recompute);
    CU_add_test(s, "feature 3: device padding removes host syncs", test_feature_device_padding);
    CU_add_test(s, "feature 4: THD padding with hybridep, none with deepep", test_feature_thd);
    CU_add_test(s, "feature 5: HSDP inner groups on NVLink, outer on IB", test_feature_hsdp);
    CU_add_test(s, "calibration file overrides defaults, typos refused", test_calibration_file);
    CU_add_test(s, "sweep ranks a grid", test_sweep);
    CU_add_test(s, "the engine's link sharing gives SimGrid's CSV (EPSIM_TRANSFERS=simgrid)",
                test_engine_sharing_is_simgrids);
    CU_add_test(s, "--progress / --no-progress change no output", test_progress_flags);
    CU_add_test(s, "bundled topologies equal the generator's output", test_topologies_regenerate);
    CU_add_test(s, "bundled topologies run", test_bundled_topologies_run);
    CU_add_test(s, "default layout: EP x ETP inside a node", test_default_layout);
    CU_add_test(s, "a hybrid pattern or --num-layers replaces the preset's MoE layer list",
                test_pattern_over_preset);
    CU_add_test(s, "Megatron-LM flags without effect change nothing", test_megatron_flags_ignored);
    CU_add_test(s, "--sample-microbatches: the whole step from two shorter ones",
                test_sampled_step);
    CU_add_test(s, "a large step is sampled unless asked otherwise", test_sampled_by_default);
}
