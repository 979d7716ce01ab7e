/* sched_gen: how the layer generator and the dispatcher backends add op specs to a node
 * (sched_gen.h). */
#include "sched_gen.h"

#include <stdio.h>
#include <string.h>

spec *gen_add(gen *g, const char *label, ep_op_kind kind) {
    if (g->n >= EP_MAX_NODE_OPS) {
        g->failed = 1;
        return &g->out[EP_MAX_NODE_OPS - 1];
    }
    spec *s = &g->out[g->n++];
    memset(s, 0, sizeof *s);
    s->label = label;
    if (g->prefix[0]) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s%s", g->prefix, label);
        s->label = ep_sched_intern(g->rb->s, buf);
        if (!s->label) g->failed = 1;
    }
    s->kind = kind;
    s->group = s->traffic = -1;
    s->mods = g->mods;
    s->cg = g->cg;
    return s;
}

void gen_mem(gen *g, const char *label, ep_op_kind kind, double bytes) {
    gen_add(g, label, kind)->bytes = bytes;
}

spec *gen_coll(gen *g, const char *label, ep_op_kind kind, int group, double bytes) {
    spec *s = gen_add(g, label, kind);
    s->group = group;
    s->bytes = bytes;
    return s;
}

void gen_host_sync(gen *g, const char *label) {
    gen_add(g, label, EP_OP_HOST_SYNC)->fwd_only = 1;
}

void gen_a2a(gen *g, const char *label, const moe_rows *r, int combine) {
    spec *s = gen_add(g, label, combine ? EP_OP_A2A_COMBINE : EP_OP_A2A_DISPATCH);
    s->group = g->rb->g_ep;
    s->traffic = r->ti;
    s->transpose = combine;
    s->bytes = combine ? r->recv_bytes : r->sent_bytes;
}

/* Rows the experts see after the receive-side permute (device padding pads inside it). */
double gen_permuted_rows(const ep_config *c, const moe_rows *r) {
    return c->pad_mode == EP_PAD_DEVICE ? r->prows : r->erows;
}

/* Hooks several dispatchers share (ep_dispatcher): the token all-to-all each way, and the
 * receive-side permute of rows that arrive one per (token, destination rank). */
void gen_dispatch_a2a(gen *g, const moe_rows *r) {
    gen_a2a(g, "dispatch", r, 0);
}

void gen_combine_a2a(gen *g, const moe_rows *r) {
    gen_a2a(g, "combine", r, 1);
}

void gen_permute_recv(gen *g, const moe_rows *r) {
    gen_mem(g, "permute", EP_OP_PERMUTE, (r->recv + gen_permuted_rows(g->cfg, r)) * g->R);
}

void gen_unpermute_recv(gen *g, const moe_rows *r) {
    gen_mem(g, "unpermute", EP_OP_UNPERMUTE, (gen_permuted_rows(g->cfg, r) + r->recv) * g->R);
}
