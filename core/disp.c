/* The dispatcher backends' table (ep_disp.h): a new backend is its file core/disp_<name>.c, its
 * row here and its flag values (core/config_flags.c). */
#include "ep_disp.h"

static const ep_dispatcher *const k_disp[] = {
    [EP_BACKEND_ALLTOALL] = &ep_disp_alltoall,
    [EP_BACKEND_ALLGATHER] = &ep_disp_allgather,
    [EP_BACKEND_DEEPEP] = &ep_disp_deepep,
    [EP_BACKEND_HYBRIDEP] = &ep_disp_hybridep,
};
_Static_assert(sizeof k_disp / sizeof k_disp[0] == EP_BACKEND_HYBRIDEP + 1,
               "every dispatcher backend has its row");

const ep_dispatcher *ep_disp_of(const ep_config *c) {
    return k_disp[ep_config_backend(c)];
}
