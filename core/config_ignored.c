/* config_ignored: Megatron-LM flags that both programs accept and ignore, so that a training
 * script's arguments can be pasted as they are (docs/configuration.md, "Megatron-LM flags
 * accepted without effect").
 *
 * Two kinds. Flags that do not change what a training step runs or how long it takes (learning
 * rate, logging, checkpoints, data, dropout, losses). And flags that choose a kernel
 * implementation: epsim times kernels from the calibration, epref runs its own kernels, so the
 * choice changes neither; calibrate with the kernels you train with. Anything that changes the
 * step and is not modelled stays an unknown flag: exit 2; the Megatron-LM ones a published launch
 * line uses are listed below with the reason, which the error says.
 */
#include <stdio.h>
#include <string.h>

#include "ep_config.h"

/* short names keep the table one entry per line */
#define B EP_IGNORED_BOOL
#define V EP_IGNORED_VALUE
#define M EP_IGNORED_VALUES

static const struct {
    const char *name;
    ep_ignored_arity arity;
} k_ignored[] = {
    /* optimizer and learning-rate schedule */
    {"lr", V},
    {"min-lr", V},
    {"lr-decay-style", V},
    {"lr-decay-iters", V},
    {"lr-warmup-iters", V},
    {"lr-warmup-fraction", V},
    {"lr-warmup-init", V},
    {"weight-decay", V},
    {"adam-beta1", V},
    {"adam-beta2", V},
    {"adam-eps", V},
    {"clip-grad", V},
    {"init-method-std", V},
    /* numerics of the model that cost nothing measurable here */
    {"bf16", B},
    {"attention-dropout", V},
    {"hidden-dropout", V},
    {"norm-epsilon", V},
    {"normalization", V},
    {"position-embedding-type", V},
    {"use-rotary-position-embeddings", B},
    {"no-position-embedding", B},
    {"rotary-base", V},
    {"rotary-percent", V},
    {"rotary-scaling-factor", V},
    {"max-position-embeddings", V},
    {"make-vocab-size-divisible-by", V},
    {"untie-embeddings-and-output-weights", B},
    {"apply-layernorm-1p", B},
    {"calculate-per-token-loss", B},
    {"accumulate-allreduce-grads-in-fp32", B},
    {"attention-softmax-in-fp32", B},
    {"mscale", V}, /* YaRN rotary scaling */
    {"mscale-all-dim", V},
    {"original-max-position-embeddings", V},
    {"beta-fast", V},
    {"beta-slow", V},
    /* MoE losses and router numerics (the routing itself is --routing) */
    {"moe-z-loss-coeff", V},
    {"moe-router-bias-update-rate", V},
    {"moe-router-topk-scaling-factor", V},
    {"moe-router-pre-softmax", B},
    {"moe-router-dtype", V},
    {"moe-input-jitter-eps", V},
    {"mtp-loss-scaling-factor", V},
    /* kernel choices: the calibration (epsim) or epref's kernels decide the time */
    {"use-flash-attn", B},
    {"attention-backend", V},
    {"transformer-impl", V},
    {"moe-use-legacy-grouped-gemm", B},
    {"moe-router-fusion", B},
    {"cross-entropy-loss-fusion", B},
    {"cross-entropy-fusion-impl", V},
    {"no-masked-softmax-fusion", B},
    {"no-bias-gelu-fusion", B},
    {"no-bias-swiglu-fusion", B},
    {"no-bias-dropout-fusion", B},
    {"no-rope-fusion", B},
    {"no-gradient-accumulation-fusion", B},
    {"use-mcore-models", B},
    {"apply-rope-fusion", B},
    {"moe-apply-probs-on-input", B},
    {"te-rng-tracker", B},
    /* data, tokenizer */
    {"data-path", M},
    {"split", V},
    {"data-cache-path", V},
    {"mock-data", B},
    {"num-workers", V},
    {"tokenizer-type", V},
    {"tokenizer-model", V},
    {"vocab-file", V},
    {"merge-file", V},
    {"eod-mask-loss", B},
    {"no-create-attention-mask-in-dataloader", B},
    {"no-mmap-bin-files", B},
    {"dataloader-type", V},
    {"num-dataset-builder-threads", V},
    {"sft", B},
    /* checkpoints, logging, process control */
    {"save", V},
    {"load", V},
    {"save-interval", V},
    {"ckpt-format", V},
    {"no-load-optim", B},
    {"no-load-rng", B},
    {"no-save-optim", B},
    {"no-save-rng", B},
    {"use-checkpoint-args", B},
    {"use-dist-ckpt", B},
    {"dist-ckpt-format", V},
    {"dist-ckpt-strictness", V},
    {"auto-detect-ckpt-format", B},
    {"async-save", B},
    {"ckpt-fully-parallel-save", B},
    {"ckpt-fully-parallel-load", B},
    {"ckpt-assume-constant-structure", B},
    {"pretrained-checkpoint", V},
    {"finetune", B},
    {"override-opt_param-scheduler", B},
    {"eval-interval", V},
    {"eval-iters", V},
    {"log-interval", V},
    {"log-throughput", B},
    {"log-params-norm", B},
    {"log-num-zeros-in-grad", B},
    {"log-timers-to-tensorboard", B},
    {"log-memory-to-tensorboard", B},
    {"log-validation-ppl-to-tensorboard", B},
    {"tensorboard-queue-size", V},
    {"timing-log-level", V},
    {"moe-per-layer-logging", B},
    {"log-straggler", B},
    {"disable-straggler-on-startup", B},
    {"profile", B},
    {"use-pytorch-profiler", B},
    {"profile-step-start", V},
    {"profile-step-end", V},
    {"profile-ranks", M},
    {"record-memory-history", B},
    {"tensorboard-dir", V},
    {"wandb-project", V},
    {"wandb-exp-name", V},
    {"wandb-save-dir", V},
    {"distributed-backend", V},
    {"distributed-timeout-minutes", V},
    {"exit-duration-in-mins", V},
    {"exit-interval", V},
    {"manual-gc", B},
    {"check-for-nan-in-loss-and-grad", B},
    {"no-check-for-nan-in-loss-and-grad", B},
    {"manual-gc-interval", V},
    {"empty-unused-memory-level", V},
    {"use-cpu-initialization", B},
    {"rerun-mode", V},
    {"enable-experimental", B},
};

ep_ignored_arity ep_config_ignored_flag(const char *name) {
    for (size_t i = 0; i < sizeof k_ignored / sizeof k_ignored[0]; i++)
        if (strcmp(k_ignored[i].name, name) == 0) return k_ignored[i].arity;
    return EP_IGNORED_NOT;
}

/* Megatron-LM flags that change the step and are not modelled, with why (the error names it) */
static const struct {
    const char *name, *why;
} k_unmodelled[] = {
    {"softmax-type", "the off-by-one or learnable softmax (GPT-OSS's attention sinks) changes the "
                     "attention kernel, whose cost was not measured"},
    {"fp16", "only bf16 and FP8 steps are modelled (fp16's loss scaling and its kernels are not)"},
    {"cpu-offloading", "moving activations and weights to the host over PCIe is not modelled"},
    {"moe-latent-size", "the latent MoE's down and up projections around the experts are not "
                        "modelled"},
    {"no-align-param-gather", "each pipeline stage gathering its parameters at its own first "
                              "forward is not modelled: epsim gathers them at the start of the "
                              "iteration, as Megatron-LM does by default with interleaving"},
};

const char *ep_config_unmodelled_flag(const char *name) {
    for (size_t i = 0; i < sizeof k_unmodelled / sizeof k_unmodelled[0]; i++)
        if (strcmp(k_unmodelled[i].name, name) == 0) return k_unmodelled[i].why;
    return NULL;
}

void ep_config_unknown_flag(const char *name, char err[EP_ERRLEN]) {
    const char *why = ep_config_unmodelled_flag(name);
    if (why)
        snprintf(err, EP_ERRLEN, "--%s is Megatron-LM's but not modelled: %s", name, why);
    else
        snprintf(err, EP_ERRLEN, "unknown flag --%s", name);
}
