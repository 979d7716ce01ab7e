/* ep_layers: the logical layers of a model, from --hybrid-override-pattern or plain GPT flags.
 *
 * Grammar (docs/schedule.md, section 5): symbols M (Mamba), * (attention), D (DS-attention), G (GDN),
 * - (dense MLP), E (MoE); | marks a pipeline-stage boundary; / separates the MTP layers' pattern.
 * A bracket group [..] is one logical layer, e.g. [*E], M[M*]-; groups do not nest, are not empty,
 * and E or - may appear only as the last symbol of a group. Outside brackets, each symbol is one
 * layer.
 */
#ifndef EP_LAYERS_H
#define EP_LAYERS_H

#include "ep_config.h"

#define EP_MAX_BLOCKS 8 /* symbols in one logical layer */
#define EP_MAX_VSTAGES 1024 /* virtual pipeline stages (PP x VPP) of an explicit split */

typedef struct {
    char blocks[EP_MAX_BLOCKS + 1]; /* symbols in order, NUL-terminated, e.g. "*E", "M", "-" */
    int nblocks;
    int is_moe;   /* last block is E */
    int is_mtp;   /* a multi-token-prediction layer (after the decoder) */
    int pp_stage; /* stage from | markers, -1 when the pattern has none */
} ep_layer;

typedef struct {
    int num_layers; /* decoder layers */
    int num_mtp;    /* MTP layers, appended after the decoder layers */
    int has_stage_marks;
    int first_stage_layers; /* --decoder-first-pipeline-num-layers (0 = even split) */
    int last_stage_layers;  /* --decoder-last-pipeline-num-layers (0 = even split) */
    /* an explicit split (--pipeline-model-parallel-layout, --account-for-*-in-pipeline-split):
     * virtual stage v = chunk x PP + stage holds layers [vstage_first[v], + vstage_count[v]),
     * MTP layers included; 0 stages: the rules above */
    int nvstages;
    int vstage_first[EP_MAX_VSTAGES], vstage_count[EP_MAX_VSTAGES];
    ep_layer layers[EP_MAX_LAYERS];
} ep_layer_plan;

/* Virtual stages of a --pipeline-model-parallel-layout (Megatron's grammar: stages between |,
 * E t m L per stage, x*n and (...)*n repeats, commas and spaces cosmetic), or -1 with one line in
 * err when it does not parse. */
int ep_layout_stages(const char *layout, char err[EP_ERRLEN]);

/* Parses a hybrid pattern. Returns 0, or -1 with one line naming the flag and the position. */
int ep_pattern_parse(const char *pattern, ep_layer_plan *out, char err[EP_ERRLEN]);

/* Builds the plan for a config: the pattern if set, else GPT layers "*E" / "*-" following
 * --moe-layer-freq, plus --mtp-num-layers MTP layers (each "*E" or "*-" like the last layer). */
int ep_layer_plan_build(const ep_config *cfg, ep_layer_plan *out, char err[EP_ERRLEN]);

/* Resolves --moe-layer-freq into is_moe[0..num_layers): an integer N (layer i is MoE when
 * i % N == 0, as Megatron counts), a list "[1,0,1,...]", or a sum of repeated lists
 * "([0]*3+[1]*58)" (surrounding quotes and parentheses are ignored). The list length must equal
 * num_layers. Returns 0, or -1 with one line naming the flag. */
int ep_moe_layer_freq_parse(const char *freq, int num_layers, int *is_moe, char err[EP_ERRLEN]);

/* Resolves --window-attn-skip-freq into is_swa[0..num_layers) (Megatron's
 * is_layer_window_attention): "" every layer has the window; an integer N one full-attention
 * layer after N-1 windowed ones (layer_number % N != 0, layer_number from 1); a list as
 * --moe-layer-freq's, 1 = windowed. Returns 0, or -1 with one line naming the flag. */
int ep_window_layers_parse(const char *freq, int num_layers, int *is_swa, char err[EP_ERRLEN]);

/* The grammar both share: an integer N >= 1 (*every = N, vals untouched) or a list, whose values
 * go into vals (*every = 0); errors name flag. */
int ep_layer_freq_parse(const char *flag, const char *freq, int num_layers, int *vals, int *every,
                        char err[EP_ERRLEN]);

/* Layers [first, first+count) held by pipeline stage `stage` of `pp` stages, model chunk `chunk` of
 * `vpp` (Megatron's interleaved assignment: chunk c of stage s holds the (c*pp+s)-th slice). With
 * first/last_stage_layers set, the first and last stage hold that many layers (split evenly over
 * their chunks) and the stages between share the rest, as Megatron-LM's uneven pipeline does: chunk
 * c of every stage lies in the c-th of vpp equal runs of layers. MTP layers belong to the last
 * stage's last chunk. With | marks in the pattern, stage `stage` holds the layers between its marks
 * (vpp must be 1, as ep_config_validate requires). */
void ep_layer_range(const ep_layer_plan *plan, int pp, int vpp, int stage, int chunk, int *first,
                    int *count);

#endif
