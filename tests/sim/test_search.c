/* epsim search end to end (docs/epsim.md, "Search"): the enumeration is exactly the legal set of
 * a small case counted by hand, memory pruning, ranking, the budget, shards, bad input. */
#include <CUnit/CUnit.h>

#include "sim_test_util.h"

/* The library's small MoE (8 experts, top-2) with 2 layers on 2 GPUs; dispatcher, micro batch,
 * recomputation and CP fixed, so the axes left are TP, PP/VPP, EP, ETP, DP sharding, EP overlap. */
#define SMALL                                                                                      \
    "search --topo h200x2 --no-preset --num-layers 2 --seq-length 512 --global-batch-size 4 "    \
    "--moe-token-dispatcher-type alltoall --micro-batch-size 1 --recompute-granularity none "      \
    "--context-parallel-size 1 --jobs 2"

/* Field `col` (0-based) of each data row of a CSV into out (at most n); returns the rows. */
static int csv_col(const char *path, int col, char out[][64], int n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    int k = 0;
    if (!fgets(line, sizeof line, f)) k = -1;
    while (k >= 0 && k < n && fgets(line, sizeof line, f)) {
        char *p = line;
        for (int c = 0; c < col && p; c++) {
            p = strchr(p, ',');
            if (p) p++;
        }
        size_t len = p ? strcspn(p, ",\n") : 0;
        snprintf(out[k], 64, "%.*s", (int)len, p ? p : "");
        k++;
    }
    fclose(f);
    return k;
}

static int count_status(const char *path, const char *status) {
    char cmd[1024], res[512];
    tmp_path(res, sizeof res, "search_count.txt");
    snprintf(cmd, sizeof cmd, "grep -c ',%s$' %s > %s", status, path, res);
    if (system(cmd) < 0) return -1;
    FILE *f = fopen(res, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1) n = -1;
        fclose(f);
    }
    remove(res);
    return n;
}

/* By hand, world 2: TP 1 or 2, PP 1 or 2 (VPP 2 needs 4 layers), EP 1 or 2, ETP 1 or TP, DP
 * sharding ddp/distopt/fsdp/hsdp2, EP overlap off/on/on+wgrad: 192 combinations, 48 of them ETP=TP
 * at TP 1 (duplicates). Legal: TP 1 PP 1 (DP 2): EP 1 with 4 shardings x overlap off (4), EP 2
 * with ddp/distopt/fsdp (HSDP 2 needs an expert DP of 2) x 3 overlaps (9); TP 1 PP 2 (DP 1): EP 1,
 * 3 shardings, overlap off (3; no HSDP at DP 1, no EP overlap at EP 1 or PP 2 without VPP);
 * TP 2 PP 1 (DP 1): EP 1 ETP 1 (3), EP 2 ETP 1 (3 x 3 = 9), EP 1 ETP 2 (3); TP 2 PP 2 needs 4
 * GPUs. 13 + 3 + 15 = 31, less 5 more duplicates: distopt where dense and expert DP are both 1
 * (TP 1 PP 2; TP 2 EP 2 ETP 1 x 3 overlaps; TP 2 EP 1 ETP 2) is DDP again. 26 legal. */
static void test_enumeration_is_the_legal_set(void) {
    char out[512], so[512], args[2048];
    tmp_path(out, sizeof out, "search.csv");
    tmp_path(so, sizeof so, "search.out");
    snprintf(args, sizeof args, SMALL " --budget 3 --out %s", out);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, so, NULL), 0);
    CU_ASSERT(file_has(so, "192 combinations (53 duplicates), 26 legal layouts, 113 illegal"));
    CU_ASSERT_EQUAL(lines_of(out), 27); /* header + every legal layout */
    /* budget: exactly 3 simulated, ranked 1..3 by step time */
    static char rank[64][64], iter[64][64];
    CU_ASSERT_EQUAL(csv_col(out, 0, rank, 64), 26);
    CU_ASSERT_EQUAL(csv_col(out, 12, iter, 64), 26);
    int ranked = 0, sorted = 1;
    for (int i = 0; i < 26; i++)
        if (rank[i][0]) {
            ranked++;
            CU_ASSERT_EQUAL(atoi(rank[i]), ranked);
            if (i > 0 && rank[i - 1][0]) sorted &= atof(iter[i - 1]) <= atof(iter[i]);
        }
    CU_ASSERT_EQUAL(ranked, 3);
    CU_ASSERT(sorted);
    CU_ASSERT_EQUAL(count_status(out, "ok"), 3);
    /* the rest: left by the budget, or pruned by a bound not below the best simulated */
    int left = count_status(out, "not simulated: budget"),
        bound = count_status(out, "pruned: compute lower bound not below the best simulated step");
    CU_ASSERT_EQUAL(left + bound, 23);
    CU_ASSERT(left > 0);
    CU_ASSERT(file_has(so, "simulated 3 (3 fit"));
    remove(out);
    remove(so);
}

/* A dense model: ETP, dispatcher and EP overlap mean nothing and keep one value ("n/a"), so each
 * layout is enumerated once. By hand, world 2: TP 1 or 2 x PP 1 or 2 x EP 1 x 4 shardings = 16;
 * legal: TP 1 PP 1 (DP 2) 4, TP 1 PP 2 and TP 2 PP 1 (DP 1, no HSDP; distopt is DDP there: a
 * duplicate) 2 each, TP 2 PP 2 none: 8. */
static void test_dense_model_axes(void) {
    char out[512], so[512], args[2048];
    tmp_path(out, sizeof out, "search_dense.csv");
    tmp_path(so, sizeof so, "search_dense.out");
    snprintf(args, sizeof args,
             "search --topo h200x2 --no-preset --num-layers 2 --seq-length 512 "
             "--global-batch-size 4 --micro-batch-size 1 --recompute-granularity none "
             "--context-parallel-size 1 --num-experts 0 --moe-layer-freq 0 --budget 2 --jobs 2 "
             "--out %s",
             out);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, so, NULL), 0);
    CU_ASSERT(file_has(so, "16 combinations (2 duplicates), 8 legal layouts, 6 illegal"));
    static char etp[16][64], disp[16][64];
    CU_ASSERT_EQUAL(csv_col(out, 6, etp, 16), 8);
    CU_ASSERT_EQUAL(csv_col(out, 8, disp, 16), 8);
    for (int i = 0; i < 8; i++) {
        CU_ASSERT_STRING_EQUAL(etp[i], "n/a");
        CU_ASSERT_STRING_EQUAL(disp[i], "n/a");
    }
    remove(out);
    remove(so);
}

/* A GPU memory limit between the layouts' model states: those above it are pruned without a
 * simulation (the most sharded fit), and nothing simulated exceeds it. */
static void test_memory_pruning(void) {
    char out[512], so[512], args[2048];
    tmp_path(out, sizeof out, "search_mem.csv");
    tmp_path(so, sizeof so, "search_mem.out");
    /* model states here: 0.7 to 2.1 GiB (fsdp EP 2 the least, ddp EP 1 the most) */
    snprintf(args, sizeof args, SMALL " --budget 40 --max-gpu-memory 1.3 --out %s", out);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, so, NULL), 0);
    int state = count_status(out, "pruned: model state exceeds the GPU memory");
    int peak = count_status(out, "pruned: estimated peak memory exceeds the GPU memory");
    CU_ASSERT(state > 0);
    CU_ASSERT(state + peak < 26);
    /* ddp at EP 1, TP 1, PP 1 (index 0) holds every weight, gradient and moment: pruned */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "grep -q '^,0,1,given,1/1,1,1,ddp,.*,pruned: model state' %s", out);
    CU_ASSERT_EQUAL(system(cmd), 0);
    static char mem[64][64];
    int n = csv_col(out, 22, mem, 64), over = 0;
    for (int i = 0; i < n; i++)
        over += mem[i][0] && atof(mem[i]) > 1.3;
    CU_ASSERT_EQUAL(over, 0);
    /* nothing fits: every layout pruned, none simulated */
    snprintf(args, sizeof args, SMALL " --max-gpu-memory 0.01 --out %s", out);
    CU_ASSERT_EQUAL(epsim_exec(args, so, NULL), 0);
    CU_ASSERT_EQUAL(count_status(out, "pruned: model state exceeds the GPU memory"), 26);
    CU_ASSERT(file_has(so, "simulated 0"));
    remove(out);
    remove(so);
}

/* --shard i/n: the shards' layouts are disjoint and together the whole legal set. */
static void test_shards_cover_once(void) {
    char a[512], b[512], all[512], args[2048];
    tmp_path(a, sizeof a, "search_s0.csv");
    tmp_path(b, sizeof b, "search_s1.csv");
    tmp_path(all, sizeof all, "search_all.csv");
    snprintf(args, sizeof args, SMALL " --budget 1 --shard 0/2 --out %s", a);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    snprintf(args, sizeof args, SMALL " --budget 1 --shard 1/2 --out %s", b);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    snprintf(args, sizeof args, SMALL " --budget 1 --out %s", all);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "test \"$(for f in %s %s; do tail -n +2 $f | cut -d, -f2; done | sort -n | uniq -d)\" "
             "= '' && "
             "test \"$(for f in %s %s; do tail -n +2 $f | cut -d, -f2; done | sort -n)\" = "
             "\"$(tail -n +2 %s | cut -d, -f2 | sort -n)\"",
             a, b, a, b, all);
    CU_ASSERT_EQUAL(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "tail -n +2 %s | cut -d, -f2 | awk '$1 %% 2 != 0 { exit 1 }'", a);
    CU_ASSERT_EQUAL(system(cmd), 0);
    remove(a);
    remove(b);
    remove(all);
}

/* The bound that orders and prunes the simulations is a lower bound: every layout's simulated
 * step (simulated in the search or run here from its CSV flags) is at least its lower_bound_s.
 * Two searches: 8 layers on 2 GPUs (the pipeline's fill and drain; with 8 layers PP 2 offers VPP 4,
 * model chunks of one layer, but not VPP 3: 8 layers do not split into 6 chunks), and a small MoE
 * on two DGX nodes with PP 1 and the alltoall dispatcher (token all-to-alls and DP collectives
 * across the NICs, HSDP among the shardings). */
#define EIGHT                                                                                      \
    "--topo h200x2 --no-preset --num-layers 8 --seq-length 512 --global-batch-size 8 "            \
    "--moe-token-dispatcher-type alltoall --micro-batch-size 1 --recompute-granularity none "      \
    "--context-parallel-size 1"
#define SIXTEEN                                                                                    \
    "--topo dgx16 --no-preset --num-layers 4 --seq-length 1024 --global-batch-size 32 "           \
    "--micro-batch-size 1 --recompute-granularity none --context-parallel-size 1 "                \
    "--tensor-model-parallel-size 1 --num-experts 16 --moe-router-topk 2 "                         \
    "--pipeline-model-parallel-size 1 --moe-token-dispatcher-type alltoall"

/* Runs `search BASE` and every layout of its CSV alone; returns how many layouts had a bound, or
 * -1 when a step is below its bound (the layout on stderr). */
static int bounds_hold(const char *base, const char *name) {
    char out[512], args[2048], cmd[4096];
    tmp_path(out, sizeof out, name);
    snprintf(args, sizeof args, "search %s --budget 100 --jobs 2 --out %s", base, out);
    if (epsim_exec(args, NULL, NULL) != 0) return -1;
    snprintf(cmd, sizeof cmd,
             "n=0; " AWK_CSV "$h[\"lower_bound_s\"]!=\"\""
             "{print $h[\"lower_bound_s\"] \";\" $h[\"flags\"]}' %s > %s.rows && "
             "while IFS=';' read lb fl; do n=$((n+1)); "
             "t=$(%s/sim/epsim %s $fl 2>/dev/null | awk '/iteration time/{print $3}'); "
             "awk -v t=\"$t\" -v lb=\"$lb\" 'BEGIN{exit !(t != \"\" && t + 1e-6 >= lb)}' || "
             "{ echo \"$fl: step $t below the bound $lb\" >&2; exit 1; }; done < %s.rows && "
             "exit $((n > 100 ? 100 : n))",
             out, out, EP_BINARY_DIR, base, out);
    int st = system(cmd), rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (rc == 1) rc = -1; /* a bound above a step (one row alone cannot happen here) */
    snprintf(cmd, sizeof cmd, "%s.rows", out);
    remove(cmd);
    remove(out);
    return rc;
}

/* Spearman's rank correlation of a and b (n values, no ties assumed: ranks by position) */
static double spearman(const double *a, const double *b, int n) {
    double d2 = 0;
    for (int i = 0; i < n; i++) {
        int ra = 0, rb = 0;
        for (int j = 0; j < n; j++) {
            ra += a[j] < a[i] || (a[j] == a[i] && j < i);
            rb += b[j] < b[i] || (b[j] == b[i] && j < i);
        }
        d2 += (double)(ra - rb) * (ra - rb);
    }
    return n > 1 ? 1 - 6 * d2 / ((double)n * ((double)n * n - 1)) : 1;
}

/* The estimate that orders the simulations is at least the bound, and ranks the simulated steps
 * better than the bound (on this search, 2026-11-29: 1.00 against 0.55, the fastest layout first
 * against seventh): it counts the all-to-alls the compute waits for. */
static void test_estimate_orders_steps(void) {
    char out[512], args[2048];
    tmp_path(out, sizeof out, "search_est.csv");
    snprintf(args, sizeof args, "search " SIXTEEN " --budget 100 --jobs 2 --out %s", out);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    static char it[64][64], lb[64][64], est[64][64];
    int n = csv_col(out, 12, it, 64);
    CU_ASSERT_EQUAL_FATAL(csv_col(out, 27, lb, 64), n);
    CU_ASSERT_EQUAL_FATAL(csv_col(out, 28, est, 64), n);
    double t[64], l[64], e[64];
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (!it[i][0]) continue;
        t[m] = atof(it[i]), l[m] = atof(lb[i]), e[m] = atof(est[i]);
        CU_ASSERT(e[m] >= l[m]);
        m++;
    }
    CU_ASSERT(m >= 10);
    double se = spearman(e, t, m), sl = spearman(l, t, m);
    fprintf(stderr, "\n  %d layouts simulated: Spearman of the estimate %.2f, of the bound %.2f\n",
            m, se, sl); /* the figures docs/epsim.md quotes */
    CU_ASSERT(se >= sl);
    CU_ASSERT(se > 0.8);
    remove(out);
}

/* A MoE model over two DGX nodes, EP 16, large enough that compute, not the host, sets its step */
#define WIDE16                                                                                     \
    "--topo dgx16 --no-preset --num-layers 4 --hidden-size 4096 --num-attention-heads 32 "         \
    "--ffn-hidden-size 8192 --moe-ffn-hidden-size 2048 --seq-length 4096 --global-batch-size 64 "  \
    "--micro-batch-size 1 --recompute-granularity none --context-parallel-size 1 "                 \
    "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --num-experts 16 "            \
    "--moe-router-topk 2 --moe-token-dispatcher-type alltoall --expert-model-parallel-size 16"

/* Searches WIDE16 with h100-megatron.json as `sed_expr` changes it and as committed; every layout
 * must keep its bound and no estimate may be lower with the committed file.
 * Returns how many layouts the committed file estimates longer (of them, with EP overlap alone
 * when overlap_only), -1 when the layouts differ. */
static int estimates_risen(const char *sed_expr, const char *name, int overlap_only) {
    char calib[512], plain[512], ref[512], cmd[2048], args[2048];
    tmp_path(calib, sizeof calib, name);
    tmp_path(plain, sizeof plain, "search_changed.csv");
    tmp_path(ref, sizeof ref, "search_ref.csv");
    snprintf(cmd, sizeof cmd, "sed -E '%s' %s/traces/calib/h100-megatron.json > %s", sed_expr,
             EP_SOURCE_DIR, calib);
    if (system(cmd) != 0) return -1;
    snprintf(args, sizeof args, "search " WIDE16 " --budget 1 --jobs 2 --calib %s --out %s", calib,
             plain);
    if (epsim_exec(args, NULL, NULL) != 0) return -1;
    snprintf(args, sizeof args,
             "search " WIDE16 " --budget 1 --jobs 2 --calib %s/traces/calib/h100-megatron.json "
             "--out %s",
             EP_SOURCE_DIR, ref);
    if (epsim_exec(args, NULL, NULL) != 0) return -1;
    static char ia[64][64], ib[64][64], la[64][64], lb[64][64], ea[64][64], eb[64][64], ov[64][64];
    int n = csv_col(plain, 1, ia, 64);
    if (n < 12 || csv_col(ref, 1, ib, 64) != n) return -1;
    csv_col(plain, 27, la, 64), csv_col(ref, 27, lb, 64);
    csv_col(plain, 28, ea, 64), csv_col(ref, 28, eb, 64);
    csv_col(ref, 9, ov, 64); /* ep_overlap */
    int rose = 0, matched = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (strcmp(ia[i], ib[j]) != 0) continue;
            matched++;
            CU_ASSERT(strcmp(la[i], lb[j]) == 0); /* the bound: standalone, at full bandwidth */
            CU_ASSERT(atof(eb[j]) >= atof(ea[i]) * (1 - 1e-9));
            rose +=
                (!overlap_only || strcmp(ov[j], "on") == 0) && atof(eb[j]) > atof(ea[i]) * 1.001;
        }
    remove(calib), remove(plain), remove(ref);
    return matched == n ? rose : -1;
}

/* The estimate counts what compute and transfers running together cost each other (the
 * calibration's interference factors, as the simulation applies them) and the bound does not:
 * with the factors at 1 every layout keeps its bound and no estimate rises; with the measured ones
 * the layouts whose all-to-alls run beside compute (EP overlap) are estimated longer. */
static void test_estimate_counts_interference(void) {
    CU_ASSERT(estimates_risen("s/\"(comm_flops_slowdown|comm_wait_slowdown|nccl_compute_slowdown)"
                              "\":[0-9.]+/\"\\1\":1/",
                              "search_nointerf.json", 1) > 0);
}

/* The estimate moves a transfer at its algorithm's efficiencies (sim_algo_efficiency), the bound
 * at full bandwidth: with NCCL over the NICs at efficiency 1 instead of the measured 0.9, every
 * layout keeps its bound, and those whose all-to-alls cross the two nodes are estimated shorter. */
static void test_estimate_counts_efficiency(void) {
    CU_ASSERT(estimates_risen("s/\"nccl_ib_efficiency\":[0-9.]+/\"nccl_ib_efficiency\":1/",
                              "search_fulleff.json", 0) > 0);
}

static void test_bound_is_a_lower_bound(void) {
    char out[512], args[2048], cmd[4096];
    tmp_path(out, sizeof out, "search_vpp.csv");
    snprintf(args, sizeof args, "search " EIGHT " --budget 1 --jobs 2 --out %s", out);
    CU_ASSERT_EQUAL_FATAL(epsim_exec(args, NULL, NULL), 0);
    snprintf(cmd, sizeof cmd,
             AWK_CSV "$h[\"pp_vpp\"]==\"2/4\"{a++} "
                     "$h[\"pp_vpp\"]==\"2/3\"{b++} END{exit !(a>0 && b==0)}' %s",
             out);
    CU_ASSERT_EQUAL(system(cmd), 0);
    remove(out);
    CU_ASSERT(bounds_hold(EIGHT, "search_lb8.csv") >= 20);
    CU_ASSERT(bounds_hold(SIXTEEN, "search_lb16.csv") >= 20);
}

/* Bad input: one line on stderr, exit 2, no CSV. */
static void test_search_bad_input(void) {
    char out[512], args[2048];
    tmp_path(out, sizeof out, "search_bad.csv");
    static const char *const cases[] = {
        "--budget 0",
        "--budget many",
        "--jobs 0",
        "--shard 3/2",
        "--max-gpu-memory abc",
        "--csv=x.csv",
        "--summary-json x.json",
        "--tensor-model-parallel-size 3", /* no legal layout */
        "--topo no-such-topology",
        "--no-such-flag 1",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, SMALL " %s --out %s", cases[i], out);
        expect_exit2(args, out);
    }
    /* no --out; no --global-batch-size */
    expect_exit2("search --topo h200x2 --no-preset --num-layers 2 --global-batch-size 4", NULL);
    snprintf(args, sizeof args, "search --topo h200x2 --no-preset --num-layers 2 --out %s", out);
    expect_exit2(args, out);
}

void ep_suite_search(void) {
    CU_pSuite s = CU_add_suite("epsim search", NULL, NULL);
    CU_add_test(s, "the enumeration is the legal set; budget; ranking",
                test_enumeration_is_the_legal_set);
    CU_add_test(s, "a dense model enumerates each layout once", test_dense_model_axes);
    CU_add_test(s, "layouts that cannot fit are pruned", test_memory_pruning);
    CU_add_test(s, "shards cover the space once", test_shards_cover_once);
    CU_add_test(s, "the search's bound is below every layout's step", test_bound_is_a_lower_bound);
    CU_add_test(s, "the estimate counts interference, the bound does not",
                test_estimate_counts_interference);
    CU_add_test(s, "the estimate moves transfers at their efficiencies, the bound does not",
                test_estimate_counts_efficiency);
    CU_add_test(s, "the estimate orders the simulations better than the bound",
                test_estimate_orders_steps);
    CU_add_test(s, "bad input: one line, exit 2, no CSV", test_search_bad_input);
}
