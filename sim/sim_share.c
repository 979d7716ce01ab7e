/* The engine's own bandwidth sharing, L07 with SimGrid's FairBottleneck (sim_share.h). */
#include "sim_share.h"

#include <float.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdlib.h>
#include <string.h>
#include <xbt/dynar.h>

#define GROW(ptr, cap, need, type)                                                                 \
    do {                                                                                           \
        if ((need) > (cap)) {                                                                      \
            long c_ = (cap) ? 2 * (long)(cap) : 64;                                                \
            while (c_ < (long)(need))                                                              \
                c_ *= 2;                                                                           \
            type *p_ = realloc((ptr), sizeof(type) * (size_t)c_);                                  \
            if (!p_) return -2;                                                                    \
            (ptr) = p_;                                                                            \
            (cap) = c_;                                                                            \
        }                                                                                          \
    } while (0)

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

int sim_share_init(sim_share *s, const sim_topo *t, double tcp_gamma, double maxmin_prec,
                   double surf_prec) {
    memset(s, 0, sizeof *s);
    s->t = t;
    s->tcp_gamma = tcp_gamma;
    s->maxmin_prec = maxmin_prec;
    s->surf_prec = surf_prec;
    s->remains_prec = maxmin_prec * surf_prec;
    s->free_head = -1;
    s->lcap = 1024;
    s->lhash = calloc((size_t)s->lcap, sizeof *s->lhash);
    s->rcap = 4096;
    s->rkey = malloc(sizeof *s->rkey * (size_t)s->rcap);
    s->rval = calloc((size_t)s->rcap, sizeof *s->rval);
    s->route_cap = 1024;
    s->route_off = malloc(sizeof *s->route_off * (size_t)(s->route_cap + 1));
    s->route_lat = malloc(sizeof *s->route_lat * (size_t)s->route_cap);
    s->dynar = xbt_dynar_new(sizeof(sg_link_t), NULL);
    if (!s->lhash || !s->rkey || !s->rval || !s->route_off || !s->route_lat) return -1;
    s->route_off[0] = 0;
    return 0;
}

void sim_share_free(sim_share *s) {
    for (int v = 0; v < s->nvar; v++) {
        free(s->var[v].el_link);
        free(s->var[v].el_w);
    }
    for (int l = 0; l < s->nlink; l++)
        free(s->link[l].ent);
    free(s->var);
    free(s->link);
    free(s->lhash);
    free(s->rkey);
    free(s->rval);
    free(s->route_off);
    free(s->route_links);
    free(s->route_lat);
    if (s->dynar) {
        xbt_dynar_t d = s->dynar;
        xbt_dynar_free(&d);
    }
    free(s->dirty_links);
    free(s->comp_v);
    free(s->comp_l);
    free(s->sol_v);
    free(s->sol_l);
    free(s->slot);
    free(s->changed);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------- links and routes */

static int link_rehash(sim_share *s) {
    long cap = 2 * s->lcap;
    int *h = calloc((size_t)cap, sizeof *h);
    if (!h) return -2;
    for (int l = 0; l < s->nlink; l++) {
        long i = (long)(mix((uint64_t)(uintptr_t)s->link[l].link) & (uint64_t)(cap - 1));
        while (h[i])
            i = (i + 1) & (cap - 1);
        h[i] = l + 1;
    }
    free(s->lhash);
    s->lhash = h;
    s->lcap = cap;
    return 0;
}

/* The id of SimGrid link l, -1 if unknown (create 0) or -2 out of memory. */
static int link_id(sim_share *s, sg_link_t l, int create) {
    long i = (long)(mix((uint64_t)(uintptr_t)l) & (uint64_t)(s->lcap - 1));
    while (s->lhash[i]) {
        if (s->link[s->lhash[i] - 1].link == l) return s->lhash[i] - 1;
        i = (i + 1) & (s->lcap - 1);
    }
    if (!create) return -1;
    if (2 * (long)(s->nlink + 1) > s->lcap) {
        if (link_rehash(s) != 0) return -2;
        return link_id(s, l, create);
    }
    if (s->nlink == s->linkcap) { /* links on cache lines of their own */
        int cap = s->linkcap ? 2 * s->linkcap : 256;
        sh_link *a = aligned_alloc(64, sizeof *a * (size_t)cap);
        if (!a) return -2;
        if (s->nlink) memcpy(a, s->link, sizeof *a * (size_t)s->nlink);
        free(s->link);
        s->link = a;
        int *sl = realloc(s->slot, sizeof *sl * (size_t)cap);
        if (!sl) return -2;
        s->slot = sl;
        s->linkcap = cap;
    }
    int id = s->nlink++;
    sh_link *x = &s->link[id];
    memset(x, 0, sizeof *x);
    x->link = l;
    x->bw = sg_link_get_bandwidth(l);
    x->fatpipe = !sg_link_is_shared(l);
    s->slot[id] = -1;
    s->lhash[i] = id + 1;
    return id;
}

static int route_rehash(sim_share *s) {
    long cap = 2 * s->rcap;
    uint64_t *k = malloc(sizeof *k * (size_t)cap);
    int *v = calloc((size_t)cap, sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return -2;
    }
    for (long j = 0; j < s->rcap; j++) {
        if (!s->rval[j]) continue;
        long i = (long)(mix(s->rkey[j]) & (uint64_t)(cap - 1));
        while (v[i])
            i = (i + 1) & (cap - 1);
        k[i] = s->rkey[j];
        v[i] = s->rval[j];
    }
    free(s->rkey);
    free(s->rval);
    s->rkey = k;
    s->rval = v;
    s->rcap = cap;
    return 0;
}

/* The route between endpoints a and b (its links in route_links, its latency): its id, or -2 out
 * of memory. Looked up in SimGrid once per pair. */
static int route_of(sim_share *s, int a, int b) {
    uint64_t key = (uint64_t)a * (uint64_t)s->t->nends + (uint64_t)b;
    long i = (long)(mix(key) & (uint64_t)(s->rcap - 1));
    while (s->rval[i]) {
        if (s->rkey[i] == key) return s->rval[i] - 1;
        i = (i + 1) & (s->rcap - 1);
    }
    if (2 * (s->nroute + 1) > s->rcap) {
        if (route_rehash(s) != 0) return -2;
        return route_of(s, a, b);
    }
    const sim_platform *p = s->t->p;
    sg_host_t ha = sim_platform_endpoint(p, a), hb = sim_platform_endpoint(p, b);
    xbt_dynar_t d = s->dynar;
    xbt_dynar_reset(d);
    sg_host_get_route(ha, hb, d);
    long n = (long)xbt_dynar_length(d);
    if (s->nroute == s->route_cap) {
        long cap = 2 * s->route_cap;
        int *o = realloc(s->route_off, sizeof *o * (size_t)(cap + 1));
        if (!o) return -2;
        s->route_off = o;
        double *la = realloc(s->route_lat, sizeof *la * (size_t)cap);
        if (!la) return -2;
        s->route_lat = la;
        s->route_cap = cap;
    }
    GROW(s->route_links, s->rlinks_cap, s->rlinks_n + n, int);
    for (long k = 0; k < n; k++) {
        int id = link_id(s, xbt_dynar_get_as(d, k, sg_link_t), 1);
        if (id < 0) return -2;
        s->route_links[s->rlinks_n++] = id;
    }
    int r = (int)s->nroute++;
    s->route_off[r + 1] = (int)s->rlinks_n;
    s->route_lat[r] = sg_host_get_route_latency(ha, hb);
    s->rkey[i] = key;
    s->rval[i] = r + 1;
    return r;
}

/* ---------------------------------------------------------------- pieces */

static int var_new(sim_share *s) {
    int v;
    if (s->free_head >= 0) {
        v = s->free_head;
        s->free_head = s->var[v].next;
    } else {
        if (s->nvar == s->varcap) {
            int cap = s->varcap ? 2 * s->varcap : 256;
            sh_var *a = realloc(s->var, sizeof *a * (size_t)cap);
            if (!a) return -2;
            s->var = a;
            s->varcap = cap;
        }
        v = s->nvar++;
        memset(&s->var[v], 0, sizeof s->var[v]);
    }
    sh_var *x = &s->var[v];
    x->next = -1;
    x->nel = 0;
    x->state = SH_PENDING;
    x->stamp = 0;
    x->rate = 0;
    return v;
}

static void var_release(sim_share *s, int v) {
    sh_var *x = &s->var[v];
    x->state = SH_FREE;
    x->ver++; /* no event of its past life matches it any more */
    x->next = s->free_head;
    s->free_head = v;
}

/* One piece (one L07 task) from the matrix of piece k of f, walked as L07 walks it: row by row,
 * a link's weight the sum of the bytes of the entries whose route crosses it (the largest on a
 * fat pipe). Returns its id or -2. */
static int add_piece(sim_share *s, const sim_flows *f, int k, long owner) {
    int v = var_new(s);
    if (v < 0) return v;
    int h0 = f->piece_host[k], nh = f->piece_host[k + 1] - h0;
    const double *m = f->matrix + f->piece_mat[k];
    double lat = 0, lat_bytes = 0;
    int *links = NULL;
    double *w = NULL;
    long cap = 0, n = 0;
    for (long e = 0; e < (long)nh * nh; e++) {
        double bytes = m[e];
        if (bytes <= 0) continue;
        int r = route_of(s, f->ends[h0 + e / nh], f->ends[h0 + e % nh]);
        if (r < 0) goto oom;
        double l = s->route_lat[r];
        if (l > lat) lat = l;
        if (l * bytes > lat_bytes) lat_bytes = l * bytes;
        for (int j = s->route_off[r]; j < s->route_off[r + 1]; j++) {
            int id = s->route_links[j];
            int at = s->slot[id];
            if (at >= 0) {
                if (s->link[id].fatpipe)
                    w[at] = w[at] > bytes ? w[at] : bytes;
                else
                    w[at] += bytes;
                continue;
            }
            if (n == cap) {
                long c = cap ? 2 * cap : 16;
                int *a = realloc(links, sizeof *a * (size_t)c);
                if (!a) goto oom;
                links = a;
                double *b = realloc(w, sizeof *b * (size_t)c);
                if (!b) goto oom;
                w = b;
                cap = c;
            }
            s->slot[id] = (int)n;
            links[n] = id;
            w[n++] = bytes;
        }
    }
    for (long j = 0; j < n; j++)
        s->slot[links[j]] = -1;
    sh_var *x = &s->var[v];
    free(x->el_link);
    free(x->el_w);
    x->el_link = links;
    x->el_w = w;
    x->nel = (int)n;
    x->owner = owner;
    x->lat = lat;
    x->bound = lat_bytes > 0 ? s->tcp_gamma / (2.0 * lat_bytes) : -1.0;
    x->remains = n > 0 ? 1.0 : 0.0;
    return v;
oom:
    for (long j = 0; j < n; j++)
        s->slot[links[j]] = -1;
    free(links);
    free(w);
    return -2;
}

int sim_share_add(sim_share *s, const sim_flows *f, long owner) {
    int first = -1, last = -1;
    for (int k = 0; k < f->npieces; k++) {
        int v = add_piece(s, f, k, owner);
        if (v < 0) return v;
        if (last >= 0)
            s->var[last].next = v;
        else
            first = v;
        last = v;
    }
    return first;
}

/* Link l changed: its pieces (structural: one began moving or ended) or only its bandwidth. */
static int mark_dirty(sim_share *s, int l, int structural) {
    sh_link *x = &s->link[l];
    x->structural |= (uint8_t)structural;
    if (x->dirty) return 0;
    if (s->ndirty == s->dirtycap) {
        int cap = s->dirtycap ? 2 * s->dirtycap : 256;
        int *a = realloc(s->dirty_links, sizeof *a * (size_t)cap);
        if (!a) return -1;
        s->dirty_links = a;
        s->dirtycap = cap;
    }
    x->dirty = 1;
    s->dirty_links[s->ndirty++] = l;
    return 0;
}

void sim_share_move(sim_share *s, int v, double now) {
    sh_var *x = &s->var[v];
    x->state = SH_MOVING;
    x->last = now;
    x->rate = 0;
    for (int k = 0; k < x->nel; k++) {
        sh_link *l = &s->link[x->el_link[k]];
        if (l->n == l->cap) {
            int cap = l->cap ? 2 * l->cap : 4;
            sh_ent *a = realloc(l->ent, sizeof *a * (size_t)cap);
            if (!a) abort(); /* out of memory in the middle of a simulation, as sim_flows */
            l->ent = a;
            l->cap = cap;
        }
        l->ent[l->n++] = (sh_ent){v, x->el_w[k]};
        mark_dirty(s, x->el_link[k], 1);
    }
}

int sim_share_start(sim_share *s, int v, double now) {
    sh_var *x = &s->var[v];
    x->state = SH_LATENCY;
    x->last = now;
    if (x->lat > 0) return 0;
    sim_share_move(s, v, now);
    return 1;
}

void sim_share_end(sim_share *s, int v) {
    sh_var *x = &s->var[v];
    if (x->state == SH_MOVING)
        for (int k = 0; k < x->nel; k++) {
            sh_link *l = &s->link[x->el_link[k]];
            int i = 0;
            while (i < l->n && l->ent[i].var != v)
                i++;
            if (i < l->n) {
                memmove(&l->ent[i], &l->ent[i + 1], sizeof *l->ent * (size_t)(l->n - i - 1));
                l->n--;
            }
            mark_dirty(s, x->el_link[k], 1);
        }
    var_release(s, v);
}

void sim_share_set_bandwidth(sim_share *s, sg_link_t l, double bw) {
    int id = link_id(s, l, 1);
    if (id < 0) abort(); /* out of memory mid-simulation */
    if (s->link[id].bw == bw) return;
    s->link[id].bw = bw;
    if (s->link[id].n > 0) mark_dirty(s, id, 0);
}

/* ---------------------------------------------------------------- the solver */

static int push_int(int **a, int *n, int *cap, int x) {
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 256;
        int *p = realloc(*a, sizeof *p * (size_t)c);
        if (!p) return -1;
        *a = p;
        *cap = c;
    }
    (*a)[(*n)++] = x;
    return 0;
}

/* The moving pieces and the links connected to link l through them, into comp_v / comp_l. */
static void component(sim_share *s, int l0) {
    s->ncomp_v = s->ncomp_l = 0;
    if (s->link[l0].stamp == s->cur) return;
    s->link[l0].stamp = s->cur;
    if (push_int(&s->comp_l, &s->ncomp_l, &s->comp_lcap, l0)) abort();
    for (int i = 0; i < s->ncomp_l; i++) {
        const sh_link *l = &s->link[s->comp_l[i]];
        for (int j = 0; j < l->n; j++) {
            int v = l->ent[j].var;
            sh_var *x = &s->var[v];
            if (x->stamp == s->cur) continue;
            x->stamp = s->cur;
            if (push_int(&s->comp_v, &s->ncomp_v, &s->comp_vcap, v)) abort();
            for (int k = 0; k < x->nel; k++) {
                sh_link *y = &s->link[x->el_link[k]];
                if (y->stamp == s->cur) continue;
                y->stamp = s->cur;
                if (push_int(&s->comp_l, &s->ncomp_l, &s->comp_lcap, x->el_link[k])) abort();
            }
        }
    }
}

static inline void double_update(double *x, double value, double precision) {
    *x -= value;
    if (*x < precision) *x = 0.0;
}

/* FairBottleneck::do_solve of SimGrid 3.32 on the component in comp_v / comp_l: every piece's
 * value. A link's pieces are walked in the order SimGrid keeps them (the one that began moving
 * last first), so that its remaining capacity is the same sum. */
static void fair_bottleneck(sim_share *s) {
    int nv = s->ncomp_v, nc = s->ncomp_l;
    int *vl = s->sol_v, *cl = s->sol_l; /* compacted in place as SimGrid erases from its lists */
    memcpy(vl, s->comp_v, sizeof *vl * (size_t)nv);
    memcpy(cl, s->comp_l, sizeof *cl * (size_t)nc);
    for (int i = 0; i < nv; i++) {
        sh_var *x = &s->var[vl[i]];
        x->value = 0.0;
        x->mu = 0.0;
        x->in_list = 1; /* every piece loads a link with a positive weight */
    }
    for (int i = 0; i < nc; i++) {
        sh_link *l = &s->link[cl[i]];
        l->remaining = l->bw;
        l->usage = 0.0;
        l->bw_solved = l->bw;
        l->sat1 = 0;
    }
    int rounds = 0;
    while (nv > 0) {
        rounds++;
        int w = 0;
        for (int i = 0; i < nc; i++) {
            sh_link *l = &s->link[cl[i]];
            int nb = 0;
            if (rounds == 1) /* every piece is still growing */
                nb = l->n;
            else
                for (int j = 0; j < l->n; j++)
                    nb += s->var[l->ent[j].var].in_list;
            if (nb > 0 && l->fatpipe) nb = 1;
            if (nb == 0) {
                l->remaining = 0.0;
                l->usage = 0.0;
                continue;
            }
            l->usage = l->remaining / nb;
            cl[w++] = cl[i];
        }
        nc = w;
        w = 0;
        for (int i = 0; i < nv; i++) {
            sh_var *x = &s->var[vl[i]];
            double min_inc = DBL_MAX;
            for (int k = 0; k < x->nel; k++) {
                double inc = s->link[x->el_link[k]].usage / x->el_w[k];
                if (inc < min_inc) min_inc = inc;
            }
            if (x->bound > 0 && x->bound - x->value < min_inc) min_inc = x->bound - x->value;
            x->mu = min_inc;
            x->value += x->mu;
            if (x->value == x->bound)
                x->in_list = 0;
            else
                vl[w++] = vl[i];
        }
        nv = w;
        w = 0;
        for (int i = 0; i < nc; i++) {
            sh_link *l = &s->link[cl[i]];
            if (!l->fatpipe) {
                for (int j = l->n - 1; j >= 0; j--)
                    double_update(&l->remaining, l->ent[j].w * s->var[l->ent[j].var].mu,
                                  s->maxmin_prec);
            } else {
                for (int j = l->n - 1; j >= 0; j--) {
                    double u = l->ent[j].w * s->var[l->ent[j].var].mu;
                    if (u < l->usage) l->usage = u;
                }
                double_update(&l->remaining, l->usage, s->maxmin_prec);
            }
            if (l->remaining <= 0.0) {
                for (int j = 0; j < l->n; j++)
                    s->var[l->ent[j].var].in_list = 0;
                l->sat1 = rounds == 1;
                continue;
            }
            cl[w++] = cl[i];
        }
        nc = w;
        w = 0;
        for (int i = 0; i < nv; i++) /* the pieces a saturated link took out */
            if (s->var[vl[i]].in_list) vl[w++] = vl[i];
        nv = w;
    }
    for (int i = 0; i < s->ncomp_v; i++)
        s->var[s->comp_v[i]].one_round = rounds == 1;
}

/* Whether link l, whose bandwidth alone changed since its component was last solved in one round,
 * leaves that solution as it is, bit for bit: FairBottleneck's first round then takes each piece's
 * increment from another link (l's share of every piece on it was and stays above the piece's
 * rate) and l saturates in that round as it did, or not as it did not; every other link and piece
 * does exactly what it did. Then l keeps the solution and nothing is solved. */
static int bandwidth_only(sim_share *s, sh_link *l) {
    if (l->structural || l->fatpipe) return 0;
    double nb = (double)l->n, old_usage = l->bw_solved / nb, usage = l->bw / nb;
    double rem = l->bw;
    for (int j = l->n - 1; j >= 0; j--) {
        const sh_var *x = &s->var[l->ent[j].var];
        double w = l->ent[j].w;
        if (!x->one_round || !(old_usage / w > x->value) || !(usage / w > x->value)) return 0;
        double_update(&rem, w * x->value, s->maxmin_prec);
    }
    if ((rem <= 0.0) != l->sat1) return 0;
    l->bw_solved = l->bw;
    return 1;
}

void sim_share_flush(sim_share *s, double now) {
    s->nchanged = 0;
    if (s->ndirty == 0) return;
    if (++s->cur == 0) { /* stamps wrapped: start over */
        for (int i = 0; i < s->nlink; i++)
            s->link[i].stamp = 0;
        for (int i = 0; i < s->nvar; i++)
            s->var[i].stamp = 0;
        s->cur = 1;
    }
    for (int d = 0; d < s->ndirty; d++) {
        int l = s->dirty_links[d];
        sh_link *lk = &s->link[l];
        lk->dirty = 0;
        int structural = lk->structural;
        lk->structural = 0;
        if (lk->n == 0) continue;
        if (lk->stamp == s->cur) continue; /* solved with an earlier dirty link's component */
        if (!structural && bandwidth_only(s, lk)) {
            s->nskipped++;
            continue;
        }
        component(s, l);
        if (s->ncomp_v == 0) continue;
        if (s->ncomp_v > s->solcap_v || s->ncomp_l > s->solcap_l) {
            if (s->ncomp_v > s->solcap_v) {
                free(s->sol_v);
                s->solcap_v = s->comp_vcap;
                s->sol_v = malloc(sizeof *s->sol_v * (size_t)s->solcap_v);
            }
            if (s->ncomp_l > s->solcap_l) {
                free(s->sol_l);
                s->solcap_l = s->comp_lcap;
                s->sol_l = malloc(sizeof *s->sol_l * (size_t)s->solcap_l);
            }
            if (!s->sol_v || !s->sol_l) abort(); /* out of memory mid-simulation */
        }
        s->nsolves++;
        fair_bottleneck(s);
        for (int i = 0; i < s->ncomp_v; i++) {
            int v = s->comp_v[i];
            sh_var *x = &s->var[v];
            if (x->value == x->rate) continue; /* its end event still holds */
            if (x->rate > 0 && now > x->last) double_update(&x->remains, x->rate * (now - x->last), s->remains_prec);
            x->last = now;
            x->rate = x->value;
            if (push_int(&s->changed, &s->nchanged, &s->changedcap, v)) abort();
        }
    }
    s->ndirty = 0;
}
