/* sim_platform_check: a platform file checked before SimGrid reads it.
 *
 * SimGrid aborts or crashes on some malformed platforms (a missing route, a link declared twice, a
 * node property that is not a number), so epsim reads the file first with its own small XML reader
 * and refuses, with one line naming the file, the line and the problem, anything it does not
 * accept (docs/epsim.md, "Platform files" and "Failure behaviour"):
 * - text only (no NUL or control bytes), well-formed XML, at most 64 MiB;
 * - the SimGrid 4.1 elements epsim uses: platform, zone (routing Full, Floyd, Dijkstra,
 *   DijkstraCache or None), host, router, link, route, zoneRoute, link_ctn, prop; nothing else
 *   (no cluster, config, trace or file references);
 * - unique names (hosts, routers and zones share one name space, links another; a SPLITDUPLEX link
 *   X also names X_UP and X_DOWN), every reference to a name declared before it;
 * - numbers where numbers belong: speed, bandwidth, latency with SimGrid's units, the GPU
 *   properties peak_flops, hbm_bw, sm_count, hbm_bytes, node, local_index, gpus_per_node;
 * - GPU hosts gpu0..gpuN-1 without gaps, NIC hosts gpu<r>.nic for all of them or none, with NIC
 *   hosts a node and local_index on every GPU, no two GPUs in one slot, every node complete;
 * - a route (through the zones, their gateways and graph routing) between every two GPU hosts that
 *   exchange data: every two with NIC hosts on the same node, every two without; and between the
 *   NIC hosts of one local index on different nodes.
 * Plain C without SimGrid, so that the fuzz target (tests/fuzz/fuzz_platform.c) runs it alone.
 */
#ifndef SIM_PLATFORM_CHECK_H
#define SIM_PLATFORM_CHECK_H

#include <stddef.h>

#include "ep_config.h"

#define SIM_PLATFORM_MAX_BYTES (64L << 20)

/* Checks the platform text (len bytes, no terminating NUL needed) of file `name`. Returns 0, or -1
 * with one line in err. */
int sim_platform_check_text(const char *text, size_t len, const char *name, char err[EP_ERRLEN]);

/* Reads and checks a platform file (a regular file). Returns 0, or -1 with one line in err. */
int sim_platform_check_file(const char *path, char err[EP_ERRLEN]);

#endif
