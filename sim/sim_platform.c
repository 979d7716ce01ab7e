/* Platform lookup and loading (sim_platform.h). */
#include "sim_platform.h"

#include <simgrid/host.h>
#include <simgrid/engine.h>
#include <simgrid/zone.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xbt/log.h>

#include "sim_platform_check.h"

XBT_LOG_NEW_DEFAULT_SUBCATEGORY(epsim_platform, root, "epsim: platform files and GPU hosts");

#ifndef EP_SOURCE_DIR
#define EP_SOURCE_DIR "."
#endif

static int readable(const char *p) {
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    fclose(f);
    return 1;
}

static int try_dir(const char *dir, const char *kind, const char *arg, const char *suffix,
                   char *out, size_t len) {
    int n = snprintf(out, len, "%s/%s/%s%s", dir, kind, arg, suffix);
    return n > 0 && (size_t)n < len && readable(out);
}

int sim_find_data(const char *kind, const char *arg, const char *suffix, char *out, size_t len) {
    struct stat st;
    /* an existing path is taken as it is (a directory too, to be refused by its reader) */
    if (stat(arg, &st) == 0 && strlen(arg) < len) {
        snprintf(out, len, "%s", arg);
        return 0;
    }
    return sim_find_bundled(kind, arg, suffix, out, len);
}

int sim_find_bundled(const char *kind, const char *arg, const char *suffix, char *out, size_t len) {
    /* a bare name only: paths that do not exist are reported as they were given */
    if (!arg[0] || strchr(arg, '/')) return -1;
    size_t sl = strlen(suffix), al = strlen(arg);
    const char *sfx = (al > sl && strcmp(arg + al - sl, suffix) == 0) ? "" : suffix;
    const char *env = getenv("EPSIM_DATA_DIR");
    if (env && try_dir(env, "", arg, sfx, out, len)) return 0;
    if (env && try_dir(env, kind, arg, sfx, out, len)) return 0;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            if (try_dir(exe, kind, arg, sfx, out, len)) return 0;
            char share[PATH_MAX + 32];
            snprintf(share, sizeof share, "%s/../share/epsim", exe);
            if (try_dir(share, kind, arg, sfx, out, len)) return 0;
        }
    }
    char src[PATH_MAX];
    /* in the source tree: sim/topos, configs, traces/calib */
    snprintf(src, sizeof src, "%s%s", EP_SOURCE_DIR,
             strcmp(kind, "topos") == 0   ? "/sim"
             : strcmp(kind, "calib") == 0 ? "/traces"
                                          : "");
    if (try_dir(src, kind, arg, sfx, out, len)) return 0;
    return -1;
}

static int prop_num(sg_host_t h, const char *key, double *v, char err[EP_ERRLEN],
                    const char *path) {
    const char *s = sg_host_get_property_value(h, key);
    char *end = NULL;
    if (s) {
        errno = 0;
        *v = strtod(s, &end);
    }
    if (!s || end == s || *end || errno || !(*v > 0)) {
        snprintf(err, EP_ERRLEN, "platform %.400s: host %s needs a positive property %s", path,
                 sg_host_get_name(h), key);
        return -1;
    }
    return 0;
}

/* Finds the NIC hosts gpu<r>.nic: every GPU has one or none does. With them, traffic between two
 * GPUs of different nodes on different rails is relayed over NVLink to the GPU of the sender's node
 * on the receiver's rail (sim_flows.c), so every node needs a GPU of every local index. */
static int load_nics(sim_platform *p, char err[EP_ERRLEN]) {
    char name[48];
    int found = 0;
    for (int r = 0; r < p->ngpus; r++) {
        snprintf(name, sizeof name, "gpu%d.nic", r);
        found += sg_host_by_name(name) != NULL;
    }
    if (found == 0) return 0;
    p->nic = calloc((size_t)p->ngpus, sizeof *p->nic);
    int nnodes = 0, g = p->gpus_per_node;
    for (int r = 0; r < p->ngpus; r++)
        if (p->node[r] + 1 > nnodes) nnodes = p->node[r] + 1;
    uint8_t *have = calloc((size_t)nnodes * (size_t)g, 1);
    if (!p->nic || !have) {
        free(have);
        snprintf(err, EP_ERRLEN, "out of memory reading platform %.400s", p->path);
        return -1;
    }
    int rc = 0;
    for (int r = 0; r < p->ngpus && rc == 0; r++) {
        snprintf(name, sizeof name, "gpu%d.nic", r);
        p->nic[r] = sg_host_by_name(name);
        if (!p->nic[r]) {
            snprintf(err, EP_ERRLEN,
                     "platform %.300s: host gpu%d has no NIC host %s (give every GPU one, or none)",
                     p->path, r, name);
            rc = -1;
        } else if (p->node[r] < 0 || p->local[r] < 0) {
            snprintf(err, EP_ERRLEN,
                     "platform %.300s: host gpu%d needs properties node >= 0 and "
                     "local_index >= 0 (it has a NIC host)",
                     p->path, r);
            rc = -1;
        } else {
            have[(size_t)p->node[r] * g + p->local[r]] = 1;
        }
    }
    for (size_t i = 0; rc == 0 && i < (size_t)nnodes * g; i++)
        if (!have[i]) {
            snprintf(err, EP_ERRLEN,
                     "platform %.300s: node %d has no GPU of local_index %d (with NIC hosts, every "
                     "node needs all %d: traffic to another rail is relayed in the sender's node)",
                     p->path, (int)(i / g), (int)(i % g), g);
            rc = -1;
        }
    free(have);
    return rc;
}

int sim_platform_load(sim_platform *p, const char *topo, char err[EP_ERRLEN]) {
    memset(p, 0, sizeof *p);
    if (sim_find_data("topos", topo, ".xml", p->path, sizeof p->path) != 0) {
        struct stat st;
        if (stat(topo, &st) != 0 && errno != ENOENT && errno != ENOTDIR)
            snprintf(err, EP_ERRLEN, "--topo %s: %s", topo, strerror(errno));
        else
            snprintf(err, EP_ERRLEN, "--topo %s: no such platform file or bundled topology", topo);
        return -1;
    }
    const char *base = strrchr(p->path, '/');
    snprintf(p->name, sizeof p->name, "%.200s", base ? base + 1 : p->path);
    char *dot = strstr(p->name, ".xml");
    if (dot) *dot = 0;
    /* SimGrid crashes on some malformed platforms: it sees only files that pass our check */
    if (sim_platform_check_file(p->path, err) != 0) return -1;
    char msg[EP_ERRLEN];
    if (sim_platform_load_file(p->path, msg, sizeof msg) != 0) {
        char *nl = strchr(msg, '\n');
        if (nl) *nl = 0;
        snprintf(err, EP_ERRLEN, "platform %.250s is not a valid SimGrid platform: %.200s", p->path,
                 msg);
        return -1;
    }
    const char *cal = sg_zone_get_property_value(sg_zone_get_root(), "calibration");
    snprintf(p->calib, sizeof p->calib, "%.250s", cal ? cal : "");
    int n = 0;
    char name[32];
    for (;;) {
        snprintf(name, sizeof name, "gpu%d", n);
        if (!sg_host_by_name(name)) break;
        n++;
    }
    if (n == 0) {
        snprintf(err, EP_ERRLEN, "platform %.400s has no GPU hosts (named gpu0, gpu1, ...)",
                 p->path);
        return -1;
    }
    p->ngpus = n;
    p->host = calloc((size_t)n, sizeof *p->host);
    p->node = calloc((size_t)n, sizeof *p->node);
    p->local = calloc((size_t)n, sizeof *p->local);
    p->peak_flops = calloc((size_t)n, sizeof *p->peak_flops);
    p->hbm_bw = calloc((size_t)n, sizeof *p->hbm_bw);
    p->sm_count = calloc((size_t)n, sizeof *p->sm_count);
    if (!p->host || !p->node || !p->local || !p->peak_flops || !p->hbm_bw || !p->sm_count) {
        snprintf(err, EP_ERRLEN, "out of memory reading platform %.400s", p->path);
        return -1;
    }
    int maxlocal = 0;
    for (int r = 0; r < n; r++) {
        snprintf(name, sizeof name, "gpu%d", r);
        sg_host_t h = sg_host_by_name(name);
        double v;
        p->host[r] = h;
        if (prop_num(h, "peak_flops", &p->peak_flops[r], err, p->path) ||
            prop_num(h, "hbm_bw", &p->hbm_bw[r], err, p->path) ||
            prop_num(h, "sm_count", &v, err, p->path))
            return -1;
        p->sm_count[r] = (int)v;
        if (sg_host_get_property_value(h, "hbm_bytes")) { /* optional: the memory check */
            if (prop_num(h, "hbm_bytes", &v, err, p->path)) return -1;
            if (p->hbm_bytes == 0 || v < p->hbm_bytes) p->hbm_bytes = v;
        }
        const char *nd = sg_host_get_property_value(h, "node");
        const char *li = sg_host_get_property_value(h, "local_index");
        /* without node properties every GPU is its own node (the check made them integers) */
        p->node[r] = nd ? (int)strtol(nd, NULL, 10) : r;
        p->local[r] = li ? (int)strtol(li, NULL, 10) : 0;
        if (p->local[r] + 1 > maxlocal) maxlocal = p->local[r] + 1;
    }
    p->gpus_per_node = maxlocal;
    if (load_nics(p, err) != 0) return -1;
    XBT_DEBUG("platform %.400s: %d GPUs, %d per node, %s", p->path, n, maxlocal,
              p->nic ? "NIC hosts" : "flat");
    return 0;
}

void sim_platform_free(sim_platform *p) {
    free(p->host);
    free(p->nic);
    free(p->node);
    free(p->local);
    free(p->peak_flops);
    free(p->hbm_bw);
    free(p->sm_count);
    memset(p, 0, sizeof *p);
}
