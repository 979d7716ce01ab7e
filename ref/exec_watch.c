/* exec_watch: the watchdog of `epref run` - a rank whose peer died or never reached a collective
 * ends with an error naming the op it waited on, instead of waiting forever (docs/epref-run.md,
 * "Faults"). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "exec_internal.h"
#include "ref_boot.h"

/* Seconds a rank may go with no op of its own launched or finished before it gives up: a peer
 * died or never reached a collective (NCCL waits for it forever). EPREF_OP_TIMEOUT overrides. */
static double op_timeout_s(void) {
    const char *v = getenv("EPREF_OP_TIMEOUT");
    double t = v ? atof(v) : 0;
    return t > 0 ? t : EXEC_OP_TIMEOUT_S;
}

/* The watchdog: a thread of its own, so it fires wherever the rank is blocked (a host sync, the
 * end of the iteration, a launch held by a full queue, NCCL, the iteration's barrier). While an
 * iteration runs (launched >= 0) it follows the ops launched so far; once neither a launch nor a
 * finish happened for the timeout it names the oldest op still waiting and ends the process
 * (_exit: a context with a kernel spinning on a dead peer must not be torn down first); the
 * launcher of --nproc then stops the other ranks. */
static void *watch_main(void *arg) {
    exec_gpu *g = arg;
    if (cudaSetDevice(g->watch.device) != cudaSuccess) return NULL;
    const double limit = op_timeout_s();
    double last = ref_mono_s();
    int seen_launched = -2, seen_done = -1, lo = 0;
    while (!atomic_load(&g->watch.stop)) {
        struct timespec nap = {0, 100 * 1000 * 1000};
        nanosleep(&nap, NULL);
        int n = atomic_load(&g->watch.launched);
        if (n < 0) { /* between iterations: nothing to watch */
            seen_launched = -2, lo = 0, last = ref_mono_s();
            continue;
        }
        if (n < seen_launched) lo = 0; /* a new iteration */
        while (lo < n && cudaEventQuery(g->ev1[lo]) == cudaSuccess)
            lo++;
        int done = lo;
        for (int i = lo + 1; i < n; i++)
            done += cudaEventQuery(g->ev1[i]) == cudaSuccess;
        if (n != seen_launched || done != seen_done) {
            seen_launched = n, seen_done = done, last = ref_mono_s();
            continue;
        }
        if (ref_mono_s() - last < limit) continue;
        if (lo < n)
            fprintf(stderr,
                    "epref: rank %d: no op finished for %.0f s; waiting on %s (%s, group %d): a "
                    "peer rank died or never reached it (EPREF_OP_TIMEOUT)\n",
                    g->rank, limit, g->names[lo], ep_op_kind_name(g->ops[lo].kind),
                    g->ops[lo].group);
        else if (n > 0) /* every launched op finished: the host itself is held */
            fprintf(stderr,
                    "epref: rank %d: launched nothing for %.0f s after %s: this rank's host is "
                    "held (EPREF_OP_TIMEOUT)\n",
                    g->rank, limit, g->names[n - 1]);
        else
            fprintf(stderr,
                    "epref: rank %d: no progress for %.0f s at the iteration's start barrier: a "
                    "peer rank died or never reached it (EPREF_OP_TIMEOUT)\n",
                    g->rank, limit);
        fflush(NULL);
        _exit(1);
    }
    return NULL;
}

void exec_watch_start(exec_gpu *g) {
    atomic_store(&g->watch.launched, -1);
    atomic_store(&g->watch.stop, 0);
    CUDA_CHECK(cudaGetDevice(&g->watch.device));
    if (pthread_create(&g->watch.thread, NULL, watch_main, g)) REF_DIE("cannot start the watchdog");
}

void exec_watch_stop(exec_gpu *g) {
    atomic_store(&g->watch.stop, 1);
    pthread_join(g->watch.thread, NULL);
}
