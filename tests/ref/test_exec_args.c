/* epref run's flags are checked without CUDA (ref/exec_args.c): bad flags give exit status 2 and
 * one line on any machine; the epref program, where it is built, says so before any GPU call. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec_args.h"

static int parse_line(const char *line, int world, char err[EP_ERRLEN]) {
    char buf[2048], *argv[64];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *s = NULL, *t = strtok_r(buf, " ", &s); t && argc < 63; t = strtok_r(NULL, " ", &s))
        argv[argc++] = t;
    argv[argc] = NULL;
    exec_opts o;
    err[0] = 0;
    return exec_args_parse(argc, argv, world, &o, err);
}

static void test_bad_flags(void) {
    static const struct {
        const char *line, *msg;
    } bad[] = {
        {"run --foo", "unknown flag --foo"},
        {"run --moe-expert-capacity-factor 1.0", "epref runs dropless MoE only"},
        {"run --iters 0", "--iters 0 is out of range"},
        {"run --iters=0", "--iters 0 is out of range"},
        {"run --warmup -1", "--warmup -1 is out of range"},
        {"run --iters", "--iters needs a value"},
        {"run --trace", "--trace needs a value"},
        {"run --trace /nonexistent-dir/t.json", "cannot write /nonexistent-dir/t.json"},
        {"run --hidden-size abc", "--hidden-size: 'abc' is not an integer"},
        {"run --hidden-size 9223372036854775807", "out of range"},
        {"run --expert-model-parallel-size 3", "--expert-model-parallel-size 3"},
        {"run --world-size 4", "needs 4 ranks but 2 were launched"},
        {"run stray", "unexpected argument 'stray'"},
        {"run --moe-flex-dispatcher-backend deepep", "has no effect"},
    };
    char err[EP_ERRLEN];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse_line(bad[i].line, 2, err);
        if (rc != 2 || !strstr(err, bad[i].msg))
            printf("\n  '%s': rc %d, '%s'\n", bad[i].line, rc, err);
        CU_ASSERT_EQUAL(rc, 2);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, bad[i].msg));
        CU_ASSERT_PTR_NULL(strchr(err, '\n'));
    }
    CU_ASSERT_EQUAL(parse_line("run --num-layers 2 --iters 3 --warmup 0", 2, err), 0);
    CU_ASSERT_EQUAL(parse_line("run --num-layers 2 --iters=3 --warmup=0", 2, err), 0);
}

/* Where epref is built (CUDA and NCCL present), it refuses bad flags before any CUDA call: exit 2
 * and one line, also on a machine without a GPU, once for all ranks. */
static void test_epref_program(void) {
    char exe[1024], cmd[2048], err[1024];
    snprintf(exe, sizeof exe, "%s/ref/epref", EP_BINARY_DIR);
    if (access(exe, X_OK) != 0) return; /* built without CUDA */
    snprintf(err, sizeof err, "%s/ref_args_%d.err", EP_BINARY_DIR, (int)getpid());
    static const char *const lines[] = {"--nproc 2 run --foo",
                                        "--nproc 2 run --moe-expert-capacity-factor 1.0",
                                        "--nproc 0 run", "run --iters x"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>%s", exe, lines[i], err);
        int st = system(cmd);
        CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
        FILE *f = fopen(err, "r");
        int n = 0, c;
        while (f && (c = fgetc(f)) != EOF)
            n += c == '\n';
        if (f) fclose(f);
        if (n != 1) printf("\n  epref %s: %d lines on stderr\n", lines[i], n);
        CU_ASSERT_EQUAL(n, 1);
    }
    remove(err);
}

void ep_suite_exec_args(void) {
    CU_pSuite s = CU_add_suite("epref run flags (no CUDA)", NULL, NULL);
    CU_add_test(s, "bad flags: exit 2, one line", test_bad_flags);
    CU_add_test(s, "the epref program refuses them before CUDA", test_epref_program);
}
