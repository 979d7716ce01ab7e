/* test_gpu_run_metrics: the summary figures of `epref run` (ref/exec_metrics.c) on hand-made
 * intervals, exact expected values. Runs on any machine (no GPU): it checks the exposure rule
 * that a transfer starts when its last member started it (docs/epref-run.md, "Metrics"). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "exec_metrics.h"

static int failures;
static void near(double got, double want, const char *what) {
    if (fabs(got - want) > 1e-12) {
        fprintf(stderr, "FAIL %s: got %.12g, want %.12g\n", what, got, want);
        failures++;
    }
}

int main(void) {
    /* two ranks: a compute op on comp, then a dispatch on comm (EP group 0, seq 0) */
    ep_op ops[2][2];
    memset(ops, 0, sizeof ops);
    for (int r = 0; r < 2; r++) {
        ops[r][0].kind = EP_OP_GEMM;
        ops[r][0].stream = EP_STREAM_COMP;
        ops[r][0].group = -1;
        ops[r][0].traffic = -1;
        ops[r][1].kind = EP_OP_A2A_DISPATCH;
        ops[r][1].stream = EP_STREAM_COMM;
        ops[r][1].node = EP_NODE_DISPATCH;
        ops[r][1].group = 0;
        ops[r][1].seq = 0;
        ops[r][1].traffic = -1;
        ops[r][1].bytes = 100;
    }
    int members[2] = {0, 1};
    ep_group grp = {EP_GROUP_EP, 2, members};
    ep_rank_sched rs[2];
    memset(rs, 0, sizeof rs);
    for (int r = 0; r < 2; r++) {
        rs[r].nops = rs[r].cap = 2;
        rs[r].ops = ops[r];
    }
    ep_sched s;
    memset(&s, 0, sizeof s);
    s.world = 2;
    /* no model, and a layout of one in every parallel dimension (sizes as validation leaves
     * them: readers no longer default a 0) */
    s.cfg.tensor_model_parallel_size = s.cfg.context_parallel_size = 1;
    s.cfg.pipeline_model_parallel_size = s.cfg.virtual_pipeline_model_parallel_size = 1;
    s.cfg.data_parallel_size = s.cfg.expert_model_parallel_size = 1;
    s.cfg.expert_tensor_parallel_size = s.cfg.num_distributed_optimizer_instances = 1;
    s.ranks = rs;
    s.ngroups = 1;
    s.groups = &grp;
    s.tokens_per_iteration = 4000;
    s.model_flops_per_token = 1e9;
    /* rank 0: compute [0,1], dispatch started at 0.5 (waits for rank 1 until 1.2), ends at 2;
     * rank 1: compute [0,1.5], dispatch started at 1.2, ends at 2 */
    exec_span t0[2] = {{0, 1}, {0.5, 2}}, t1[2] = {{0, 1.5}, {1.2, 2}};
    exec_span *t[2] = {t0, t1};
    exec_metrics m;
    if (exec_metrics_compute(&s, t, 1e12, &m)) {
        fprintf(stderr, "FAIL: exec_metrics_compute returned an error\n");
        return 1;
    }
    near(m.iteration_time_s, 2, "iteration time");
    near(m.tokens_per_s, 2000, "tokens/s");
    near(m.tokens_per_s_per_gpu, 1000, "tokens/s/GPU");
    near(m.tflops_per_gpu, 1, "TFLOPS/GPU");
    near(m.mfu, 1, "MFU");
    /* rank 0: transfer [1.2,2] exposed 0.8, idle [1,1.2] 0.2; rank 1: exposed [1.5,2] 0.5 */
    near(m.exposed_s[EP_COMM_DISPATCH], (0.8 + 0.5) / 2, "exposed dispatch");
    near(m.exposed_s[EP_COMM_COMBINE], 0, "exposed combine");
    near(m.exposed_total_s, (0.8 + 0.5) / 2, "exposed total");
    near(m.idle_s, 0.2 / 2, "idle");
    near(m.peer_wait_s, 0.2 / 2, "waiting for peers"); /* rank 0's idle waits for rank 1 */
    near(m.pipeline_wait_s, 0, "pipeline waits");
    near(m.host_wait_s, 0, "waiting for launches"); /* epref has no launch times */
    near(m.compute_busy_s, (1 + 1.5) / 2, "compute busy");
    near(m.a2a_bytes, 200, "a2a bytes");
    if (m.nops != 4 || m.host_syncs != 0) {
        fprintf(stderr, "FAIL: nops %ld host_syncs %ld\n", m.nops, m.host_syncs);
        failures++;
    }
    printf("test_gpu_run_metrics: %s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
