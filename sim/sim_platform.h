/* sim_platform: the SimGrid platform a run uses - file lookup, loading, and the GPU hosts.
 *
 * A GPU is a host named gpu<rank> with properties peak_flops, hbm_bw, sm_count, node and
 * local_index, optionally hbm_bytes (docs/epsim.md, "Platform files"); rank r runs on gpu<r>. The
 * root zone may name a default calibration (property calibration: a file, or a name under
 * traces/calib/). A platform may give every GPU a NIC host gpu<rank>.nic: traffic between nodes
 * then runs between NIC hosts (each rail its own small zone), traffic inside a node between GPU
 * hosts; without them (a flat platform) the GPU hosts carry both.
 */
#ifndef SIM_PLATFORM_H
#define SIM_PLATFORM_H

#include <simgrid/forward.h>
#include "ep_config.h"

typedef struct {
    char path[4096]; /* resolved platform file */
    char name[256];  /* file name without directory and .xml */
    char calib[256]; /* the zone's "calibration" property (default calibration), or "" */
    int ngpus;
    int gpus_per_node;
    sg_host_t *host;   /* [ngpus] */
    sg_host_t *nic;    /* [ngpus] host gpu<r>.nic, or NULL: the platform has none */
    int *node, *local; /* [ngpus] node index and index inside the node */
    double *peak_flops, *hbm_bw;
    int *sm_count;
    double hbm_bytes; /* the smallest GPU memory (property hbm_bytes), 0 when not given */
} sim_platform;

/* Finds a data file: `arg` itself if it names an existing file, else <dir>/<arg><suffix> for the
 * bundled data dirs of `kind` ("topos", "configs" or "calib"): $EPSIM_DATA_DIR/<kind>, <exe
 * dir>/<kind>, <exe dir>/../share/epsim/<kind>, and the source tree compiled in. Returns 0 or -1.
 */
int sim_find_data(const char *kind, const char *arg, const char *suffix, char *out, size_t len);
/* The same without `arg` itself: only the bundled data dirs (a file of that name in the current
 * directory does not shadow a bundled one). */
int sim_find_bundled(const char *kind, const char *arg, const char *suffix, char *out, size_t len);

/* The SimGrid host of endpoint id of a transfer (sim_net.h): GPU id below ngpus, the NIC host of
 * GPU id - ngpus above. */
static inline sg_host_t sim_platform_endpoint(const sim_platform *p, int id) {
    return id < p->ngpus ? p->host[id] : p->nic[id - p->ngpus];
}

/* Resolves the platform, checks it (sim_platform_check.h) and only then loads it into SimGrid
 * (which must be initialised), and reads the GPU hosts. Returns 0, or -1 with one line in err. */
int sim_platform_load(sim_platform *p, const char *topo, char err[EP_ERRLEN]);
void sim_platform_free(sim_platform *p);

/* Loads a platform file, turning SimGrid's exceptions into an error line (sim_platform_load.cpp).
 */
int sim_platform_load_file(const char *path, char *err, size_t len);

/* Seals the loaded platform (routes can be queried before a simulation runs). */
void sim_platform_seal(void);

#endif
