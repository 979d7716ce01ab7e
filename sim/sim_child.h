/* sim_child: a piece of work that needs a simulation of its own, done in a child process
 * (SimGrid runs one simulation per process) and its result copied back: the power model's cold
 * first pass (sim_engine.c) and the shorter step of --sample-microbatches (sim_sample.c). */
#ifndef SIM_CHILD_H
#define SIM_CHILD_H

#include <stddef.h>

/* Runs fn(ctx, out) in a forked child, where it fills the n bytes at out and returns 0; then
 * copies those bytes into the caller's out. Returns 0, or -1 when no child could run, fn returned
 * non-zero or the child died: out is then untouched. */
int sim_child_call(int (*fn)(void *ctx, void *out), void *ctx, void *out, size_t n);

#endif
