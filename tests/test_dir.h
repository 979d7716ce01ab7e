/* test_dir: a suite's scratch directory (g_dir, made by the suite's own setup) and what the file
 * tests ask of it: a path inside it, and how many entries a run left there (temporaries
 * included). */
#ifndef EP_TEST_DIR_H
#define EP_TEST_DIR_H

#include <dirent.h>
#include <stdio.h>

static char g_dir[256];

static inline const char *in_dir(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", g_dir, name);
    return buf;
}

static inline int entries(void) {
    DIR *d = opendir(g_dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

#endif
