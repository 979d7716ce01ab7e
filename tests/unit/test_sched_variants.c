/* What each dispatcher, padding mode, THD and HSDP layout adds to the schedule
 * (docs/schedule.md, "Layers" and "Data parallel"): host syncs, fused permute, group placement,
 * traffic sizes. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_cost.h"
#include "sched_test_util.h"

#define EP2      SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 4 "
#define HYBRIDEP "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep "
#define DEEPEP   "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep "
#define THD      "--sequence-packing --seqlen-dist uniform --seqlen-mean 40 "

static int count_kind(const ep_sched *s, int r, ep_op_kind k) {
    int n = 0;
    for (int i = 0; i < s->ranks[r].nops; i++)
        n += s->ranks[r].ops[i].kind == k;
    return n;
}

/* Host syncs per MoE layer per microbatch, for each variant. */
static void expect_syncs(const char *flags, int per_layer, const char *label, int label_per_layer) {
    ep_sched s;
    if (sched_build_flags(&s, flags) != 0) return;
    int moe = sched_moe_layers(&s), nmb = s.num_microbatches;
    CU_ASSERT(moe > 0 && nmb > 0);
    for (int r = 0; r < s.world; r++) {
        CU_ASSERT_EQUAL(count_kind(&s, r, EP_OP_HOST_SYNC), per_layer * moe * nmb);
        if (label) CU_ASSERT_EQUAL(sched_count(&s, r, label), label_per_layer * moe * nmb);
    }
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), 0);
    ep_sched_free(&s);
}

static void test_host_syncs(void) {
    expect_syncs(EP2, 1, "count_sync", 1); /* alltoall counts */
    expect_syncs(EP2 "--moe-pad-mode host --moe-pad-multiple 16", 2, "pad_sync", 1); /* + pad */
    expect_syncs(EP2 HYBRIDEP, 1, "count_sync", 1); /* the permuted row count, read on the host */
#define BUDGET "--moe-permute-budget 4096 "
    expect_syncs(EP2 HYBRIDEP BUDGET, 0, NULL, 0); /* a row budget: graph-safe */
    expect_syncs(EP2 HYBRIDEP BUDGET "--moe-pad-mode device --moe-pad-multiple 16", 0, "pad.", 0);
    expect_syncs(EP2 HYBRIDEP BUDGET "--moe-pad-mode host --moe-pad-multiple 16", 1, "pad_sync", 1);
    expect_syncs(EP2 HYBRIDEP "--moe-pad-mode host --moe-pad-multiple 16", 2, "count_sync", 1);
    expect_syncs(EP2 HYBRIDEP BUDGET THD, 1, "thd_max.fwd", 1); /* all-reduce MAX + sync */
    expect_syncs(EP2 HYBRIDEP BUDGET THD, 1, "thd_sync", 1);
    expect_syncs(EP2 HYBRIDEP THD, 2, "count_sync", 1);
    expect_syncs(EP2 DEEPEP, 1, "notify_sync", 1); /* the receive count */
    expect_syncs(EP2 DEEPEP THD, 1, "thd_", 0);    /* deepep handles uneven counts */
    expect_syncs(EP2 THD, 1, "thd_", 0);
    expect_syncs(EP2 "--moe-expert-capacity-factor 1", 1, "count_sync", 1); /* drops: counts */
    expect_syncs(EP2 "--moe-expert-capacity-factor 1 --moe-pad-expert-input-to-capacity", 0,
                 "count_a2a", 0); /* static shapes */
}

static void test_thd_hybridep_padding(void) {
    ep_sched s;
    if (sched_build_flags(&s, EP2 HYBRIDEP THD) != 0) return;
    CU_ASSERT(s.ntraffic > 0);
    for (int t = 0; t < s.ntraffic; t++) {
        const ep_traffic *tr = &s.traffic[t];
        int max = 0;
        int64_t waste = 0;
        for (int i = 0; i < tr->n; i++)
            if (tr->tokens[i] > max) max = tr->tokens[i];
        CU_ASSERT_EQUAL(tr->thd_padded_tokens % 64, 0);
        CU_ASSERT(tr->thd_padded_tokens >= max && tr->thd_padded_tokens < max + 64);
        for (int i = 0; i < tr->n; i++)
            waste += tr->thd_padded_tokens - tr->tokens[i];
        CU_ASSERT_EQUAL(tr->thd_pad_tokens, waste);
    }
    /* the all-reduce MAX runs over TP x EP with 8 bytes */
    int i = sched_find(&s, 0, "mb0.c0.L0.thd_max.fwd");
    CU_ASSERT_FATAL(i >= 0);
    const ep_op *op = &s.ranks[0].ops[i];
    CU_ASSERT_EQUAL(op->kind, EP_OP_ALL_REDUCE);
    CU_ASSERT_EQUAL(s.groups[op->group].kind, EP_GROUP_TPEP);
    CU_ASSERT_DOUBLE_EQUAL(op->bytes, 8, 0);
    CU_ASSERT_EQUAL(s.ranks[0].ops[i + 1].kind, EP_OP_HOST_SYNC);
    ep_sched_free(&s);
    /* deepep with THD: no padding recorded */
    if (sched_build_flags(&s, EP2 DEEPEP THD) != 0) return;
    for (int t = 0; t < s.ntraffic; t++)
        CU_ASSERT_EQUAL(s.traffic[t].thd_pad_tokens, 0);
    ep_sched_free(&s);
}

static void test_fused_permute(void) {
    ep_sched plain, fused;
    if (sched_build_flags(&plain, EP2 HYBRIDEP "--moe-hybridep-num-sms 8") != 0) return;
    if (sched_build_flags(&fused, EP2 HYBRIDEP "--moe-hybridep-num-sms 8 "
                                               "--moe-hybridep-fuse-permute "
                                               "--moe-hybridep-num-blocks-permute 4") != 0) {
        ep_sched_free(&plain);
        return;
    }
    int moe = sched_moe_layers(&plain), nmb = plain.num_microbatches;
    CU_ASSERT_EQUAL(sched_count(&plain, 0, ".permute."), 2 * moe * nmb); /* fwd + bwd */
    CU_ASSERT_EQUAL(sched_count(&plain, 0, ".unpermute."), 2 * moe * nmb);
    CU_ASSERT_EQUAL(sched_count(&fused, 0, ".permute."), 0);
    CU_ASSERT_EQUAL(sched_count(&fused, 0, ".unpermute."), 0);
    CU_ASSERT_EQUAL(plain.ranks[0].nops - fused.ranks[0].nops, 4 * moe * nmb);
    int a = sched_find(&plain, 0, "mb0.c0.L0.dispatch.fwd");
    int b = sched_find(&fused, 0, "mb0.c0.L0.dispatch.fwd");
    CU_ASSERT_FATAL(a >= 0 && b >= 0);
    CU_ASSERT_EQUAL(plain.ranks[0].ops[a].sms, 8);
    CU_ASSERT_EQUAL(fused.ranks[0].ops[b].sms, 12); /* the permute blocks take SMs */
    /* hybridep gathers the routing map (T x E bools, a byte each) before dispatching */
    int g = sched_find(&plain, 0, "mb0.c0.L0.routing_ag.fwd");
    CU_ASSERT_FATAL(g >= 0);
    CU_ASSERT_EQUAL(plain.ranks[0].ops[g].kind, EP_OP_ALL_GATHER);
    CU_ASSERT_DOUBLE_EQUAL(plain.ranks[0].ops[g].bytes, 128 * 8, 0);
    ep_sched_free(&plain);
    ep_sched_free(&fused);
}

/* --moe-flex-transport nccl: the same schedule, its token all-to-alls hold no SMs (NCCL's own) */
static void test_flex_transport_nccl(void) {
    ep_sched k, n;
    const char *f = EP2 HYBRIDEP "--moe-hybridep-fuse-permute --moe-hybridep-num-blocks-permute 4 "
                                 "--moe-hybridep-num-sms 8";
    char flags[1024];
    snprintf(flags, sizeof flags, "%s --moe-flex-transport nccl", f);
    if (sched_build_flags(&k, f) != 0) return;
    if (sched_build_flags(&n, flags) != 0) {
        ep_sched_free(&k);
        return;
    }
    CU_ASSERT_EQUAL(k.ranks[0].nops, n.ranks[0].nops);
    CU_ASSERT_EQUAL(n.cfg.ep_transport, EP_TRANSPORT_NCCL);
    int a2a = 0;
    for (int i = 0; i < n.ranks[0].nops; i++) {
        const ep_op *ok = &k.ranks[0].ops[i], *on = &n.ranks[0].ops[i];
        CU_ASSERT_EQUAL(ok->kind, on->kind);
        if (on->kind != EP_OP_A2A_DISPATCH && on->kind != EP_OP_A2A_COMBINE) continue;
        CU_ASSERT_EQUAL(ok->sms, 12);
        CU_ASSERT_EQUAL(on->sms, 0);
        a2a++;
    }
    CU_ASSERT(a2a > 0);
    ep_sched_free(&k);
    ep_sched_free(&n);
}

static void test_deepep_sms_and_traffic(void) {
    ep_sched s;
    if (sched_build_flags(&s, EP2 DEEPEP "--moe-deepep-num-sms 20 --gpus-per-node 1") != 0) return;
    int d = sched_find(&s, 1, "mb1.c0.L1.dispatch.fwd");
    int c = sched_find(&s, 1, "mb1.c0.L1.combine.fwd");
    CU_ASSERT_FATAL(d >= 0 && c >= 0);
    const ep_op *dop = &s.ranks[1].ops[d], *cop = &s.ranks[1].ops[c];
    CU_ASSERT_EQUAL(dop->sms, 20);
    CU_ASSERT_EQUAL(dop->kind, EP_OP_A2A_DISPATCH);
    CU_ASSERT_EQUAL(cop->kind, EP_OP_A2A_COMBINE);
    CU_ASSERT_EQUAL(dop->traffic, cop->traffic);
    CU_ASSERT_EQUAL(cop->transpose, 1);
    const ep_traffic *tr = &s.traffic[dop->traffic];
    CU_ASSERT_EQUAL(tr->n, 2);
    CU_ASSERT_PTR_NOT_NULL(tr->node_bytes); /* per-node deduplicated for deepep */
    CU_ASSERT_EQUAL(tr->nnodes, 2);
    /* op bytes = what the rank sends to others (dispatch) / sends back (combine) */
    CU_ASSERT_DOUBLE_EQUAL(dop->bytes, (double)tr->bytes[1 * 2 + 0], 0);
    CU_ASSERT_DOUBLE_EQUAL(cop->bytes, (double)tr->bytes[0 * 2 + 1], 0);
    /* the backward of dispatch is a combine-direction transfer of the same instance */
    int db = sched_find(&s, 1, "mb1.c0.L1.dispatch.bwd");
    CU_ASSERT_FATAL(db >= 0);
    CU_ASSERT_EQUAL(s.ranks[1].ops[db].kind, EP_OP_A2A_COMBINE);
    CU_ASSERT_EQUAL(s.ranks[1].ops[db].traffic, dop->traffic);
    /* the expert GEMMs take the rows the traffic says this rank's experts receive */
    int f1 = sched_find(&s, 1, "mb1.c0.L1.expert_fc1.fwd");
    CU_ASSERT_FATAL(f1 >= 0);
    CU_ASSERT_EQUAL(s.ranks[1].ops[f1].m, tr->expert_rows[1]);
    CU_ASSERT_EQUAL(s.ranks[1].ops[f1].batch, 4);
    /* conservation: token rows sent = token rows received over the group */
    int64_t sent = 0, recv = 0;
    for (int i = 0; i < tr->n; i++)
        sent += tr->send_rows[i], recv += tr->recv_rows[i];
    CU_ASSERT_EQUAL(sent, recv);
    ep_sched_free(&s);
}

static void test_padding_rows(void) {
    ep_sched s;
    if (sched_build_flags(&s, EP2 HYBRIDEP "--moe-pad-mode device --moe-pad-multiple 16") != 0)
        return;
    int f1 = sched_find(&s, 0, "mb0.c0.L0.expert_fc1.fwd");
    CU_ASSERT_FATAL(f1 >= 0);
    const ep_op *op = &s.ranks[0].ops[f1];
    const ep_traffic *tr = NULL;
    for (int i = 0; i < s.ranks[0].nops && !tr; i++)
        if (s.ranks[0].ops[i].traffic >= 0 && s.ranks[0].ops[i].layer == 0 &&
            s.ranks[0].ops[i].mb == 0)
            tr = &s.traffic[s.ranks[0].ops[i].traffic];
    CU_ASSERT_PTR_NOT_NULL_FATAL(tr);
    CU_ASSERT_EQUAL(op->m, tr->pad_rows[0]);
    CU_ASSERT(tr->pad_rows[0] >= tr->expert_rows[0]);
    CU_ASSERT(tr->pad_rows[0] - tr->expert_rows[0] < 16 * 4); /* < multiple per local expert */
    ep_sched_free(&s);
}

/* docs/schedule.md, section 7: 16 GPUs, EP=4, N=2. Dense inner {0-7}, expert inner {0,4}, outer
 * {0,8}. */
static void expect_group(const ep_sched *s, int r, const char *name, ep_group_kind kind,
                         const int *members, int n) {
    int i = sched_find(s, r, name);
    if (i < 0) fprintf(stderr, "\n  missing %s on rank %d\n", name, r);
    CU_ASSERT_FATAL(i >= 0);
    const ep_group *g = &s->groups[s->ranks[r].ops[i].group];
    CU_ASSERT_EQUAL(g->kind, kind);
    CU_ASSERT_EQUAL_FATAL(g->size, n);
    for (int k = 0; k < n; k++)
        CU_ASSERT_EQUAL(g->ranks[k], members[k]);
}

static void test_hsdp_groups(void) {
    ep_sched s;
    if (sched_build_flags(&s, SCHED_SMALL "--expert-model-parallel-size 4 --world-size 16 "
                                          "--global-batch-size 16 --use-megatron-fsdp "
                                          "--data-parallel-sharding-strategy optim_grads_params "
                                          "--num-distributed-optimizer-instances 2") != 0)
        return;
    int nmb = s.num_microbatches, last = nmb - 1;
    static const int dense_inner[] = {0, 1, 2, 3, 4, 5, 6, 7}, expert_inner[] = {0, 4},
                     outer[] = {0, 8}, ep_group[] = {0, 1, 2, 3};
    char name[64];
    expect_group(&s, 0, "mb0.L1.fsdp.ag_dense.fwd", EP_GROUP_DP_INNER, dense_inner, 8);
    expect_group(&s, 0, "mb0.L1.fsdp.ag_expert.fwd", EP_GROUP_EDP_INNER, expert_inner, 2);
    expect_group(&s, 0, "mb0.L1.fsdp.ag_expert.bwd", EP_GROUP_EDP_INNER, expert_inner, 2);
    expect_group(&s, 0, "mb0.L1.fsdp.rs_dense.bwd", EP_GROUP_DP_INNER, dense_inner, 8);
    expect_group(&s, 0, "mb0.L1.fsdp.rs_expert.bwd", EP_GROUP_EDP_INNER, expert_inner, 2);
    snprintf(name, sizeof name, "mb%d.L1.hsdp.ar_dense.bwd", last);
    expect_group(&s, 0, name, EP_GROUP_DP_OUTER, outer, 2);
    snprintf(name, sizeof name, "mb%d.L1.hsdp.ar_expert.bwd", last);
    expect_group(&s, 0, name, EP_GROUP_EDP_OUTER, outer, 2);
    expect_group(&s, 0, "mb0.c0.L1.dispatch.fwd", EP_GROUP_EP, ep_group, 4);
    /* outer reductions only at the last microbatch; inner ones every microbatch */
    CU_ASSERT_EQUAL(sched_count(&s, 0, "hsdp.ar_dense"), s.plan.num_layers);
    CU_ASSERT_EQUAL(sched_count(&s, 0, "fsdp.rs_dense"), s.plan.num_layers * nmb);
    CU_ASSERT_EQUAL(sched_count(&s, 0, "fsdp.ag_dense"), 2 * s.plan.num_layers * nmb);
    /* expert parameters never travel over EP */
    for (int i = 0; i < s.ranks[0].nops; i++) {
        const ep_op *op = &s.ranks[0].ops[i];
        if (op->stream == EP_STREAM_DP) CU_ASSERT_NOT_EQUAL(s.groups[op->group].kind, EP_GROUP_EP);
    }
    /* rank 12: expert inner {8,12}, outer {4,12} */
    static const int ei12[] = {8, 12}, eo12[] = {4, 12};
    expect_group(&s, 12, "mb0.L0.fsdp.ag_expert.fwd", EP_GROUP_EDP_INNER, ei12, 2);
    snprintf(name, sizeof name, "mb%d.L0.hsdp.ar_expert.bwd", last);
    expect_group(&s, 12, name, EP_GROUP_EDP_OUTER, eo12, 2);
    ep_sched_free(&s);
    /* optim: the outer shard is gathered at the first microbatch and reduce-scattered at the last
     */
    if (sched_build_flags(&s, SCHED_SMALL "--expert-model-parallel-size 4 --world-size 16 "
                                          "--global-batch-size 16 --use-megatron-fsdp "
                                          "--data-parallel-sharding-strategy optim_grads_params "
                                          "--num-distributed-optimizer-instances 2 "
                                          "--outer-dp-sharding-strategy optim") != 0)
        return;
    expect_group(&s, 0, "mb0.L0.hsdp.ag_dense.fwd", EP_GROUP_DP_OUTER, outer, 2);
    CU_ASSERT_EQUAL(sched_count(&s, 0, "hsdp.ag_dense"), s.plan.num_layers);
    snprintf(name, sizeof name, "mb%d.L0.hsdp.rs_dense.bwd", s.num_microbatches - 1);
    expect_group(&s, 0, name, EP_GROUP_DP_OUTER, outer, 2);
    ep_sched_free(&s);
}

/* Routing budget below one microbatch: the EP groups of a stage share draws (the same matrices
 * for the same microbatch and layer); an unlimited budget draws every group. */
static void test_routing_budget_groups(void) {
    const char *base = SCHED_SMALL "--expert-model-parallel-size 2 --world-size 8 "
                                   "--global-batch-size 16 --gpus-per-node 8";
    char flags[1024];
    ep_sched shared, all;
    snprintf(flags, sizeof flags, "%s --routing-budget 1000", base);
    if (sched_build_flags(&shared, flags) != 0) return;
    snprintf(flags, sizeof flags, "%s --routing-budget 0", base);
    if (sched_build_flags(&all, flags) != 0) {
        ep_sched_free(&shared);
        return;
    }
    CU_ASSERT_EQUAL(shared.route_period, 1);
    CU_ASSERT_EQUAL(shared.route_groups, 1); /* 4 EP groups, one drawn */
    CU_ASSERT_EQUAL(all.route_groups, 0);
    int same = 0, pairs = 0, diff_all = 0;
    for (int i = 0; i < shared.ntraffic; i++)
        for (int j = i + 1; j < shared.ntraffic; j++) {
            const ep_traffic *a = &shared.traffic[i], *b = &shared.traffic[j];
            if (a->microbatch != b->microbatch || a->layer != b->layer || a->group == b->group)
                continue;
            pairs++;
            same += !memcmp(a->bytes, b->bytes, sizeof(int64_t) * (size_t)a->n * a->n);
        }
    CU_ASSERT(pairs > 0);
    CU_ASSERT_EQUAL(same, pairs);
    for (int i = 0; i < all.ntraffic; i++)
        for (int j = i + 1; j < all.ntraffic; j++) {
            const ep_traffic *a = &all.traffic[i], *b = &all.traffic[j];
            if (a->microbatch == b->microbatch && a->layer == b->layer && a->group != b->group)
                diff_all += !!memcmp(a->bytes, b->bytes, sizeof(int64_t) * (size_t)a->n * a->n);
        }
    CU_ASSERT(diff_all > 0); /* drawn apart, groups route differently */
    ep_sched_free(&shared);
    ep_sched_free(&all);
}

/* --routing-layer-draws 1: every MoE layer reuses one draw (one traffic instance per microbatch
 * and EP group); 0: every MoE layer draws its own. */
static void test_routing_layer_draws(void) {
    const char *base = SCHED_SMALL "--num-layers 4 --expert-model-parallel-size 2 --world-size 2 "
                                   "--global-batch-size 2 --gpus-per-node 2";
    char flags[1024];
    ep_sched one, all;
    snprintf(flags, sizeof flags, "%s --routing-layer-draws 1", base);
    if (sched_build_flags(&one, flags) != 0) return;
    snprintf(flags, sizeof flags, "%s --routing-layer-draws 0", base);
    if (sched_build_flags(&all, flags) != 0) {
        ep_sched_free(&one);
        return;
    }
    int moe = 0;
    for (int l = 0; l < all.plan.num_layers + all.plan.num_mtp; l++)
        moe += all.plan.layers[l].is_moe;
    CU_ASSERT(moe >= 2);
    CU_ASSERT_EQUAL(all.ntraffic, moe * all.num_microbatches);
    CU_ASSERT_EQUAL(one.ntraffic, one.num_microbatches);
    CU_ASSERT_EQUAL(one.ranks[0].nops, all.ranks[0].nops); /* the same schedule, fewer draws */
    ep_sched_free(&one);
    ep_sched_free(&all);
}

/* Model state of rank 0 (weights, fp32 gradients, Adam state) for a flag string; -1 on failure. */
static double model_state(const char *flags, double *total_params) {
    ep_sched s;
    char all[1024];
    snprintf(all, sizeof all, SCHED_SMALL "%s", flags);
    if (sched_build_flags(&s, all) != 0) return -1;
    double b = s.ranks[0].model_state_bytes;
    if (total_params) *total_params = ep_cost_total_params(&s.cfg, &s.plan);
    ep_sched_free(&s);
    return b;
}

/* 18 bytes per parameter unsharded (2 bf16 weight + 4 fp32 gradient + 12 Adam), Megatron-LM's
 * accounting; the distributed optimizer shards the 12 over DP (6 + 12/DP), FSDP optim_grads the
 * gradients too (2 + 16/DP), optim_grads_params everything (18/DP); EP divides the experts. */
static void test_model_state(void) {
    double total;
    double one = model_state("--world-size 1", &total);
    CU_ASSERT(one > 0);
    CU_ASSERT(fabs(one / 18 - total) <= 2.0 * 256); /* all but the final norm (hidden 256) */
    double plain = model_state("--world-size 4", NULL);
    CU_ASSERT_DOUBLE_EQUAL(plain, one, 1e-9 * one); /* DP replicates */
    CU_ASSERT_DOUBLE_EQUAL(model_state("--world-size 4 --use-distributed-optimizer", NULL) / plain,
                           (6.0 + 12.0 / 4) / 18, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(
        model_state("--world-size 4 --use-megatron-fsdp --data-parallel-sharding-strategy optim",
                    NULL) /
            plain,
        (6.0 + 12.0 / 4) / 18, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(model_state("--world-size 4 --use-megatron-fsdp "
                                       "--data-parallel-sharding-strategy optim_grads",
                                       NULL) /
                               plain,
                           (2.0 + 16.0 / 4) / 18, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(model_state("--world-size 4 --use-megatron-fsdp "
                                       "--data-parallel-sharding-strategy optim_grads_params",
                                       NULL) /
                               plain,
                           1.0 / 4, 1e-12);
    /* lower-precision optimizer state and gradients: bf16 moments 2 + 4 + (4 + 2 + 2), fp16
     * master weights and fp8 moments 2 + 4 + (2 + 1 + 1), bf16 gradients 2 + 2 + 12 */
    const char *pa = "--world-size 4 --use-precision-aware-optimizer ";
    char flags[256];
    snprintf(flags, sizeof flags, "%s--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16", pa);
    CU_ASSERT_DOUBLE_EQUAL(model_state(flags, NULL) / plain, 14.0 / 18, 1e-12);
    snprintf(flags, sizeof flags,
             "%s--main-params-dtype fp16 --exp-avg-dtype fp8 --exp-avg-sq-dtype fp8", pa);
    CU_ASSERT_DOUBLE_EQUAL(model_state(flags, NULL) / plain, 10.0 / 18, 1e-12);
    snprintf(flags, sizeof flags, "%s--main-grads-dtype bf16", pa);
    CU_ASSERT_DOUBLE_EQUAL(model_state(flags, NULL) / plain, 16.0 / 18, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(model_state("--world-size 4 --grad-reduce-in-bf16", NULL) / plain,
                           16.0 / 18, 1e-12);
    double ep4 = model_state("--world-size 4 --expert-model-parallel-size 4", NULL);
    double ep2 = model_state("--world-size 4 --expert-model-parallel-size 2", NULL);
    CU_ASSERT(ep4 < ep2 && ep2 < plain);
    /* experts E: plain - ep2 = 18 E / 2, plain - ep4 = 18 E 3/4 */
    CU_ASSERT_DOUBLE_EQUAL((plain - ep4) / (plain - ep2), 1.5, 1e-9);
}

/* Gradient collectives move the main-gradient dtype; the optimizer step reads and writes the
 * state in its dtypes (30 B per parameter in fp32: 2 x 12 + 4 + 2). */
static void test_optimizer_dtypes(void) {
    ep_sched a, b;
    const char *base =
        SCHED_SMALL "--world-size 4 --global-batch-size 4 --use-distributed-optimizer ";
    char flags[512];
    if (sched_build_flags(&a, base) != 0) return;
    snprintf(flags, sizeof flags,
             "%s--use-precision-aware-optimizer --main-grads-dtype bf16 --exp-avg-dtype bf16 "
             "--exp-avg-sq-dtype bf16",
             base);
    if (sched_build_flags(&b, flags) != 0) return;
    CU_ASSERT_EQUAL_FATAL(a.ranks[0].nops, b.ranks[0].nops);
    int checked = 0;
    for (int i = 0; i < a.ranks[0].nops; i++) {
        const ep_op *x = &a.ranks[0].ops[i], *y = &b.ranks[0].ops[i];
        if (x->kind == EP_OP_REDUCE_SCATTER && x->stream == EP_STREAM_DP) {
            CU_ASSERT_DOUBLE_EQUAL(y->bytes, x->bytes / 2, 1e-9 * x->bytes);
            checked++;
        } else if (x->kind == EP_OP_OPTIMIZER) {
            CU_ASSERT_DOUBLE_EQUAL(y->bytes / x->bytes, (2 * 8.0 + 2 + 2) / 30, 1e-12);
            checked++;
        } else if (x->kind == EP_OP_ALL_GATHER && x->stream == EP_STREAM_DP) {
            CU_ASSERT_DOUBLE_EQUAL(y->bytes, x->bytes, 0); /* bf16 weights either way */
        }
    }
    CU_ASSERT(checked >= 2);
    ep_sched_free(&a);
    ep_sched_free(&b);
}

/* The optimizer's host loops walk the parameter tensors of the rank's Adam shard, counted by hand
 * for two MoE layers without biases: per layer linear_qkv with its fused norm and linear_proj (3),
 * the pre-MLP norm and the router (2), fc1 and fc2 of each of the 4 local experts (EP 2); the
 * embedding, the output layer and the final norm. The distributed optimizer spreads the dense
 * ones over DP 2 (13 / 2) and keeps the experts (expert DP 1): 6.5 + 16, rounded to 23; without
 * it, 13 + 16. */
static void test_optimizer_tensors(void) {
    const char *variants[] = {"--use-distributed-optimizer", ""};
    const int want[] = {23, 29};
    for (int v = 0; v < 2; v++) {
        char flags[512];
        snprintf(flags, sizeof flags,
                 SCHED_SMALL "--world-size 2 --global-batch-size 2 --disable-bias-linear "
                             "--expert-model-parallel-size 2 %s",
                 variants[v]);
        ep_sched s;
        if (sched_build_flags(&s, flags) != 0) return;
        int opt = sched_find(&s, 0, "optimizer.step");
        CU_ASSERT_FATAL(opt >= 0);
        CU_ASSERT_EQUAL(s.ranks[0].ops[opt].batch, want[v]);
        ep_sched_free(&s);
    }
}

/* The optimizer step updates what the rank's Adam state covers: all of its parameters with FSDP
 * no_shard (a whole copy per rank, like DDP), 1/DP of them from optim up. */
static void test_fsdp_optimizer_shard(void) {
    const char *base = SCHED_SMALL "--world-size 4 --global-batch-size 4 --use-megatron-fsdp "
                                   "--data-parallel-sharding-strategy ";
    const char *strategies[] = {"no_shard", "optim", "optim_grads", "optim_grads_params"};
    double bytes[4], state[4];
    for (int i = 0; i < 4; i++) {
        ep_sched s;
        char flags[512];
        snprintf(flags, sizeof flags, "%s%s", base, strategies[i]);
        if (sched_build_flags(&s, flags) != 0) return;
        int opt = sched_find(&s, 0, "optimizer.step");
        CU_ASSERT_FATAL(opt >= 0);
        bytes[i] = s.ranks[0].ops[opt].bytes;
        state[i] = s.ranks[0].model_state_bytes;
        ep_sched_free(&s);
    }
    CU_ASSERT_DOUBLE_EQUAL(bytes[1], bytes[0] / 4, 1e-9 * bytes[0]);
    CU_ASSERT_DOUBLE_EQUAL(bytes[2], bytes[1], 0);
    CU_ASSERT_DOUBLE_EQUAL(bytes[3], bytes[1], 0);
    /* the state follows: 18 B per parameter unsharded, 2 + 4 + 12 / 4 from optim */
    CU_ASSERT_DOUBLE_EQUAL(state[1] / state[0], (2 + 4 + 3.0) / 18, 1e-12);
}

/* The alltoall dispatcher sends one row per (token, expert) pair, as Megatron-LM does: tokens x
 * top-k rows leave each rank (its own experts' included); --moe-alltoall-per-rank sends one row per
 * token and destination rank. deepep keeps one per destination rank. */
static void test_alltoall_rows(void) {
    ep_sched a, b, c;
    if (sched_build_flags(&a, EP2 "--moe-token-dispatcher-type alltoall") != 0) return;
    if (sched_build_flags(&b, EP2 "--moe-token-dispatcher-type alltoall --moe-alltoall-per-rank") !=
        0)
        return;
    if (sched_build_flags(&c, EP2 DEEPEP) != 0) return;
    const ep_traffic *ta = &a.traffic[0], *tb = &b.traffic[0], *tc = &c.traffic[0];
    int64_t recv = 0;
    for (int i = 0; i < 2; i++) {
        CU_ASSERT_EQUAL(ta->send_rows[i], 128 * 2); /* 128 tokens x top-2 */
        CU_ASSERT(tb->send_rows[i] >= 128 && tb->send_rows[i] < 128 * 2);
        CU_ASSERT_EQUAL(tc->send_rows[i], tb->send_rows[i]); /* the same draw, per rank */
        CU_ASSERT(ta->bytes[i * 2 + (1 - i)] > tb->bytes[i * 2 + (1 - i)]);
        recv += ta->recv_rows[i];
    }
    CU_ASSERT_EQUAL(recv, 2 * 128 * 2); /* every pair is received once */
    ep_sched_free(&a);
    ep_sched_free(&b);
    ep_sched_free(&c);
    ep_config cfg;
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(ep_test_config(&cfg, EP2 DEEPEP " --moe-alltoall-per-rank", err), -2);
}

/* Bytes of rank 0's ops whose name contains `part`. */
static double sum_bytes(const ep_sched *s, const char *part) {
    char name[160];
    double b = 0;
    for (int i = 0; i < s->ranks[0].nops; i++) {
        ep_op_name(&s->ranks[0].ops[i], name, sizeof name);
        if (strstr(name, part)) b += s->ranks[0].ops[i].bytes;
    }
    return b;
}

/* --use-torch-fsdp2: per-layer units sharding weights, gradients and Adam (as Megatron FSDP's
 * optim_grads_params), gradients reduced in bf16 every microbatch; PP and EP refused as
 * Megatron-LM refuses them. */
static void test_torch_fsdp2(void) {
    const char *base = SCHED_SMALL "--world-size 4 --global-batch-size 8 ";
    char flags[512];
    ep_sched a, b;
    snprintf(flags, sizeof flags, "%s--use-torch-fsdp2", base);
    if (sched_build_flags(&a, flags) != 0) return;
    snprintf(flags, sizeof flags,
             "%s--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params", base);
    if (sched_build_flags(&b, flags) != 0) return;
    int nl = a.plan.num_layers, nmb = a.num_microbatches;
    CU_ASSERT(nmb == 2);
    CU_ASSERT_EQUAL(sched_count(&a, 0, "fsdp.ag_dense"), 2 * nl * nmb);
    CU_ASSERT_EQUAL(sched_count(&a, 0, "fsdp.rs_dense"), nl * nmb);
    CU_ASSERT_DOUBLE_EQUAL(sum_bytes(&a, "fsdp.ag_"), sum_bytes(&b, "fsdp.ag_"), 0);
    CU_ASSERT_DOUBLE_EQUAL(sum_bytes(&a, "fsdp.rs_") * 2, sum_bytes(&b, "fsdp.rs_"), 1e-6);
    /* 2 B weights + 2 B gradients + 12 B Adam, all over 4 ranks, against 18 B unsharded */
    CU_ASSERT_DOUBLE_EQUAL(a.ranks[0].model_state_bytes / b.ranks[0].model_state_bytes, 16.0 / 18,
                           1e-12);
    ep_sched_free(&a);
    ep_sched_free(&b);
    ep_config cfg;
    char err[EP_ERRLEN];
    snprintf(flags, sizeof flags, "%s--use-torch-fsdp2 --expert-model-parallel-size 2", base);
    CU_ASSERT_EQUAL(ep_test_config(&cfg, flags, err), -2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "--use-torch-fsdp2 needs"));
    snprintf(flags, sizeof flags, "%s--use-torch-fsdp2 --use-distributed-optimizer", base);
    CU_ASSERT_EQUAL(ep_test_config(&cfg, flags, err), -2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "drop --use-distributed-optimizer"));
}

/* --fp8-param-gather: the linear layers' weights are gathered in FP8 (1 B), the router, norms and
 * embeddings in bf16; gradients are reduced as before. */
static void test_fp8_param_gather(void) {
    const char *base = SCHED_SMALL "--world-size 4 --global-batch-size 8 "
                                   "--use-distributed-optimizer --fp8-format e4m3 ";
    char flags[512];
    ep_sched a, b;
    if (sched_build_flags(&a, base) != 0) return;
    snprintf(flags, sizeof flags, "%s--fp8-param-gather", base);
    if (sched_build_flags(&b, flags) != 0) return;
    CU_ASSERT_DOUBLE_EQUAL(sum_bytes(&b, "distopt.ag_expert"),
                           sum_bytes(&a, "distopt.ag_expert") / 2, 1e-6);
    double linear = 0; /* every layer is on rank 0 (PP 1, TP 1) */
    for (int l = 0; l < a.plan.num_layers; l++) {
        ep_layer_params p;
        ep_cost_layer_params(&a.cfg, &a.plan.layers[l], &p);
        linear += p.attn + p.dense_mlp + p.shared;
    }
    CU_ASSERT(linear > 0);
    CU_ASSERT_DOUBLE_EQUAL(sum_bytes(&a, "distopt.ag_dense") - sum_bytes(&b, "distopt.ag_dense"),
                           linear / 4, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(sum_bytes(&b, "distopt.rs_"), sum_bytes(&a, "distopt.rs_"), 0);
    ep_sched_free(&a);
    ep_sched_free(&b);
    ep_config cfg;
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(ep_test_config(&cfg,
                                   SCHED_SMALL "--world-size 4 --global-batch-size 8 "
                                               "--use-distributed-optimizer "
                                               "--fp8-param-gather",
                                   err),
                    -2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "needs --fp8-format"));
    CU_ASSERT_EQUAL(ep_test_config(&cfg,
                                   SCHED_SMALL "--world-size 4 --global-batch-size 8 "
                                               "--fp8-format e4m3 --fp8-param-gather",
                                   err),
                    -2);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "needs --use-distributed-optimizer"));
}

/* --- activation recomputation (docs/schedule.md, "Recomputation") ------------------------------
 */

/* Index of rank 0's first op of `layer` with the given phase, or of its last (last = 1); -1 if
 * none. */
static int layer_op(const ep_sched *s, int mb, int layer, ep_phase phase, int last) {
    int found = -1;
    for (int i = 0; i < s->ranks[0].nops; i++) {
        const ep_op *o = &s->ranks[0].ops[i];
        if (o->mb != mb || o->layer != layer || o->phase != phase) continue;
        if (!last) return i;
        found = i;
    }
    return found;
}

static int phase_count(const ep_sched *s, ep_phase phase) {
    int n = 0;
    for (int i = 0; i < s->ranks[0].nops; i++)
        n += s->ranks[0].ops[i].phase == phase;
    return n;
}

#define RC_MODEL SCHED_SMALL "--num-layers 4 --world-size 2 --expert-model-parallel-size 2 "

/* Full recomputation: every op of a checkpoint group's forward runs again, after the backward of
 * the layers above it and before the group's own backward; uniform groups of N rerun at their top
 * layer, block checkpoints the first N layers only. */
static void test_recompute_full(void) {
    ep_sched plain, u1, u2, blk;
    if (sched_build_flags(&plain, RC_MODEL "--global-batch-size 2") != 0) return;
    if (sched_build_flags(&u1, RC_MODEL "--global-batch-size 2 --recompute-granularity full "
                                        "--recompute-method uniform --recompute-num-layers 1") != 0)
        return;
    if (sched_build_flags(&u2, RC_MODEL "--global-batch-size 2 --recompute-granularity full "
                                        "--recompute-method uniform --recompute-num-layers 2") != 0)
        return;
    if (sched_build_flags(&blk, RC_MODEL "--global-batch-size 2 --recompute-granularity full "
                                         "--recompute-method block --recompute-num-layers 1") != 0)
        return;
    int L = 4, fwd = 0, fwd_first = 0; /* forward ops of the decoder layers (no MTP here) */
    for (int i = 0; i < plain.ranks[0].nops; i++) {
        const ep_op *o = &plain.ranks[0].ops[i];
        if (o->phase == EP_PHASE_FWD && o->layer >= 0) fwd++;
        if (o->phase == EP_PHASE_FWD && o->layer == 0) fwd_first++;
    }
    CU_ASSERT_EQUAL(phase_count(&plain, EP_PHASE_RECOMPUTE), 0);
    CU_ASSERT_EQUAL(phase_count(&u1, EP_PHASE_RECOMPUTE), fwd);
    CU_ASSERT_EQUAL(phase_count(&u2, EP_PHASE_RECOMPUTE), fwd);
    CU_ASSERT_EQUAL(phase_count(&blk, EP_PHASE_RECOMPUTE), fwd_first);
    CU_ASSERT_EQUAL(u1.ranks[0].nops, plain.ranks[0].nops + fwd);
    /* the recomputed dispatch and combine are collectives of the EP group like any other */
    CU_ASSERT_EQUAL(sched_count(&u1, 0, "dispatch.recompute"), sched_count(&u1, 0, "dispatch.fwd"));
    for (int mb = 0; mb < u1.num_microbatches; mb++)
        for (int l = 0; l < L; l++) {
            int r0 = layer_op(&u1, mb, l, EP_PHASE_RECOMPUTE, 0);
            int r1 = layer_op(&u1, mb, l, EP_PHASE_RECOMPUTE, 1);
            int b0 = layer_op(&u1, mb, l, EP_PHASE_BWD, 0);
            CU_ASSERT(r0 > layer_op(&u1, mb, l, EP_PHASE_FWD, 1) && r1 < b0);
            if (l + 1 < L) CU_ASSERT(r0 > layer_op(&u1, mb, l + 1, EP_PHASE_BWD, 1));
            /* groups {0,1} and {2,3}: layer 2k reruns with 2k+1, before 2k+1's backward */
            int top = l | 1;
            CU_ASSERT(layer_op(&u2, mb, l, EP_PHASE_RECOMPUTE, 1) <
                      layer_op(&u2, mb, top, EP_PHASE_BWD, 0));
            if (l != top) /* the group's forward in order, after the layers above it */
                CU_ASSERT(layer_op(&u2, mb, l, EP_PHASE_RECOMPUTE, 1) <
                              layer_op(&u2, mb, top, EP_PHASE_RECOMPUTE, 0) &&
                          (top + 1 >= L || layer_op(&u2, mb, l, EP_PHASE_RECOMPUTE, 0) >
                                               layer_op(&u2, mb, top + 1, EP_PHASE_BWD, 1)));
            CU_ASSERT_EQUAL(layer_op(&blk, mb, l, EP_PHASE_RECOMPUTE, 0) >= 0, l == 0);
        }
    ep_sched_free(&plain);
    ep_sched_free(&u1);
    ep_sched_free(&u2);
    ep_sched_free(&blk);
}

/* Selective recomputation: each named module's forward runs again right before its backward;
 * the moe module reruns the MoE part of the layer (router to combine) before the layer's
 * backward, with its all-to-alls and host syncs. */
static void test_recompute_selective(void) {
    ep_sched s, m;
    if (sched_build_flags(&s, RC_MODEL "--global-batch-size 2 --recompute-granularity selective "
                                       "--recompute-modules core_attn moe_act layernorm") != 0)
        return;
    const char *mods[] = {"core_attn", "expert_act", "attn_norm", "mlp_norm"};
    char name[96];
    for (int mb = 0; mb < s.num_microbatches; mb++)
        for (int l = 0; l < 4; l++)
            for (int k = 0; k < 4; k++) {
                snprintf(name, sizeof name, "mb%d.c0.L%d.%s.recompute", mb, l, mods[k]);
                int r = sched_find(&s, 0, name);
                snprintf(name, sizeof name, "mb%d.c0.L%d.%s.bwd", mb, l, mods[k]);
                int b = sched_find(&s, 0, name);
                CU_ASSERT(r >= 0 && b == r + 1);
            }
    CU_ASSERT_EQUAL(sched_count(&s, 0, ".recompute"), 4 * 4 * s.num_microbatches);
    ep_sched_free(&s);
    if (sched_build_flags(&m, RC_MODEL "--global-batch-size 2 --recompute-granularity selective "
                                       "--recompute-modules moe") != 0)
        return;
    int layers = 4 * m.num_microbatches;
    CU_ASSERT_EQUAL(sched_count(&m, 0, "dispatch.recompute"), layers);
    CU_ASSERT_EQUAL(sched_count(&m, 0, "count_sync.recompute"), layers);
    CU_ASSERT_EQUAL(sched_count(&m, 0, "router.recompute"), layers);
    CU_ASSERT_EQUAL(sched_count(&m, 0, "core_attn.recompute"), 0);
    CU_ASSERT_EQUAL(sched_count(&m, 0, "mlp_norm.recompute"), 0);
    int r = sched_find(&m, 0, "mb0.c0.L3.combine.recompute");
    CU_ASSERT(r >= 0 && r < sched_find(&m, 0, "mb0.c0.L3.combine.bwd"));
    ep_sched_free(&m);
}

static void test_ddp_buckets(void) {
    ep_sched s;
    /* world 4, EP 2: dense DP {0,1,2,3}, expert DP {0,2} */
    if (sched_build_flags(&s, SCHED_SMALL "--expert-model-parallel-size 2 --world-size 4 "
                                          "--global-batch-size 8 --overlap-grad-reduce") != 0)
        return;
    /* one bucket per layer plus the embedding's: all-reduces over DP and EDP */
    CU_ASSERT_EQUAL(sched_count(&s, 0, "ddp.ar_dense"), s.plan.num_layers + 1);
    CU_ASSERT_EQUAL(sched_count(&s, 0, "ddp.ar_expert"), s.plan.num_layers);
    /* overlapped: the top layer's bucket is launched before the last backward finishes */
    int top = -1, emb = sched_find(&s, 0, "mb1.c0.embedding.bwd");
    for (int i = 0; i < s.ranks[0].nops && top < 0; i++)
        if (s.ranks[0].ops[i].stream == EP_STREAM_DP) top = i;
    CU_ASSERT(top >= 0 && emb >= 0 && top < emb);
    ep_sched_free(&s);
    if (sched_build_flags(&s, SCHED_SMALL "--expert-model-parallel-size 2 --world-size 4 "
                                          "--global-batch-size 8 --use-distributed-optimizer") != 0)
        return;
    int opt = sched_find(&s, 0, "optimizer.step");
    int rs = sched_find(&s, 0, "B0.distopt.rs_dense"),
        ag = sched_find(&s, 0, "B0.distopt.ag_dense");
    CU_ASSERT(rs >= 0 && opt > rs && ag > opt); /* reduce, step, gather */
    ep_sched_free(&s);
}

/* --- routing threads (docs/schedule.md, "Threads") ---------------------------------------------
 */

/* The schedule as text: every op (CSV) and every traffic instance, field by field. */
static char *sched_dump(const ep_sched *s, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    ep_sched_print_csv(s, f, -1);
    fprintf(f, "groups %d traffic %d\n", s->ngroups, s->ntraffic);
    for (int i = 0; i < s->ntraffic; i++) {
        const ep_traffic *t = &s->traffic[i];
        fprintf(f, "t%d g%d mb%d/%d l%d n%d nn%d thd%d/%lld\n", i, t->group, t->microbatch,
                t->route_mb, t->layer, t->n, t->nnodes, t->thd_padded_tokens,
                (long long)t->thd_pad_tokens);
        for (int a = 0; a < t->n; a++) {
            fprintf(f, " %d:%d:%d:%lld:%lld:%lld:%lld", t->tokens[a], t->node_of[a], a,
                    (long long)t->recv_rows[a], (long long)t->pad_rows[a],
                    (long long)t->expert_rows[a], (long long)t->send_rows[a]);
            for (int b = 0; b < t->n; b++)
                fprintf(f, ",%lld", (long long)t->bytes[(size_t)a * t->n + b]);
            for (int b = 0; t->node_bytes && b < t->nnodes; b++)
                fprintf(f, ";%lld", (long long)t->node_bytes[(size_t)a * t->nnodes + b]);
        }
        fputc('\n', f);
    }
    fclose(f);
    return buf;
}

/* Built with 1, 2 and 5 routing threads: the same ops, communicators and traffic, byte for byte. */
/* Whether rank r's op i has to wait for op j: through its dependencies or its stream's order. */
static int waits_for(const ep_sched *s, int r, int i, int j, char *seen) {
    if (i == j) return 1;
    if (i < j || seen[i]) return 0;
    seen[i] = 1;
    const ep_rank_sched *rs = &s->ranks[r];
    const ep_op *op = &rs->ops[i];
    for (int d = 0; d < op->ndeps; d++)
        if (waits_for(s, r, rs->deps[op->deps_off + d], j, seen)) return 1;
    for (int k = i - 1; k >= 0; k--)
        if (rs->ops[k].stream == op->stream) return waits_for(s, r, k, j, seen);
    return 0;
}

static int op_waits(const ep_sched *s, const char *a, const char *b) {
    int i = sched_find(s, 0, a), j = sched_find(s, 0, b);
    CU_ASSERT_FATAL(i >= 0 && j >= 0);
    char *seen = calloc((size_t)s->ranks[0].nops, 1);
    CU_ASSERT_FATAL(seen != NULL);
    int w = waits_for(s, 0, i, j, seen);
    free(seen);
    return w;
}

/* Rank 0's parameter all-gathers after its optimizer step, and whether its forward `fwd` of the
 * first microbatch waits for any of them. */
static void param_gathers(const ep_sched *s, const char *fwd, int *after_step, int *fwd_waits) {
    int opt = sched_find(s, 0, "optimizer.step"), f = sched_find(s, 0, fwd);
    CU_ASSERT_FATAL(opt >= 0 && f >= 0);
    char *seen = calloc((size_t)s->ranks[0].nops, 1);
    CU_ASSERT_FATAL(seen != NULL);
    char name[160];
    *after_step = *fwd_waits = 0;
    for (int i = 0; i < s->ranks[0].nops; i++) {
        ep_op_name(&s->ranks[0].ops[i], name, sizeof name);
        if (!strstr(name, "distopt.ag_")) continue;
        *after_step += i > opt;
        memset(seen, 0, (size_t)s->ranks[0].nops);
        *fwd_waits |= waits_for(s, 0, f, i, seen);
    }
    free(seen);
}

/* --overlap-param-gather-with-optimizer-step: the first model chunk's gathers (the embedding's
 * bucket and layer 0's) follow the optimizer step, so its first forward waits for none; the second
 * chunk's stay at the start of the iteration; the same gathers either way. */
static void test_param_gather_with_optimizer_step(void) {
    const char *base = SCHED_SMALL "--num-layers 4 --pipeline-model-parallel-size 2 "
                                   "--num-virtual-stages-per-pipeline-rank 2 --world-size 4 "
                                   "--global-batch-size 8 --use-distributed-optimizer "
                                   "--overlap-grad-reduce --overlap-param-gather ";
    char flags[512];
    snprintf(flags, sizeof flags, "%s--overlap-param-gather-with-optimizer-step", base);
    ep_sched a, b;
    if (sched_build_flags(&a, base) != 0) return;
    if (sched_build_flags(&b, flags) != 0) {
        ep_sched_free(&a);
        return;
    }
    CU_ASSERT_EQUAL(sched_count(&a, 0, "distopt.ag_"), sched_count(&b, 0, "distopt.ag_"));
    int after, waits;
    param_gathers(&a, "mb0.c0.L0.attn_norm.fwd", &after, &waits);
    CU_ASSERT_EQUAL(after, 0);
    CU_ASSERT(waits);
    param_gathers(&b, "mb0.c0.L0.attn_norm.fwd", &after, &waits);
    CU_ASSERT_EQUAL(after, 3); /* the embedding's dense bucket, layer 0's dense and expert */
    CU_ASSERT(!waits);
    param_gathers(&b, "mb0.c1.L2.attn_norm.fwd", &after, &waits);
    CU_ASSERT(waits);
    ep_sched_free(&a);
    ep_sched_free(&b);
}

/* --moe-shared-expert-overlap: fc1 beside the dispatch all-to-all, fc2 beside the combine, in both
 * passes, and the next node waits for both; the same ops as without it. */
static void test_shared_expert_overlap(void) {
#define SHARED EP2 "--moe-shared-expert-intermediate-size 256 "
    ep_sched s, plain;
    if (sched_build_flags(&plain, SHARED) != 0) return;
    if (sched_build_flags(&s, SHARED "--moe-shared-expert-overlap") != 0) return;
    CU_ASSERT_EQUAL(s.ranks[0].nops, plain.ranks[0].nops);
    CU_ASSERT(op_waits(&plain, "mb0.c0.L0.dispatch.fwd", "mb0.c0.L0.shared_fc2.fwd"));
    CU_ASSERT(op_waits(&plain, "mb0.c0.L1.shared_fc2.bwd", "mb0.c0.L1.combine.bwd"));

    CU_ASSERT(!op_waits(&s, "mb0.c0.L0.shared_fc1.fwd", "mb0.c0.L0.dispatch.fwd"));
    CU_ASSERT(!op_waits(&s, "mb0.c0.L0.dispatch.fwd", "mb0.c0.L0.shared_act.fwd"));
    CU_ASSERT(op_waits(&s, "mb0.c0.L0.shared_fc1.fwd", "mb0.c0.L0.router.fwd"));
    CU_ASSERT(op_waits(&s, "mb0.c0.L0.sort_chunks.fwd", "mb0.c0.L0.dispatch.fwd"));
    CU_ASSERT(!op_waits(&s, "mb0.c0.L0.shared_fc2.fwd", "mb0.c0.L0.combine.fwd"));
    CU_ASSERT(op_waits(&s, "mb0.c0.L0.shared_fc2.fwd", "mb0.c0.L0.expert_fc2.fwd"));
    CU_ASSERT(op_waits(&s, "mb0.c0.L1.attn_norm.fwd", "mb0.c0.L0.combine.fwd"));
    CU_ASSERT(op_waits(&s, "mb0.c0.L1.attn_norm.fwd", "mb0.c0.L0.shared_fc2.fwd"));

    CU_ASSERT(!op_waits(&s, "mb0.c0.L1.shared_fc2.bwd", "mb0.c0.L1.combine.bwd"));
    CU_ASSERT(!op_waits(&s, "mb0.c0.L1.shared_fc1.bwd", "mb0.c0.L1.dispatch.bwd"));
    CU_ASSERT(op_waits(&s, "mb0.c0.L1.permute.bwd", "mb0.c0.L1.shared_fc1.bwd_dw"));
    CU_ASSERT(op_waits(&s, "mb0.c0.L1.permute.bwd", "mb0.c0.L1.dispatch.bwd"));
    int i = sched_find(&s, 0, "mb0.c0.L0.shared_fc1.fwd");
    CU_ASSERT_FATAL(i >= 0);
    CU_ASSERT_EQUAL(s.ranks[0].ops[i].stream, EP_STREAM_COMP);
    CU_ASSERT(i > sched_find(&s, 0, "mb0.c0.L0.dispatch.fwd")); /* issued after the transfer */
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), 0);
    ep_sched_free(&s);
    ep_sched_free(&plain);

    /* with TP the shared MLP gathers its input and scatters its output over the TP group */
    if (sched_build_flags(&s, SCHED_SMALL "--moe-shared-expert-intermediate-size 256 "
                                          "--tensor-model-parallel-size 2 --world-size 2 "
                                          "--global-batch-size 2 --moe-shared-expert-overlap") != 0)
        return;
    CU_ASSERT(op_waits(&s, "mb0.c0.L0.shared_fc1.fwd", "mb0.c0.L0.shared_ag.fwd"));
    CU_ASSERT(op_waits(&s, "mb0.c0.L0.shared_rs.fwd", "mb0.c0.L0.shared_fc2.fwd"));
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), 0);
    ep_sched_free(&s);
#undef SHARED
}

/* Megatron waits on its pipeline send handles before the step ends: each rank's optimizer step
 * depends on the rank's last op on the pp stream (a send or a receive of the last exchange). */
/* fc2's bias loop (TEGroupedMLP._apply_bias): one expert_bias op per MoE layer and microbatch,
 * forward and backward, only with biases and grouped-GEMM experts; bytes: fc2's output rows read
 * and written once. --quick-geglu is a gated MLP like --swiglu. */
/* --window-size 2,0 with --window-attn-skip-freq 2 on 4 layers: layers 1 and 3 (from 1: L0, L2)
 * have the window and cost its keys, the others the causal seq / 2; every layer windowed without
 * the skip frequency; a list picks the layers. */
static void test_window_attention(void) {
    const double seq = 128, heads = 4, dim = 64, tokens = 128;
    const double full = 2.0 * tokens * (seq / 2) * heads * 2 * dim;
    const double win = 2.0 * tokens * ((1.0 + 2 + 3 * 126) / 128) * heads * 2 * dim;
    const struct {
        const char *flags;
        int swa[4];
    } cases[] = {
        {SCHED_SMALL "--num-layers 4 --window-size 2,0 --window-attn-skip-freq 2", {1, 0, 1, 0}},
        {SCHED_SMALL "--num-layers 4 --window-size '(2,0)'", {1, 1, 1, 1}},
        {SCHED_SMALL "--num-layers 4 --window-size 2,0 --window-attn-skip-freq [0,0,1,1]",
         {0, 0, 1, 1}},
        {SCHED_SMALL "--num-layers 4 --window-size -1,0", {0, 0, 0, 0}},
        {SCHED_SMALL "--num-layers 4", {0, 0, 0, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ep_sched s;
        if (sched_build_flags(&s, cases[i].flags)) continue;
        for (int l = 0; l < 4; l++) {
            char name[64];
            snprintf(name, sizeof name, "mb0.c0.L%d.core_attn.fwd", l);
            int a = sched_find(&s, 0, name);
            CU_ASSERT_FATAL(a >= 0);
            double want = cases[i].swa[l] ? win : full;
            CU_ASSERT(fabs(s.ranks[0].ops[a].flops - want) < 1e-6 * want);
        }
        ep_sched_free(&s);
    }
}

static void test_expert_bias(void) {
    const struct {
        const char *flags;
        int ops; /* per rank: 2 layers x 2 microbatches x (fwd + bwd) */
    } cases[] = {
        {EP2 "--moe-grouped-gemm", 8},
        {EP2 "--moe-grouped-gemm --disable-bias-linear", 0},
        {EP2, 0}, /* SequentialMLP: each expert's linear adds its own bias */
        {EP2 "--moe-grouped-gemm --quick-geglu --activation-func-clamp-value 7", 8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ep_sched s;
        if (sched_build_flags(&s, cases[i].flags)) continue;
        CU_ASSERT_EQUAL(sched_count(&s, 0, ".expert_bias."), cases[i].ops);
        int b = sched_find(&s, 0, "mb0.c0.L0.expert_bias.fwd"),
            f = sched_find(&s, 0, "mb0.c0.L0.expert_fc2.fwd");
        if (cases[i].ops) {
            CU_ASSERT_FATAL(b >= 0 && f >= 0);
            const ep_op *fc2 = &s.ranks[0].ops[f];
            CU_ASSERT(fabs(s.ranks[0].ops[b].bytes - 2.0 * fc2->m * 256 * 2.0) < 1e-6);
            CU_ASSERT_EQUAL(fc2->k, 256); /* F: gated or not, fc2 reads F */
        }
        ep_sched_free(&s);
    }
    ep_config cfg;
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(ep_test_config(&cfg, EP2 "--no-swiglu --quick-geglu", err), 0);
    CU_ASSERT_EQUAL(cfg.swiglu, 1);
    CU_ASSERT_NOT_EQUAL(ep_test_config(&cfg, EP2 "--activation-func-clamp-value -1", err), 0);
    CU_ASSERT(strstr(err, "activation-func-clamp-value") != NULL);
}

static void test_optimizer_waits_for_last_exchange(void) {
    const char *variants[] = {"", "--num-virtual-stages-per-pipeline-rank 2 "};
    for (int v = 0; v < 2; v++) {
        char flags[512];
        snprintf(flags, sizeof flags,
                 SCHED_SMALL "--num-layers 4 --global-batch-size 8 --world-size 2 "
                             "--pipeline-model-parallel-size 2 %s",
                 variants[v]);
        ep_sched s;
        if (sched_build_flags(&s, flags) != 0) return;
        for (int r = 0; r < 2; r++) {
            const ep_rank_sched *rs = &s.ranks[r];
            int last_pp = -1, opt = -1;
            for (int i = 0; i < rs->nops; i++) {
                if (rs->ops[i].stream == EP_STREAM_PP) last_pp = i;
                if (rs->ops[i].kind == EP_OP_OPTIMIZER) opt = i;
            }
            CU_ASSERT_FATAL(last_pp >= 0 && opt > last_pp);
            const ep_op *o = &rs->ops[opt];
            int waits = 0;
            for (int d = 0; d < o->ndeps; d++)
                waits |= rs->deps[o->deps_off + d] == last_pp;
            CU_ASSERT(waits);
        }
        ep_sched_free(&s);
    }
}

static void test_threads_same_schedule(void) {
    static const char *const flags[] = {
        SCHED_SMALL "--expert-model-parallel-size 4 --world-size 8 --global-batch-size 8 "
                    "--routing group-limited --moe-router-num-groups 4 --moe-router-group-topk 2 "
                    "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                    "--num-layers 4 --mtp-num-layers 1",
        SCHED_SMALL "--expert-model-parallel-size 2 --world-size 8 --global-batch-size 8 "
                    "--tensor-model-parallel-size 2 --gpus-per-node 2 " HYBRIDEP THD,
        SCHED_SMALL "--expert-model-parallel-size 4 --world-size 8 --global-batch-size 16 "
                    "--routing zipf --routing-zipf-s 1.3 --gpus-per-node 2 " DEEPEP
                    "--overlap-moe-expert-parallel-comm --delay-wgrad-compute",
        SCHED_SMALL "--num-layers 5 --hybrid-override-pattern M[*E]|*E[ME] "
                    "--pipeline-model-parallel-size 2 --expert-model-parallel-size 2 "
                    "--world-size 8 --global-batch-size 8",
    };
    const char *saved = getenv("EP_SCHED_THREADS");
    char *keep = saved ? strdup(saved) : NULL;
    for (size_t c = 0; c < sizeof flags / sizeof flags[0]; c++) {
        char *ref = NULL;
        size_t ref_len = 0;
        static const char *const counts[] = {"1", "2", "5"};
        for (int k = 0; k < 3; k++) {
            setenv("EP_SCHED_THREADS", counts[k], 1);
            ep_sched s;
            if (sched_build_flags(&s, flags[c]) != 0) break;
            CU_ASSERT_TRUE(s.ntraffic > 0);
            size_t len = 0;
            char *dump = sched_dump(&s, &len);
            CU_ASSERT_PTR_NOT_NULL_FATAL(dump);
            if (!ref) {
                ref = dump;
                ref_len = len;
            } else {
                CU_ASSERT_EQUAL(len, ref_len);
                CU_ASSERT_TRUE(len == ref_len && memcmp(dump, ref, len) == 0);
                free(dump);
            }
            ep_sched_free(&s);
        }
        free(ref);
    }
    if (keep)
        setenv("EP_SCHED_THREADS", keep, 1);
    else
        unsetenv("EP_SCHED_THREADS");
    free(keep);
}

/* Expert TP: Megatron's experts split each FFN over ETP ranks, and every one of them takes all the
 * rows its EP index was sent by the ETP group's members. So the expert GEMM flops summed over the
 * ranks equal those of ETP 1 whatever the routing (before, each rank took only its own EP group's
 * rows: 1/ETP of the work). The alltoall and flex dispatchers gather the rows over the ETP group
 * after the transfer and reduce-scatter the outputs before the combine; the allgather dispatcher
 * gathers over TP x EP itself. */
#define ETP_BASE                                                                                   \
    SCHED_SMALL "--world-size 8 --tensor-model-parallel-size 2 --sequence-parallel "               \
                "--expert-model-parallel-size 4 --global-batch-size 8 --routing-zipf-s 1.2 "

static double expert_fc1_flops(const ep_sched *s) {
    double f = 0;
    for (int r = 0; r < s->world; r++)
        for (int i = 0; i < s->ranks[r].nops; i++) {
            const ep_op *op = &s->ranks[r].ops[i];
            if (op->phase == EP_PHASE_FWD && !strcmp(op->label, "expert_fc1")) f += op->flops;
        }
    return f;
}

static void test_expert_tp(void) {
    static const struct {
        const char *dispatcher;
        int etp_ops; /* etp_ag / etp_rs per MoE layer and microbatch */
    } cases[] = {{"--moe-token-dispatcher-type alltoall ", 1},
                 {DEEPEP, 1},
                 {HYBRIDEP, 1},
                 {"--moe-token-dispatcher-type allgather ", 0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char one[1024], two[1024];
        snprintf(one, sizeof one, ETP_BASE "%s--expert-tensor-parallel-size 1",
                 cases[k].dispatcher);
        snprintf(two, sizeof two, ETP_BASE "%s--expert-tensor-parallel-size 2",
                 cases[k].dispatcher);
        ep_sched a, b;
        if (sched_build_flags(&a, one) != 0) return;
        if (sched_build_flags(&b, two) != 0) {
            ep_sched_free(&a);
            return;
        }
        double fa = expert_fc1_flops(&a), fb = expert_fc1_flops(&b);
        CU_ASSERT(fa > 0);
        CU_ASSERT_DOUBLE_EQUAL(fb / fa, 1.0, 1e-9);
        int moe = sched_moe_layers(&b), nmb = b.num_microbatches;
        for (int r = 0; r < b.world; r++) {
            CU_ASSERT_EQUAL(sched_count(&a, r, "etp_"), 0);
            CU_ASSERT_EQUAL(sched_count(&b, r, "etp_ag.fwd"), cases[k].etp_ops * moe * nmb);
            CU_ASSERT_EQUAL(sched_count(&b, r, "etp_rs.fwd"), cases[k].etp_ops * moe * nmb);
        }
        int i =
            sched_find(&b, 3, cases[k].etp_ops ? "mb0.c0.L0.etp_ag.fwd" : "mb0.c0.L0.dispatch.fwd");
        CU_ASSERT_FATAL(i >= 0);
        const ep_group *g = &b.groups[b.ranks[3].ops[i].group];
        /* rank 3: expert rank etp 1 of EP index 1; ETP peers {2, 3}, TP x EP the whole stage */
        CU_ASSERT_EQUAL(g->kind, cases[k].etp_ops ? EP_GROUP_ETP : EP_GROUP_TPEP);
        CU_ASSERT_EQUAL(g->size, cases[k].etp_ops ? 2 : 8);
        if (cases[k].etp_ops) CU_ASSERT(g->ranks[0] == 2 && g->ranks[1] == 3);
        char err[EP_ERRLEN];
        CU_ASSERT_EQUAL(ep_sched_check(&b, err), 0);
        ep_sched_free(&a);
        ep_sched_free(&b);
    }
}

void ep_suite_sched_variants(void) {
    CU_pSuite s = CU_add_suite("sched_variants", NULL, NULL);
    CU_add_test(s, "host syncs per dispatcher, padding mode and THD", test_host_syncs);
    CU_add_test(s, "expert TP: each rank takes its ETP group's rows", test_expert_tp);
    CU_add_test(s, "THD with hybridep pads to the group max rounded to 64",
                test_thd_hybridep_padding);
    CU_add_test(s, "fused permute removes permute/unpermute, adds SMs", test_fused_permute);
    CU_add_test(s, "deepep SMs, traffic and expert rows", test_deepep_sms_and_traffic);
    CU_add_test(s, "--moe-flex-transport nccl: no SMs of their own", test_flex_transport_nccl);
    CU_add_test(s, "routing budget: EP groups share draws below one microbatch",
                test_routing_budget_groups);
    CU_add_test(s, "device padding pads the expert GEMM rows", test_padding_rows);
    CU_add_test(s, "HSDP inner/outer groups (16 GPUs, EP 4, N 2)", test_hsdp_groups);
    CU_add_test(s, "DDP buckets and distributed optimizer order", test_ddp_buckets);
    CU_add_test(s, "--overlap-param-gather-with-optimizer-step: chunk 0 gathered after the step",
                test_param_gather_with_optimizer_step);
    CU_add_test(s, "model state per GPU: weights, gradients, Adam, sharding", test_model_state);
    CU_add_test(s, "optimizer and gradient dtypes: collective and step bytes",
                test_optimizer_dtypes);
    CU_add_test(s, "FSDP: the optimizer step covers the rank's Adam shard",
                test_fsdp_optimizer_shard);
    CU_add_test(s, "optimizer: the parameter tensors its host loops walk", test_optimizer_tensors);
    CU_add_test(s, "alltoall: a row per (token, expert) pair; per rank on request",
                test_alltoall_rows);
    CU_add_test(s, "--use-torch-fsdp2: per-layer units, bf16 reduce-scatters", test_torch_fsdp2);
    CU_add_test(s, "--fp8-param-gather: FP8 weights gathered", test_fp8_param_gather);
    CU_add_test(s, "full recomputation: uniform groups and block", test_recompute_full);
    CU_add_test(s, "selective recomputation: modules before their backward",
                test_recompute_selective);
    CU_add_test(s, "same schedule for 1, 2 and 5 routing threads", test_threads_same_schedule);
    CU_add_test(s, "--routing-layer-draws 1: one draw for every MoE layer", test_routing_layer_draws);
    CU_add_test(s, "expert_bias: fc2's bias loop with biases and grouped GEMMs", test_expert_bias);
    CU_add_test(s, "--window-size: windowed layers cost their window's keys",
                test_window_attention);
    CU_add_test(s, "PP: the optimizer step waits for the last exchange",
                test_optimizer_waits_for_last_exchange);
    CU_add_test(s, "--moe-shared-expert-overlap: shared experts beside dispatch and combine",
                test_shared_expert_overlap);
}
