/* sched_print: the schedule as text (per rank, per stream, ops in launch order) and as CSV.
 *
 * Text is for people reading what will run (epsched); CSV is one row per op for scripts, with the
 * columns of docs/schedule.md, "CSV".
 */
#include <stdio.h>

#include "sched_internal.h"

static void print_deps(const ep_rank_sched *r, const ep_op *op, FILE *f, char sep) {
    for (int d = 0; d < op->ndeps; d++)
        fprintf(f, "%s%d", d ? (sep == ' ' ? "," : ";") : "", r->deps[op->deps_off + d]);
}

static void print_rank(const ep_sched *s, int rank, FILE *f) {
    const ep_rank_sched *r = &s->ranks[rank];
    char name[160];
    fprintf(f, "rank %d: %d ops\n", rank, r->nops);
    for (int st = 0; st < EP_NUM_STREAMS; st++) {
        int n = 0;
        for (int i = 0; i < r->nops; i++)
            n += r->ops[i].stream == (ep_stream)st;
        if (n == 0) continue;
        fprintf(f, "  stream %s: %d ops\n", ep_stream_name((ep_stream)st), n);
        for (int i = 0; i < r->nops; i++) {
            const ep_op *op = &r->ops[i];
            if (op->stream != (ep_stream)st) continue;
            ep_op_name(op, name, sizeof name);
            fprintf(f, "    %6d %-44s %-14s", i, name, ep_op_kind_name(op->kind));
            if (op->group >= 0)
                fprintf(f, " %s#%d seq %d %s", ep_group_kind_name(s->groups[op->group].kind),
                        op->group, op->seq, ep_algo_name(op->algo));
            if (op->bytes > 0) fprintf(f, " %.4g B", op->bytes);
            if (op->flops > 0) fprintf(f, " %.4g F%s", op->flops, op->fp8 ? " fp8" : "");
            if (op->sms > 0) fprintf(f, " sms %d", op->sms);
            if (op->ndeps) {
                fprintf(f, " after ");
                print_deps(r, op, f, ' ');
            }
            fputc('\n', f);
        }
    }
}

void ep_sched_print(const ep_sched *s, FILE *f, int rank_filter) {
    int moe = 0;
    for (int i = 0; i < s->plan.num_layers; i++) /* decoder layers; MTP counted apart */
        moe += s->plan.layers[i].is_moe;
    fprintf(f,
            "# schedule: world %d, %d microbatches per DP rank, %d layers (%d MoE, %d MTP), "
            "dispatcher %s, EP overlap %s, delayed wgrad %s\n",
            s->world, s->num_microbatches, s->plan.num_layers, moe, s->plan.num_mtp,
            ep_backend_name(ep_config_backend(&s->cfg)),
            s->cfg.overlap_moe_expert_parallel_comm ? "on" : "off",
            s->cfg.delay_wgrad_compute ? "on" : "off");
    fprintf(f,
            "# %d communicators, %d traffic instances (%d routing draws per layer%s), "
            "model flops/token %.4g, tokens/iteration %.0f\n",
            s->ngroups, s->ntraffic, s->route_period,
            s->route_groups > 0 ? ", EP groups sharing them" : "", s->model_flops_per_token,
            s->tokens_per_iteration);
    fprintf(f, "# columns: launch index, op name, kind, [group#id seq algorithm], bytes, flops [fp8], SMs, "
               "after: launch indices of the ops it waits for\n");
    for (int r = 0; r < s->world; r++)
        if (rank_filter < 0 || rank_filter == r) print_rank(s, r, f);
}

void ep_sched_print_csv(const ep_sched *s, FILE *f, int rank_filter) {
    char name[160];
    fprintf(f,
            "rank,index,stream,name,kind,phase,node,mb,chunk,layer,flops,bytes,group,seq,algo,deps\n");
    for (int rank = 0; rank < s->world; rank++) {
        if (rank_filter >= 0 && rank_filter != rank) continue;
        const ep_rank_sched *r = &s->ranks[rank];
        for (int i = 0; i < r->nops; i++) {
            const ep_op *op = &r->ops[i];
            ep_op_name(op, name, sizeof name);
            fprintf(f, "%d,%d,%s,%s,%s,%s,%s,%d,%d,%d,%.17g,%.17g,%d,%d,%s,", rank, i,
                    ep_stream_name(op->stream), name, ep_op_kind_name(op->kind),
                    ep_phase_name(op->phase), ep_node_name(op->node), op->mb, op->chunk, op->layer,
                    op->flops, op->bytes, op->group, op->seq, ep_algo_name(op->algo));
            print_deps(r, op, f, ';');
            fputc('\n', f);
        }
    }
}
