/* Helpers shared by the CUnit suites: building configs from flag strings. */
#ifndef EP_TEST_UTIL_H
#define EP_TEST_UTIL_H

#include <string.h>
#include "ep_config.h"

/* Parses a space-separated flag string into cfg (after defaults) and validates it.
 * Returns 0 on success, -1 on a parse error, -2 on a validation error; err holds the message. */
static inline int ep_test_config(ep_config *cfg, const char *flags, char err[EP_ERRLEN])
{
    char buf[4096];
    char *argv[256];
    int argc = 0;
    strncpy(buf, flags, sizeof buf - 1);
    buf[sizeof buf - 1] = 0;
    argv[argc++] = "test";
    for (char *tok = strtok(buf, " \t\n"); tok && argc < 255; tok = strtok(NULL, " \t\n"))
        argv[argc++] = tok;
    argv[argc] = NULL;
    ep_config_defaults(cfg);
    if (ep_config_parse(cfg, argc, argv, NULL, NULL, err) != 0)
        return -1;
    if (ep_config_validate(cfg, err) != 0)
        return -2;
    return 0;
}

#endif
