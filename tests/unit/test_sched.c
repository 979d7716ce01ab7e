/* Schedule IR invariants over many configurations: deps name earlier ops, collectives have one op
 * per member with matching sizes, names are unique, every schedule runs to the end
 * (ep_sched_check), builds are deterministic; and the checker itself catches broken schedules. */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

#include "sched_test_util.h"

static const char *const k_configs[] = {
    /* dispatchers, overlap, delayed wgrad */
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6",
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6 "
                "--overlap-moe-expert-parallel-comm",
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6 "
                "--overlap-moe-expert-parallel-comm --delay-wgrad-compute",
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6 "
                "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep "
                "--overlap-moe-expert-parallel-comm",
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6 "
                "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep "
                "--moe-hybridep-fuse-permute --overlap-moe-expert-parallel-comm "
                "--delay-wgrad-compute",
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6 "
                "--moe-token-dispatcher-type allgather",
    /* pipelines: 1F1B, interleaved, interleaved with overlap, odd PP */
    SCHED_SMALL "--num-layers 4 --expert-model-parallel-size 2 --world-size 4 "
                "--pipeline-model-parallel-size 2 --global-batch-size 8",
    SCHED_SMALL "--num-layers 4 --expert-model-parallel-size 2 --world-size 4 "
                "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                "--global-batch-size 8",
    SCHED_SMALL "--num-layers 4 --expert-model-parallel-size 2 --world-size 4 "
                "--pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
                "--global-batch-size 8 --overlap-moe-expert-parallel-comm --delay-wgrad-compute",
    SCHED_SMALL "--num-layers 8 --expert-model-parallel-size 2 --world-size 8 "
                "--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2 "
                "--global-batch-size 16 --overlap-moe-expert-parallel-comm",
    SCHED_SMALL "--num-layers 6 --world-size 3 --pipeline-model-parallel-size 3 "
                "--num-virtual-stages-per-pipeline-rank 2 --global-batch-size 6",
    SCHED_SMALL "--num-layers 3 --world-size 3 --pipeline-model-parallel-size 3 "
                "--global-batch-size 7",
    /* data parallel */
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 4 --global-batch-size 8 "
                "--overlap-grad-reduce",
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 4 --global-batch-size 8 "
                "--use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather",
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 4 --global-batch-size 8 "
                "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params",
    SCHED_SMALL "--expert-model-parallel-size 4 --world-size 16 --global-batch-size 16 "
                "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params "
                "--num-distributed-optimizer-instances 2",
    SCHED_SMALL "--expert-model-parallel-size 4 --world-size 16 --global-batch-size 16 "
                "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params "
                "--num-distributed-optimizer-instances 2 --outer-dp-sharding-strategy optim "
                "--overlap-moe-expert-parallel-comm",
    SCHED_SMALL "--expert-model-parallel-size 4 --world-size 16 --global-batch-size 16 "
                "--use-distributed-optimizer --num-distributed-optimizer-instances 2",
    /* THD, padding, TP, MTP, hybrid patterns */
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6 "
                "--sequence-packing --seqlen-dist uniform --seqlen-mean 40 "
                "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep",
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6 "
                "--sequence-packing --seqlen-dist lognormal --seqlen-mean 40 "
                "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep "
                "--overlap-moe-expert-parallel-comm",
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6 "
                "--moe-pad-mode host --moe-pad-multiple 16",
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6 "
                "--moe-pad-mode device --moe-pad-multiple 16 --moe-token-dispatcher-type flex "
                "--moe-flex-dispatcher-backend hybridep",
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 4 --global-batch-size 6 "
                "--tensor-model-parallel-size 2",
    SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6 "
                "--mtp-num-layers 1 --overlap-moe-expert-parallel-comm --delay-wgrad-compute",
    SCHED_SMALL "--num-layers 4 --hybrid-override-pattern M[*E]M[ME] --mamba-head-dim 64 "
                "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 6 "
                "--overlap-moe-expert-parallel-comm",
    SCHED_SMALL "--num-layers 4 --hybrid-override-pattern [*-]*-E --expert-model-parallel-size 2 "
                "--world-size 2 --global-batch-size 6 --overlap-moe-expert-parallel-comm",
    SCHED_SMALL "--num-layers 4 --hybrid-override-pattern [*E]|[M*E]|E|[*-] "
                "--mamba-head-dim 64 --expert-model-parallel-size 2 --world-size 8 "
                "--pipeline-model-parallel-size 4 --global-batch-size 8",
};

static void test_configs_check(void) {
    for (size_t i = 0; i < sizeof k_configs / sizeof *k_configs; i++) {
        ep_sched s;
        char err[EP_ERRLEN];
        if (sched_build_flags(&s, k_configs[i]) != 0) continue;
        int rc = ep_sched_check(&s, err);
        if (rc != 0) fprintf(stderr, "\n  flags: %s\n  check: %s\n", k_configs[i], err);
        CU_ASSERT_EQUAL(rc, 0);
        long long ops = 0;
        for (int r = 0; r < s.world; r++) {
            ops += s.ranks[r].nops;
            CU_ASSERT(sched_count(&s, r, "optimizer.step") == 1);
        }
        CU_ASSERT(ops > 0);
        CU_ASSERT(s.model_flops_per_token > 0);
        CU_ASSERT(s.tokens_per_iteration > 0);
        ep_sched_free(&s);
    }
}

/* Every collective: exactly one op per member and equal byte counts (checked here directly, not
 * only through ep_sched_check), for a layout with EP, DP, PP and HSDP groups at once. */
static void test_collectives_one_per_member(void) {
    ep_sched s;
    if (sched_build_flags(&s, SCHED_SMALL "--num-layers 4 --expert-model-parallel-size 2 "
                                          "--world-size 8 --pipeline-model-parallel-size 2 "
                                          "--global-batch-size 8 --use-distributed-optimizer "
                                          "--num-distributed-optimizer-instances 2 "
                                          "--overlap-grad-reduce") != 0)
        return;
    for (int g = 0; g < s.ngroups; g++) {
        const ep_group *grp = &s.groups[g];
        int max_seq = -1;
        for (int r = 0; r < s.world; r++)
            for (int i = 0; i < s.ranks[r].nops; i++)
                if (s.ranks[r].ops[i].group == g && s.ranks[r].ops[i].seq > max_seq)
                    max_seq = s.ranks[r].ops[i].seq;
        for (int q = 0; q <= max_seq; q++) {
            int count = 0;
            double bytes = -1;
            for (int m = 0; m < grp->size; m++) {
                const ep_rank_sched *rs = &s.ranks[grp->ranks[m]];
                int mine = 0;
                for (int i = 0; i < rs->nops; i++) {
                    const ep_op *op = &rs->ops[i];
                    if (op->group != g || op->seq != q) continue;
                    mine++;
                    if (op->kind != EP_OP_A2A_DISPATCH && op->kind != EP_OP_A2A_COMBINE) {
                        if (bytes < 0) bytes = op->bytes;
                        CU_ASSERT_DOUBLE_EQUAL(op->bytes, bytes, 1e-9);
                    }
                }
                CU_ASSERT_EQUAL(mine, 1);
                count += mine;
            }
            CU_ASSERT_EQUAL(count, grp->size);
        }
    }
    ep_sched_free(&s);
}

static int names_equal(const ep_sched *a, const ep_sched *b) {
    char na[160], nb[160];
    if (a->world != b->world || a->ngroups != b->ngroups || a->ntraffic != b->ntraffic) return 0;
    for (int r = 0; r < a->world; r++) {
        const ep_rank_sched *x = &a->ranks[r], *y = &b->ranks[r];
        if (x->nops != y->nops || x->ndeps != y->ndeps) return 0;
        if (memcmp(x->deps, y->deps, (size_t)x->ndeps * sizeof *x->deps) != 0) return 0;
        for (int i = 0; i < x->nops; i++) {
            ep_op_name(&x->ops[i], na, sizeof na);
            ep_op_name(&y->ops[i], nb, sizeof nb);
            if (strcmp(na, nb) != 0 || x->ops[i].bytes != y->ops[i].bytes ||
                x->ops[i].flops != y->ops[i].flops || x->ops[i].seq != y->ops[i].seq ||
                x->ops[i].stream != y->ops[i].stream)
                return 0;
        }
    }
    for (int t = 0; t < a->ntraffic; t++) {
        int n = a->traffic[t].n;
        if (n != b->traffic[t].n ||
            memcmp(a->traffic[t].bytes, b->traffic[t].bytes, (size_t)n * n * sizeof(int64_t)) != 0)
            return 0;
    }
    return 1;
}

static void test_deterministic(void) {
    const char *flags = SCHED_SMALL "--expert-model-parallel-size 4 --world-size 4 "
                                    "--global-batch-size 8 --routing zipf "
                                    "--overlap-moe-expert-parallel-comm --sequence-packing "
                                    "--seqlen-dist uniform --seqlen-mean 50";
    ep_sched a, b;
    if (sched_build_flags(&a, flags) != 0) return;
    if (sched_build_flags(&b, flags) != 0) {
        ep_sched_free(&a);
        return;
    }
    CU_ASSERT(names_equal(&a, &b));
    ep_sched_free(&a);
    ep_sched_free(&b);
    /* a different seed changes the traffic */
    char other[1024];
    snprintf(other, sizeof other, "%s --seed 7", flags);
    if (sched_build_flags(&a, flags) != 0) return;
    if (sched_build_flags(&b, other) != 0) {
        ep_sched_free(&a);
        return;
    }
    CU_ASSERT(!names_equal(&a, &b));
    ep_sched_free(&a);
    ep_sched_free(&b);
}

static void test_names(void) {
    ep_sched s;
    if (sched_build_flags(&s, SCHED_SMALL "--num-layers 4 --expert-model-parallel-size 2 "
                                          "--world-size 4 --pipeline-model-parallel-size 2 "
                                          "--num-virtual-stages-per-pipeline-rank 2 "
                                          "--global-batch-size 8 --use-megatron-fsdp "
                                          "--data-parallel-sharding-strategy "
                                          "optim_grads_params") != 0)
        return;
    /* stage 0 holds layers 0 (chunk 0) and 2 (chunk 1) */
    CU_ASSERT(sched_find(&s, 0, "mb3.c0.L0.dispatch.fwd") >= 0);
    CU_ASSERT(sched_find(&s, 0, "mb3.c1.L2.combine.bwd") >= 0);
    CU_ASSERT(sched_find(&s, 0, "mb2.c1.L2.expert_fc1.bwd_dw") >= 0);
    CU_ASSERT(sched_find(&s, 0, "mb2.c0.pp.send.fwd") >= 0);
    CU_ASSERT(sched_find(&s, 0, "mb2.c1.pp.recv.fwd") >= 0);
    CU_ASSERT(sched_find(&s, 0, "mb1.L2.fsdp.ag_dense.fwd") >= 0);
    CU_ASSERT(sched_find(&s, 0, "mb1.L2.fsdp.rs_expert.bwd") < 0); /* EDP has one member here */
    CU_ASSERT(sched_find(&s, 0, "mb1.L2.fsdp.rs_dense.bwd") >= 0);
    CU_ASSERT(sched_find(&s, 0, "optimizer.step") >= 0);
    CU_ASSERT(sched_find(&s, 3, "mb0.c1.loss.fwd") >= 0);
    CU_ASSERT(sched_find(&s, 0, "mb0.c0.embedding.fwd") >= 0);
    CU_ASSERT(sched_find(&s, 3, "mb0.c0.embedding.fwd") < 0);
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), 0);
    ep_sched_free(&s);
}

/* The checker is not a rubber stamp: broken schedules are rejected. */
static void test_check_rejects(void) {
    const char *flags =
        SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 --global-batch-size 4";
    ep_sched s;
    char err[EP_ERRLEN];
    if (sched_build_flags(&s, flags) != 0) return;
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), 0);
    int i = sched_find(&s, 1, "mb0.c0.L1.count_a2a.fwd");
    CU_ASSERT_FATAL(i >= 0);
    s.ranks[1].ops[i].bytes += 8; /* sizes of one collective disagree */
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "differ"));
    s.ranks[1].ops[i].bytes -= 8;
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), 0);
    /* the dispatch node's first op (the host read of the split sizes) waits for the node before */
    int j = sched_find(&s, 0, "mb0.c0.L0.count_sync.fwd");
    CU_ASSERT_FATAL(j >= 0 && s.ranks[0].ops[j].ndeps > 0);
    int saved = s.ranks[0].deps[s.ranks[0].ops[j].deps_off];
    s.ranks[0].deps[s.ranks[0].ops[j].deps_off] = j + 1; /* a dependency on a later op */
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not an earlier op"));
    s.ranks[0].deps[s.ranks[0].ops[j].deps_off] = saved;
    /* two collectives of one communicator issued in opposite orders on the two ranks */
    int a = sched_find(&s, 0, "mb0.c0.L0.dispatch.fwd"),
        b = sched_find(&s, 0, "mb0.c0.L0.combine.fwd");
    CU_ASSERT_FATAL(a >= 0 && b >= 0);
    int sa = s.ranks[0].ops[a].seq;
    s.ranks[0].ops[a].seq = s.ranks[0].ops[b].seq;
    s.ranks[0].ops[b].seq = sa;
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), -1);
    s.ranks[0].ops[b].seq = s.ranks[0].ops[a].seq;
    s.ranks[0].ops[a].seq = sa;
    /* a duplicated name */
    s.ranks[0].ops[b].label = s.ranks[0].ops[a].label;
    s.ranks[0].ops[b].kind = s.ranks[0].ops[a].kind;
    s.ranks[0].ops[b].traffic = s.ranks[0].ops[a].traffic;
    s.ranks[0].ops[b].transpose = s.ranks[0].ops[a].transpose;
    s.ranks[1].ops[b].kind = s.ranks[1].ops[a].kind; /* keep the collective consistent */
    s.ranks[1].ops[b].traffic = s.ranks[1].ops[a].traffic;
    s.ranks[1].ops[b].transpose = s.ranks[1].ops[a].transpose;
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "named"));
    ep_sched_free(&s);
}

/* A pipeline whose two stages issue their transfers in an order that waits on each other. */
static void test_check_finds_deadlock(void) {
    ep_sched s;
    char err[EP_ERRLEN];
    if (sched_build_flags(&s, SCHED_SMALL "--world-size 2 --pipeline-model-parallel-size 2 "
                                          "--global-batch-size 2") != 0)
        return;
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), 0);
    /* stage 1 receives activations and sends gradients; make its first forward wait for the
     * gradient send of microbatch 0, which needs that forward: a cycle across the two stages */
    int recv = sched_find(&s, 1, "mb0.c0.pp.recv.fwd"),
        send = sched_find(&s, 1, "mb0.c0.pp.send.bwd");
    CU_ASSERT_FATAL(recv >= 0 && send > recv);
    ep_op tmp = s.ranks[1].ops[recv];
    s.ranks[1].ops[recv].kind = EP_OP_SEND; /* swap the roles: rank 1 now sends first */
    s.ranks[1].ops[recv].group = s.ranks[1].ops[send].group;
    s.ranks[1].ops[recv].seq = s.ranks[1].ops[send].seq;
    s.ranks[1].ops[recv].phase = EP_PHASE_BWD;
    s.ranks[1].ops[send].kind = EP_OP_RECV;
    s.ranks[1].ops[send].group = tmp.group;
    s.ranks[1].ops[send].seq = tmp.seq;
    s.ranks[1].ops[send].phase = EP_PHASE_FWD;
    CU_ASSERT_EQUAL(ep_sched_check(&s, err), -1);
    ep_sched_free(&s);
}

static void test_print(void) {
    ep_sched s;
    if (sched_build_flags(&s, SCHED_SMALL "--expert-model-parallel-size 2 --world-size 2 "
                                          "--global-batch-size 2") != 0)
        return;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    ep_sched_print_csv(&s, f, 1);
    fclose(f);
    CU_ASSERT(strncmp(buf,
                      "rank,index,stream,name,kind,phase,node,mb,chunk,layer,flops,bytes,"
                      "group,seq,deps\n",
                      70) == 0);
    int rows = 0;
    for (char *p = buf; *p; p++)
        rows += *p == '\n';
    CU_ASSERT_EQUAL(rows, s.ranks[1].nops + 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\n1,"));
    CU_ASSERT_PTR_NULL(strstr(buf, "\n0,"));
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    ep_sched_print(&s, f, 0);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "stream comm"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "mb0.c0.L1.dispatch.fwd"));
    free(buf);
    ep_sched_free(&s);
}

void ep_suite_sched(void) {
    CU_pSuite s = CU_add_suite("sched", NULL, NULL);
    CU_add_test(s, "many configurations pass ep_sched_check", test_configs_check);
    CU_add_test(s, "one op per member per collective, equal sizes",
                test_collectives_one_per_member);
    CU_add_test(s, "two builds are equal; another seed differs", test_deterministic);
    CU_add_test(s, "op names", test_names);
    CU_add_test(s, "check rejects mismatched sizes, forward deps, order, duplicate names",
                test_check_rejects);
    CU_add_test(s, "check finds a pipeline deadlock", test_check_finds_deadlock);
    CU_add_test(s, "text and CSV output", test_print);
}
