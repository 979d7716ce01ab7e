/* Huge-page advice for large arrays (sim_bigmem.h). */
#define _DEFAULT_SOURCE /* madvise */
#include "sim_bigmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE ((uintptr_t)2 << 20)

/* Advises the whole huge pages inside [p, p + bytes): a large malloc block is a fresh mapping
 * that nothing has touched yet, so its pages are faulted in huge from the first write. */
static void *advise(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    if (p && bytes >= 2 * HUGE_PAGE) {
        uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
        uintptr_t hi = ((uintptr_t)p + bytes) & ~(HUGE_PAGE - 1);
        if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* advice only */
    }
#endif
    return p;
}

void *sim_big_malloc(size_t bytes) {
    return advise(malloc(bytes), bytes);
}

void *sim_big_calloc(size_t n, size_t size) {
    return advise(calloc(n, size), n * size);
}
