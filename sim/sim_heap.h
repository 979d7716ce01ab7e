/* sim_heap: binary min-heap of engine events, ordered by (time, insertion number) so that equal
 * times pop in a fixed order and runs are deterministic. */
#ifndef SIM_HEAP_H
#define SIM_HEAP_H

#include <stdint.h>

typedef struct {
    double t;
    uint64_t seq;
    int type;
    int a;        /* payload: global op, rank or instance */
    uint32_t ver; /* compute ends: op's rate version when scheduled */
    int rank;     /* the op's rank (-1 for an instance): no lookup when the event is handled */
} sim_event;

typedef struct {
    sim_event *ev;
    long n, cap;
    uint64_t next_seq;
} sim_heap;

int sim_heap_push(sim_heap *h, double t, int type, int a, uint32_t ver, int rank);
/* Pops the earliest event into *out; returns 0, or -1 when empty. */
int sim_heap_pop(sim_heap *h, sim_event *out);
static inline double sim_heap_top_time(const sim_heap *h) {
    return h->n ? h->ev[0].t : -1.0;
}
void sim_heap_free(sim_heap *h);

#endif
