/* sim_bigmem: the engine's per-op arrays (hundreds of MiB on dgx1024), asked to be backed by
 * transparent huge pages. Events jump between the regions of 1024 ranks, and with 4 KiB pages
 * nearly every such access also missed the TLB. The memory is plain malloc memory: free() and
 * realloc() work as usual, and where the kernel offers no huge pages nothing changes. */
#ifndef SIM_BIGMEM_H
#define SIM_BIGMEM_H

#include <stddef.h>

void *sim_big_malloc(size_t bytes);
void *sim_big_calloc(size_t n, size_t size);

#endif
