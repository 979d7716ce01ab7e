/* libFuzzer target for the platform check (sim/sim_platform_check.c): any bytes as a platform
 * file. Beyond "no crash, no sanitizer report, no leak", a refusal is one non-empty line naming
 * the file, and the check is deterministic. Files it accepts are what SimGrid gets to read:
 * scripts/fuzz.sh --long replays the corpus through epsim afterwards (exit 0 or 2, never a signal).
 * Build and run: scripts/fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_platform_check.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);          \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[EP_ERRLEN], again[EP_ERRLEN];
    int rc = sim_platform_check_text((const char *)data, size, "fuzz.xml", err);
    CHECK(rc == 0 || rc == -1);
    if (rc != 0) {
        CHECK(err[0] != 0);
        CHECK(strchr(err, '\n') == NULL);
        CHECK(strncmp(err, "platform fuzz.xml", 17) == 0);
    }
    CHECK(sim_platform_check_text((const char *)data, size, "fuzz.xml", again) == rc);
    CHECK(rc != 0 ? strcmp(err, again) == 0 : 1);
    return 0;
}
