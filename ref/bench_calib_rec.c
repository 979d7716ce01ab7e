/* bench_calib_rec: what every part of `epref bench calib` shares - the record list and the
 * synthetic schedules its ops are timed on (bench_calib.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_calib.h"
#include "ep_cost.h"
#include "ref_check.h"

void calib_add(calib_list *l, const char *fmt, ...) {
    char rec[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(rec, sizeof rec, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof rec) REF_DIE("calibration record too long");
    if (l->len + (size_t)n + 3 > l->cap) {
        l->cap = (l->cap ? 2 * l->cap : 65536) + (size_t)n;
        l->text = realloc(l->text, l->cap);
        if (!l->text) REF_DIE("out of memory");
    }
    l->len += (size_t)sprintf(l->text + l->len, ",\n%s", rec);
    l->n++;
}

/* ---- synthetic schedules ----------------------------------------------------------------- */

void calib_synth_init(calib_synth *y, const ep_config *cfg, int world) {
    memset(y, 0, sizeof *y);
    y->s.cfg = *cfg;
    y->s.world = world;
    y->s.ranks = y->rk;
    y->s.groups = y->grp;
    for (int r = 0; r < world; r++)
        y->members[r] = r;
    y->grp[0] = (ep_group){EP_GROUP_EP, world, y->members};
    y->pair[0] = 0, y->pair[1] = 1;
    y->grp[1] = (ep_group){EP_GROUP_P2P, 2, y->pair};
    y->s.ngroups = world >= 2 ? 2 : 0;
}

ep_op *calib_synth_op(ep_op *ops, int *n, int cap, ep_op_kind kind, ep_phase phase) {
    if (*n == cap) REF_DIE("too many calibration ops");
    ep_op *op = &ops[(*n)++];
    memset(op, 0, sizeof *op);
    op->kind = kind;
    op->phase = phase;
    op->stream = EP_STREAM_COMP;
    op->label = "calib";
    op->mb = op->chunk = op->layer = op->index = -1;
    op->group = op->traffic = op->peer = -1;
    op->batch = 1;
    return op;
}

int calib_gemm_fits(double rows, double nn, double k, double experts) {
    return rows <= CALIB_MAX_ROWS && experts * nn * k * EP_BF16 <= CALIB_MAX_WEIGHTS &&
           ep_cost_gemm_flops(rows, nn, k) <= CALIB_MAX_FLOPS;
}

void calib_gemm3(ep_op *ops, int *n, int cap, ep_op_kind kind, int m, int nn, int k, int batch) {
    double flops = ep_cost_gemm_flops(m, nn, k), bytes = ep_cost_gemm_bytes(m, nn, k);
    if (kind == EP_OP_GROUPED_GEMM) bytes += (batch - 1) * (double)k * nn * EP_BF16;
    ep_op *f = calib_synth_op(ops, n, cap, kind, EP_PHASE_FWD);
    f->m = m, f->n = nn, f->k = k, f->batch = batch, f->flops = flops, f->bytes = bytes;
    ep_op *d = calib_synth_op(ops, n, cap, kind, EP_PHASE_BWD);
    *d = *f, d->phase = EP_PHASE_BWD, d->n = k, d->k = nn;
    ep_op *w = calib_synth_op(ops, n, cap, kind, EP_PHASE_BWD_DW);
    *w = *f, w->phase = EP_PHASE_BWD_DW, w->m = k, w->n = nn, w->k = m;
}

void calib_attention_config(ep_config *cfg, int seq, int dqk, int dv) {
    ep_config_defaults(cfg);
    cfg->seq_length = seq;
    cfg->num_attention_heads = 8;
    cfg->hidden_size = 8 * dv;
    if (dqk != dv) {
        cfg->multi_latent_attention = 1;
        cfg->qk_head_dim = 128;
        cfg->qk_pos_emb_head_dim = dqk - 128;
        cfg->v_head_dim = dv;
    } else {
        cfg->kv_channels = dqk;
    }
    ep_config_resolve(cfg); /* built by hand: no validation */
}

void calib_launch_op(void *arg, cudaStream_t st) {
    calib_op *o = arg;
    exec_gpu_launch(o->g, o->i, st);
}
