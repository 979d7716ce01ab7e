/* sched_order: the order of forward and backward passes on one pipeline stage.
 *
 * Megatron-LM's schedules (pipeline_parallel/schedules.py), reduced to a list of steps:
 *  - no pipelining: forward then backward of each microbatch;
 *  - 1F1B: PP - stage - 1 warm-up forwards, then forward/backward pairs, then the cool-down;
 *  - interleaved (VPP): Megatron's schedule table (groups of PP microbatches per model chunk),
 *    warm-up (PP - stage - 1) * 2 + (VPP - 1) * PP virtual microbatches;
 *  - combined 1F1B (EP overlap, docs/schedule.md, section 5): one extra warm-up forward, then the
 *    forward of virtual microbatch k + warm-up and the backward of k run as one step.
 * A step with both a forward and a backward is one combined step under EP overlap; otherwise its
 * forward runs, then its backward, and the pipeline exchange follows both (interleaved 1F1B).
 */
#include <stdlib.h>

#include "sched_internal.h"

typedef struct {
    int mb, chunk;
} virtual_mb;

/* Megatron's get_schedule_table with microbatch_group_size_per_vp_stage = PP. */
static void schedule_table(int nmb, int vpp, int group, virtual_mb *t) {
    int k = 0;
    for (int first = 0; first < nmb; first += group) {
        int last = first + group >= nmb ? nmb : first + group;
        for (int c = 0; c < vpp; c++)
            for (int m = first; m < last; m++)
                t[k++] = (virtual_mb){m, c};
    }
}

static ep_step step_f(int mb, int chunk) {
    return (ep_step){mb, chunk, -1, -1};
}
static ep_step step_b(int mb, int chunk) {
    return (ep_step){-1, -1, mb, chunk};
}

int ep_sched_steps(const ep_config *cfg, int nmb, int stage, ep_step **steps) {
    int pp = cfg->pipeline_model_parallel_size, vpp = cfg->virtual_pipeline_model_parallel_size;
    int overlap = cfg->overlap_moe_expert_parallel_comm;
    int total = nmb * vpp;
    ep_step *s = malloc((size_t)(2 * total + 1) * sizeof *s);
    if (!s) return -1;
    int n = 0;
    if (pp == 1 && !overlap) {
        for (int m = 0; m < nmb; m++) {
            s[n++] = step_f(m, 0);
            s[n++] = step_b(m, 0);
        }
    } else if (vpp == 1 && !overlap) {
        int warmup = pp - stage - 1 < nmb ? pp - stage - 1 : nmb;
        for (int m = 0; m < warmup; m++)
            s[n++] = step_f(m, 0);
        for (int m = 0; m < nmb - warmup; m++) {
            s[n++] = step_f(m + warmup, 0);
            s[n++] = step_b(m, 0);
        }
        for (int m = nmb - warmup; m < nmb; m++)
            s[n++] = step_b(m, 0);
    } else {
        virtual_mb *t = malloc((size_t)total * sizeof *t);
        if (!t) {
            free(s);
            return -1;
        }
        schedule_table(nmb, vpp, pp, t);
        int warmup = (pp - stage - 1) * 2 + (vpp - 1) * pp + (overlap ? 1 : 0);
        if (warmup > total) warmup = total;
        for (int k = 0; k < warmup; k++)
            s[n++] = step_f(t[k].mb, t[k].chunk);
        for (int k = 0; k < total - warmup; k++) {
            /* one step, one exchange after it (send_forward_backward_recv_forward_backward);
             * without overlap its forward runs before its backward */
            virtual_mb f = t[k + warmup], b = t[k];
            s[n++] = (ep_step){f.mb, f.chunk, b.mb, vpp - 1 - b.chunk};
        }
        for (int k = total - warmup; k < total; k++)
            s[n++] = step_b(t[k].mb, vpp - 1 - t[k].chunk);
        free(t);
    }
    *steps = s;
    return n;
}
