/* examples/: each example's "# run: epsim ..." line gives exactly its .out (SimGrid's tesh idea:
 * the expected output is part of the example; scripts/update_examples.sh rewrites them). */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_test_util.h"

/* The whole of a file, or NULL. */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static void test_examples(void) {
    DIR *d = opendir(EP_SOURCE_DIR "/examples");
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    int ran = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t k = strlen(e->d_name);
        if (k < 6 || strcmp(e->d_name + k - 5, ".args") != 0) continue;
        char args[600], want[600], got[600], cmd[2048], line[1024], run[1024] = "";
        snprintf(args, sizeof args, "%s/examples/%s", EP_SOURCE_DIR, e->d_name);
        snprintf(want, sizeof want, "%s/examples/%.*s.out", EP_SOURCE_DIR, (int)(k - 5), e->d_name);
        snprintf(got, sizeof got, "%s/example_%.*s.out", EP_BINARY_DIR, (int)(k - 5), e->d_name);
        FILE *f = fopen(args, "r");
        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        while (!run[0] && fgets(line, sizeof line, f))
            if (!strncmp(line, "# run: epsim ", 13)) {
                line[strcspn(line, "\n")] = 0;
                snprintf(run, sizeof run, "%s", line + 13);
            }
        fclose(f);
        CU_ASSERT_FATAL(run[0] != 0);
        snprintf(cmd, sizeof cmd, "cd %s && %s/sim/epsim %s > %s 2>/dev/null", EP_SOURCE_DIR,
                 EP_BINARY_DIR, run, got);
        CU_ASSERT_EQUAL(system(cmd), 0);
        char *a = slurp(got), *b = slurp(want);
        CU_ASSERT_PTR_NOT_NULL(a);
        CU_ASSERT_PTR_NOT_NULL(b);
        if (a && b && strcmp(a, b) != 0)
            fprintf(stderr, "\n  %s: output differs from %s (scripts/update_examples.sh)\n",
                    e->d_name, want);
        CU_ASSERT(a && b && strcmp(a, b) == 0);
        free(a);
        free(b);
        remove(got);
        ran++;
    }
    closedir(d);
    CU_ASSERT(ran >= 3);
}

void ep_suite_examples(void) {
    CU_pSuite s = CU_add_suite("examples", NULL, NULL);
    CU_add_test(s, "each example gives its .out exactly", test_examples);
}
