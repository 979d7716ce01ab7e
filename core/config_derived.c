/* config_derived: values read off a configuration rather than set by a flag (the dispatcher
 * backend, the microbatch count), and the one home of the "0 = derived" defaults: ep_config_resolve
 * writes each field's effective value, so that no reader re-defaults one. Its own file so that the
 * parser (config.c) and the flag table (config_flags.c) both use it without using each other in a
 * circle. */
#include "ep_config.h"

int ep_config_expert_tensor_parallel(const ep_config *cfg) {
    return cfg->expert_tensor_parallel_size > 0 ? cfg->expert_tensor_parallel_size
                                                : cfg->tensor_model_parallel_size;
}

int ep_config_expert_data_parallel(const ep_config *cfg) {
    long long stage = (long long)cfg->tensor_model_parallel_size * cfg->context_parallel_size *
                      cfg->data_parallel_size,
              ex = (long long)ep_config_expert_tensor_parallel(cfg) *
                   cfg->expert_model_parallel_size;
    return ex > 0 && stage % ex == 0 ? (int)(stage / ex) : 1;
}

double ep_config_mamba_heads(const ep_config *cfg) {
    if (cfg->mamba_num_heads > 0) return cfg->mamba_num_heads;
    return 2.0 * cfg->hidden_size / cfg->mamba_head_dim; /* Mamba-2's expand factor 2 */
}

void ep_config_resolve(ep_config *cfg) {
    if (cfg->ffn_hidden_size == 0) cfg->ffn_hidden_size = 4 * cfg->hidden_size;
    if (cfg->kv_channels == 0 && cfg->num_attention_heads > 0)
        cfg->kv_channels = cfg->hidden_size / cfg->num_attention_heads;
    if (cfg->num_query_groups == 0) cfg->num_query_groups = cfg->num_attention_heads;
    if (cfg->moe_ffn_hidden_size == 0) cfg->moe_ffn_hidden_size = cfg->ffn_hidden_size;
    cfg->expert_tensor_parallel_size = ep_config_expert_tensor_parallel(cfg);
    if (cfg->seqlen_mean == 0) cfg->seqlen_mean = cfg->seq_length / 2 > 0 ? cfg->seq_length / 2 : 1;
    if (cfg->quick_geglu) cfg->swiglu = 1; /* swiglu: the MLP is gated (fc1 2F wide) */
}

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
    int per = cfg->micro_batch_size * cfg->data_parallel_size;
    return per > 0 ? cfg->global_batch_size / per : 0;
}
