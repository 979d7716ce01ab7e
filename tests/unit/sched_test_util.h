/* Helpers of the schedule suites (test_sched*.c): build a schedule from a flag string and find ops.
 */
#ifndef EP_SCHED_TEST_UTIL_H
#define EP_SCHED_TEST_UTIL_H

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "ep_sched.h"
#include "test_util.h"

/* A small MoE model: 2 MoE layers, 8 experts top-2, 6 sequences per iteration. */
#define SCHED_SMALL                                                                                \
    "--num-layers 2 --hidden-size 256 --ffn-hidden-size 512 --num-attention-heads 4 "              \
    "--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 256 --seq-length 128 "              \
    "--micro-batch-size 1 "

/* Parses, validates and builds; returns 0 or fails the current test with the message. */
static inline int sched_build_flags(ep_sched *s, const char *flags) {
    ep_config cfg;
    char err[EP_ERRLEN];
    int rc = ep_test_config(&cfg, flags, err);
    if (rc == 0) rc = ep_sched_build(&cfg, s, err);
    if (rc != 0) {
        fprintf(stderr, "\n  flags: %s\n  error: %s\n", flags, err);
        CU_FAIL("configuration does not build");
    }
    return rc;
}

/* Number of ops of rank r whose name contains `part`. */
static inline int sched_count(const ep_sched *s, int r, const char *part) {
    char name[160];
    int n = 0;
    for (int i = 0; i < s->ranks[r].nops; i++) {
        ep_op_name(&s->ranks[r].ops[i], name, sizeof name);
        n += strstr(name, part) != NULL;
    }
    return n;
}

/* Index of rank r's op named exactly `name`, or -1. */
static inline int sched_find(const ep_sched *s, int r, const char *name) {
    char buf[160];
    for (int i = 0; i < s->ranks[r].nops; i++) {
        ep_op_name(&s->ranks[r].ops[i], buf, sizeof buf);
        if (strcmp(buf, name) == 0) return i;
    }
    return -1;
}

static inline int sched_moe_layers(const ep_sched *s) {
    int n = 0;
    for (int i = 0; i < s->plan.num_layers + s->plan.num_mtp; i++)
        n += s->plan.layers[i].is_moe;
    return n;
}

#endif
