/* Event heap of the engine (sim_heap.h). */
#include "sim_heap.h"

#include <stdlib.h>

static int before(const sim_event *a, const sim_event *b) {
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int sim_heap_push(sim_heap *h, double t, int type, int a, uint32_t ver, int rank) {
    if (h->n == h->cap) {
        long cap = h->cap ? 2 * h->cap : 4096;
        sim_event *e = realloc(h->ev, sizeof *e * (size_t)cap);
        if (!e) return -1;
        h->ev = e;
        h->cap = cap;
    }
    sim_event x = {t, h->next_seq++, type, a, ver, rank};
    long i = h->n++;
    while (i > 0) {
        long p = (i - 1) / 2;
        if (!before(&x, &h->ev[p])) break;
        h->ev[i] = h->ev[p];
        i = p;
    }
    h->ev[i] = x;
    return 0;
}

int sim_heap_pop(sim_heap *h, sim_event *out) {
    if (h->n == 0) return -1;
    *out = h->ev[0];
    sim_event x = h->ev[--h->n];
    long i = 0;
    for (;;) {
        long l = 2 * i + 1, r = l + 1, m = i;
        const sim_event *best = &x;
        if (l < h->n && before(&h->ev[l], best)) {
            m = l;
            best = &h->ev[l];
        }
        if (r < h->n && before(&h->ev[r], best)) m = r;
        if (m == i) break;
        h->ev[i] = h->ev[m];
        i = m;
    }
    if (h->n > 0) h->ev[i] = x;
    return 0;
}

void sim_heap_free(sim_heap *h) {
    free(h->ev);
    h->ev = NULL;
    h->n = h->cap = 0;
}
