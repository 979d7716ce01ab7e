/* Input files that may be committed compressed with xz (ep_io.h): read through a pipe from
 * `xz -dc`, so no compression library is linked (xz-utils is a package like gnuplot). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ep_io.h"

static int is_xz(const char *path) {
    size_t n = strlen(path);
    return n > 3 && strcmp(path + n - 3, ".xz") == 0;
}

int ep_infile_open(ep_infile *in, const char *path, char err[EP_ERRLEN]) {
    in->f = NULL;
    in->pipe = 0;
    if (access(path, R_OK) != 0) {
        snprintf(err, EP_ERRLEN, "cannot read %s", path);
        return -1;
    }
    if (!is_xz(path)) {
        in->f = fopen(path, "rb");
    } else if (!strchr(path, '\'')) { /* quoted for the shell below */
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "xz -dc -- '%s' 2>/dev/null", path);
        in->f = popen(cmd, "r");
        in->pipe = 1;
    }
    if (!in->f) {
        snprintf(err, EP_ERRLEN, "cannot read %s%s", path, is_xz(path) ? " (xz -dc)" : "");
        return -1;
    }
    return 0;
}

int ep_infile_close(ep_infile *in) {
    int rc = 0;
    if (in->f) rc = in->pipe ? (pclose(in->f) != 0 ? -1 : 0) : (fclose(in->f) != 0 ? -1 : 0);
    in->f = NULL;
    return rc;
}

int ep_infile_find(const char *path, char *out, size_t len) {
    if (access(path, R_OK) == 0) {
        snprintf(out, len, "%s", path);
        return 0;
    }
    char xz[4200];
    snprintf(xz, sizeof xz, "%s.xz", path);
    if (access(xz, R_OK) != 0) return -1;
    snprintf(out, len, "%s", xz);
    return 0;
}
