/* config_derived: values read off a configuration rather than set by a flag (the dispatcher
 * backend, the microbatch count). Its own file so that the parser (config.c) and the flag table
 * (config_flags.c) both use it without using each other in a circle. */
#include "ep_config.h"

ep_backend ep_config_backend(const ep_config *cfg) {
    switch (cfg->moe_token_dispatcher_type) {
    case EP_DISPATCHER_ALLGATHER:
        return EP_BACKEND_ALLGATHER;
    case EP_DISPATCHER_FLEX:
        return cfg->moe_flex_dispatcher_backend == EP_FLEX_HYBRIDEP ? EP_BACKEND_HYBRIDEP
                                                                    : EP_BACKEND_DEEPEP;
    case EP_DISPATCHER_ALLTOALL:
        break;
    }
    return EP_BACKEND_ALLTOALL;
}

const char *ep_backend_name(ep_backend b) {
    switch (b) {
    case EP_BACKEND_ALLTOALL:
        return "alltoall";
    case EP_BACKEND_ALLGATHER:
        return "allgather";
    case EP_BACKEND_DEEPEP:
        return "deepep";
    case EP_BACKEND_HYBRIDEP:
        return "hybridep";
    }
    return "?";
}

int ep_config_num_microbatches(const ep_config *cfg) {
    int dp = cfg->data_parallel_size > 0 ? cfg->data_parallel_size : 1;
    int per = cfg->micro_batch_size * dp;
    return per > 0 ? cfg->global_batch_size / per : 0;
}
