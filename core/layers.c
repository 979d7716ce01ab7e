/* layers: the logical layers of a model and their pipeline placement.
 *
 * A hybrid pattern (docs/schedule.md, section 5) lists layers by symbol; a bracket group is one logical
 * layer whose blocks run in order (the EP-overlap schedule puts all but the last block in the
 * pre_dispatch node, so E or - may only close a group). GPT models are "*E" / "*-" layers chosen
 * by --moe-layer-freq. Stage placement follows Megatron's interleaved assignment.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_layers.h"

#define PFX "--hybrid-override-pattern: "

static int is_symbol(char c) {
    return c == 'M' || c == '*' || c == 'D' || c == 'G' || c == '-' || c == 'E';
}

/* A logical layer under construction: a bracket group or an MTP segment. */
typedef struct {
    ep_layer layer;
    int open_pos;   /* 1-based position where it started */
    int closer_pos; /* position of an E or - already in it (0 = none) */
    char closer;
} builder;

static int builder_add(builder *b, char sym, int pos, const char *what, char err[EP_ERRLEN]) {
    if (b->closer_pos) {
        snprintf(err, EP_ERRLEN, PFX "%c at position %d must be the last symbol of its %s",
                 b->closer, b->closer_pos, what);
        return -1;
    }
    if (b->layer.nblocks >= EP_MAX_BLOCKS) {
        snprintf(err, EP_ERRLEN, PFX "%s at position %d has more than %d symbols", what,
                 b->open_pos, EP_MAX_BLOCKS);
        return -1;
    }
    b->layer.blocks[b->layer.nblocks++] = sym;
    b->layer.blocks[b->layer.nblocks] = 0;
    if (sym == 'E' || sym == '-') {
        b->closer_pos = pos;
        b->closer = sym;
    }
    return 0;
}

static void builder_reset(builder *b, int pos) {
    memset(b, 0, sizeof *b);
    b->open_pos = pos;
}

static int plan_append(ep_layer_plan *p, const ep_layer *l, int mtp, char err[EP_ERRLEN]) {
    int n = p->num_layers + p->num_mtp;
    if (n >= EP_MAX_LAYERS) {
        snprintf(err, EP_ERRLEN, PFX "more than %d layers", EP_MAX_LAYERS);
        return -1;
    }
    p->layers[n] = *l;
    p->layers[n].is_moe = l->nblocks > 0 && l->blocks[l->nblocks - 1] == 'E';
    p->layers[n].is_mtp = mtp;
    if (mtp)
        p->num_mtp++;
    else
        p->num_layers++;
    return 0;
}

static void describe(char c, char *buf, size_t n) {
    if (c > 32 && c < 127)
        snprintf(buf, n, "'%c'", c);
    else
        snprintf(buf, n, "byte 0x%02x", (unsigned char)c);
}

int ep_pattern_parse(const char *pattern, ep_layer_plan *out, char err[EP_ERRLEN]) {
    memset(out, 0, sizeof *out);
    if (!pattern || !*pattern) {
        snprintf(err, EP_ERRLEN, PFX "the pattern is empty");
        return -1;
    }
    const char *mtp_sep = strchr(pattern, '/');
    const char *bar = strchr(pattern, '|');
    out->has_stage_marks = bar && (!mtp_sep || bar < mtp_sep);
    int stage = 0, stage_layers = 0, in_group = 0, in_mtp = 0, last_bar = 0;
    int group_pos = 0, group_first = 0; /* where the open group started; blocks before it */
    builder b;
    builder_reset(&b, 0);
    for (int i = 0; pattern[i]; i++) {
        char c = pattern[i];
        int pos = i + 1;
        if (c == '[') {
            if (in_group) {
                snprintf(err, EP_ERRLEN, PFX "nested [ at position %d (groups do not nest)", pos);
                return -1;
            }
            in_group = 1;
            if (!in_mtp) builder_reset(&b, pos);
            group_pos = pos;
            group_first = b.layer.nblocks;
        } else if (c == ']') {
            if (!in_group) {
                snprintf(err, EP_ERRLEN, PFX "unbalanced ] at position %d", pos);
                return -1;
            }
            in_group = 0;
            if (b.layer.nblocks == group_first) {
                snprintf(err, EP_ERRLEN, PFX "empty group [] at position %d", group_pos);
                return -1;
            }
            if (in_mtp) continue; /* brackets inside an MTP segment only group visually */
            b.layer.pp_stage = out->has_stage_marks ? stage : -1;
            if (plan_append(out, &b.layer, 0, err) != 0) return -1;
            stage_layers++;
        } else if (c == '|') {
            if (in_group || in_mtp) {
                snprintf(err, EP_ERRLEN, PFX "| at position %d is inside %s", pos,
                         in_group ? "a bracket group" : "the MTP pattern (after /)");
                return -1;
            }
            if (stage_layers == 0) {
                snprintf(err, EP_ERRLEN, PFX "empty pipeline stage before | at position %d", pos);
                return -1;
            }
            stage++;
            stage_layers = 0;
            last_bar = pos;
        } else if (c == '/') {
            if (in_group) {
                snprintf(err, EP_ERRLEN, PFX "/ at position %d is inside a bracket group", pos);
                return -1;
            }
            if (!in_mtp && stage_layers == 0) {
                snprintf(err, EP_ERRLEN, PFX "no decoder layers before / at position %d", pos);
                return -1;
            }
            if (in_mtp) { /* close the previous MTP segment */
                if (b.layer.nblocks == 0) {
                    snprintf(err, EP_ERRLEN, PFX "empty MTP pattern after / at position %d",
                             b.open_pos);
                    return -1;
                }
                if (plan_append(out, &b.layer, 1, err) != 0) return -1;
            }
            in_mtp = 1;
            builder_reset(&b, pos);
            b.layer.pp_stage = out->has_stage_marks ? stage : -1;
        } else if (is_symbol(c)) {
            if (in_group || in_mtp) {
                if (builder_add(&b, c, pos, in_mtp ? "MTP pattern" : "group", err) != 0) return -1;
            } else {
                ep_layer l = {.nblocks = 1, .pp_stage = out->has_stage_marks ? stage : -1};
                l.blocks[0] = c;
                if (plan_append(out, &l, 0, err) != 0) return -1;
                stage_layers++;
            }
        } else {
            char what[32];
            describe(c, what, sizeof what);
            snprintf(err, EP_ERRLEN,
                     PFX "unknown symbol %s at position %d (expected M * D G - E [ ] | /)", what,
                     pos);
            return -1;
        }
    }
    if (in_group) {
        snprintf(err, EP_ERRLEN, PFX "unbalanced [ at position %d (no closing ])", group_pos);
        return -1;
    }
    if (in_mtp) {
        if (b.layer.nblocks == 0) {
            snprintf(err, EP_ERRLEN, PFX "empty MTP pattern after / at position %d", b.open_pos);
            return -1;
        }
        if (plan_append(out, &b.layer, 1, err) != 0) return -1;
    } else if (stage_layers == 0) {
        snprintf(err, EP_ERRLEN, PFX "empty pipeline stage after | at position %d", last_bar);
        return -1;
    }
    return 0;
}

/* Skips spaces; reads a non-negative integer of at most 7 digits. */
static int read_uint(const char **p, int *v) {
    while (**p == ' ')
        (*p)++;
    if (**p < '0' || **p > '9') return -1;
    long x = 0;
    int digits = 0;
    while (**p >= '0' && **p <= '9') {
        if (++digits > 7) return -1;
        x = x * 10 + (**p - '0');
        (*p)++;
    }
    while (**p == ' ')
        (*p)++;
    *v = (int)x;
    return 0;
}

int ep_layer_freq_parse(const char *flag, const char *freq, int num_layers, int *vals_out,
                        int *every, char err[EP_ERRLEN]) {
    if (num_layers < 1 || num_layers > EP_MAX_LAYERS) {
        snprintf(err, EP_ERRLEN, "--num-layers %d is outside 1..%d", num_layers, EP_MAX_LAYERS);
        return -1;
    }
    /* Strip shell quotes and the outer parentheses Megatron's Python expression may carry. */
    char buf[256];
    size_t len = 0;
    for (const char *s = freq; *s && len + 1 < sizeof buf; s++)
        if (*s != '\'' && *s != '"' && *s != ' ' && *s != '\t') buf[len++] = *s;
    buf[len] = 0;
    char *p0 = buf;
    while (len >= 2 && p0[0] == '(' && p0[len - 1] == ')') {
        p0[len - 1] = 0;
        p0++;
        len -= 2;
    }
    const char *p = p0;
    int n;
    *every = 0;
    if (read_uint(&p, &n) == 0 && *p == 0) {
        if (n < 1) {
            snprintf(err, EP_ERRLEN, "%s %d must be >= 1", flag, n);
            return -1;
        }
        *every = n;
        return 0;
    }
    int count = 0;
    p = p0;
    for (;;) {
        int vals[EP_MAX_LAYERS], nv = 0, rep = 1;
        if (*p != '[') goto syntax;
        p++;
        for (;;) {
            int v;
            if (read_uint(&p, &v) != 0 || v > 1) goto syntax;
            if (nv >= EP_MAX_LAYERS) goto too_long;
            vals[nv++] = v;
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == ']') break;
            goto syntax;
        }
        p++;
        if (*p == '*') {
            p++;
            if (read_uint(&p, &rep) != 0) goto syntax;
        }
        for (int r = 0; r < rep; r++)
            for (int j = 0; j < nv; j++) {
                if (count >= num_layers) goto too_long;
                vals_out[count++] = vals[j];
            }
        if (*p == 0) break;
        if (*p != '+') goto syntax;
        p++;
    }
    if (count != num_layers) {
        snprintf(err, EP_ERRLEN, "%s lists %d layers but --num-layers is %d", flag, count,
                 num_layers);
        return -1;
    }
    return 0;
too_long:
    snprintf(err, EP_ERRLEN, "%s lists more layers than --num-layers %d", flag, num_layers);
    return -1;
syntax:
    snprintf(err, EP_ERRLEN, "%s '%.100s' is not N, [0/1,...] or ([0]*a+[1]*b) (near '%.20s')",
             flag, freq, p);
    return -1;
}

int ep_moe_layer_freq_parse(const char *freq, int num_layers, int *is_moe, char err[EP_ERRLEN]) {
    int every;
    if (ep_layer_freq_parse("--moe-layer-freq", freq, num_layers, is_moe, &every, err) != 0)
        return -1;
    for (int i = 0; every && i < num_layers; i++)
        is_moe[i] = i % every == 0;
    return 0;
}

int ep_window_layers_parse(const char *freq, int num_layers, int *is_swa, char err[EP_ERRLEN]) {
    int every;
    if (!freq[0]) { /* every layer */
        for (int i = 0; i < num_layers; i++)
            is_swa[i] = 1;
        return 0;
    }
    if (ep_layer_freq_parse("--window-attn-skip-freq", freq, num_layers, is_swa, &every, err) != 0)
        return -1;
    for (int i = 0; every && i < num_layers; i++)
        is_swa[i] = (i + 1) % every != 0; /* Megatron's layer_number is 1-based */
    return 0;
}

static int plan_layers(const ep_config *cfg, ep_layer_plan *out, char err[EP_ERRLEN]) {
    if (cfg->mtp_num_layers < 0 || cfg->mtp_num_layers >= EP_MAX_LAYERS) {
        snprintf(err, EP_ERRLEN, "--mtp-num-layers %d is outside 0..%d", cfg->mtp_num_layers,
                 EP_MAX_LAYERS - 1);
        return -1;
    }
    ep_layer mtp_like = {.blocks = "*E", .nblocks = 2};
    if (cfg->hybrid_override_pattern[0]) {
        if (ep_pattern_parse(cfg->hybrid_override_pattern, out, err) != 0) return -1;
        if (out->num_mtp > 0) return 0;
        /* No MTP pattern after /: MTP layers are attention + MoE (dense MLP without experts). */
        if (cfg->num_experts <= 0) memcpy(mtp_like.blocks, "*-", 3);
    } else {
        int is_moe[EP_MAX_LAYERS];
        memset(out, 0, sizeof *out);
        int L = cfg->num_layers;
        if (L < 1 || L > EP_MAX_LAYERS) {
            snprintf(err, EP_ERRLEN, "--num-layers %d is outside 1..%d", L, EP_MAX_LAYERS);
            return -1;
        }
        if (cfg->num_experts > 0) {
            if (ep_moe_layer_freq_parse(cfg->moe_layer_freq, L, is_moe, err) != 0) return -1;
        } else {
            memset(is_moe, 0, sizeof is_moe);
        }
        for (int i = 0; i < L; i++) {
            ep_layer l = {.blocks = "*E", .nblocks = 2, .pp_stage = -1};
            if (!is_moe[i]) l.blocks[1] = '-';
            if (plan_append(out, &l, 0, err) != 0) return -1;
        }
        mtp_like = out->layers[L - 1];
    }
    mtp_like.pp_stage = out->has_stage_marks ? out->layers[out->num_layers - 1].pp_stage : -1;
    for (int i = 0; i < cfg->mtp_num_layers; i++) {
        if (plan_append(out, &mtp_like, 1, err) != 0) {
            snprintf(err, EP_ERRLEN, "--num-layers + --mtp-num-layers exceed %d layers",
                     EP_MAX_LAYERS);
            return -1;
        }
    }
    return 0;
}

/* --- explicit pipeline splits -------------------------------------------------------------- */

#define LAYOUT_MAX 65536 /* characters of a layout with its repeats unrolled */

/* Appends `n` copies of s[0..len) to out (at *o, capacity LAYOUT_MAX); -1 when too long. */
static int repeat(char *out, int *o, const char *s, int len, long n) {
    if (n < 0 || (long)*o + n * len >= LAYOUT_MAX) return -1;
    for (long i = 0; i < n; i++) {
        memcpy(out + *o, s, (size_t)len);
        *o += len;
    }
    return 0;
}

/* Reads the repeat count after "*" at s[*i]; -1 when there is none. */
static long repeat_count(const char *s, int *i) {
    if (s[*i] != '*' || !isdigit((unsigned char)s[*i + 1])) return -1;
    char *end;
    long n = strtol(s + *i + 1, &end, 10);
    *i = (int)(end - s);
    return n > 100000 ? -1 : n;
}

/* Megatron's unrolling: (group)*n first (no nesting), then x*n; commas and spaces dropped. */
static int layout_unroll(const char *layout, char *out, char err[EP_ERRLEN]) {
    char a[LAYOUT_MAX], *pass[2] = {a, out};
    int o = 0;
    for (int i = 0; layout[i]; i++)
        if (layout[i] != ',' && !isspace((unsigned char)layout[i])) {
            if (o + 1 >= LAYOUT_MAX) goto too_long;
            a[o++] = layout[i];
        }
    a[o] = 0;
    for (int p = 0; p < 2; p++) { /* p 0: groups from a into out; p 1: x*n from out into a */
        const char *in = pass[p];
        char *dst = pass[1 - p];
        o = 0;
        for (int i = 0; in[i];) {
            if (p == 0 && in[i] == '(') {
                const char *close = strchr(in + i, ')');
                const char *open = strchr(in + i + 1, '(');
                int j = close ? (int)(close - in) + 1 : i;
                long n = close ? repeat_count(in, &j) : -1;
                if (!close || (open && open < close) || n < 0) {
                    snprintf(err, EP_ERRLEN,
                             "--pipeline-model-parallel-layout: a group at character %d needs a "
                             "closing ) and *N, without nesting",
                             i + 1);
                    return -1;
                }
                if (repeat(dst, &o, in + i + 1, (int)(close - in) - i - 1, n)) goto too_long;
                i = j;
            } else if (p == 1 && in[i + 1] == '*') {
                int j = i + 1;
                long n = repeat_count(in, &j);
                if (n < 0) {
                    snprintf(err, EP_ERRLEN,
                             "--pipeline-model-parallel-layout: '*' at character %d needs a count",
                             i + 2);
                    return -1;
                }
                if (repeat(dst, &o, in + i, 1, n)) goto too_long;
                i = j;
            } else {
                if (repeat(dst, &o, in + i, 1, 1)) goto too_long;
                i++;
            }
        }
        dst[o] = 0;
    }
    memcpy(out, a, strlen(a) + 1);
    return 0;
too_long:
    snprintf(err, EP_ERRLEN, "--pipeline-model-parallel-layout unrolls to over %d characters",
             LAYOUT_MAX);
    return -1;
}

/* Per virtual stage of the unrolled layout: decoder layers t[v], MTP layers m[v], and where the
 * embedding and the loss are; returns the stage count or -1. */
static int layout_parse(const char *layout, int *t, int *m, int *e_at, int *l_at, int cap,
                        char err[EP_ERRLEN]) {
    char u[LAYOUT_MAX];
    if (layout_unroll(layout, u, err) != 0) return -1;
    int v = 0, ne = 0, nl = 0;
    *e_at = *l_at = -1;
    if (cap > 0) t[0] = m[0] = 0;
    for (int i = 0; u[i]; i++) {
        char c = u[i];
        if (c == '|') {
            if (++v >= cap) {
                snprintf(err, EP_ERRLEN,
                         "--pipeline-model-parallel-layout has over %d virtual stages", cap);
                return -1;
            }
            t[v] = m[v] = 0;
        } else if (c == 't') {
            t[v]++;
        } else if (c == 'm') {
            m[v]++;
        } else if (c == 'E' || c == 'L') {
            int first = i == 0, last = u[i + 1] == 0;
            if (c == 'E' ? !first : !last) {
                snprintf(err, EP_ERRLEN,
                         "--pipeline-model-parallel-layout: %s must be the %s element",
                         c == 'E' ? "E (embedding)" : "L (loss)", c == 'E' ? "first" : "last");
                return -1;
            }
            *(c == 'E' ? e_at : l_at) = v;
            if (c == 'E')
                ne++;
            else
                nl++;
        } else {
            snprintf(err, EP_ERRLEN,
                     "--pipeline-model-parallel-layout: '%c' is not a layer (E t m L, | between "
                     "stages)",
                     c);
            return -1;
        }
    }
    if (ne != 1 || nl != 1) {
        snprintf(err, EP_ERRLEN,
                 "--pipeline-model-parallel-layout needs one E (embedding, first) and one L "
                 "(loss, last)");
        return -1;
    }
    return v + 1;
}

int ep_layout_stages(const char *layout, char err[EP_ERRLEN]) {
    int t[EP_MAX_VSTAGES], m[EP_MAX_VSTAGES], e, l; /* counts are not kept */
    return layout_parse(layout, t, m, &e, &l, EP_MAX_VSTAGES, err);
}

/* The plan's explicit split from the layout or the accounting flags, for PP x VPP stages. */
static int explicit_split(const ep_config *cfg, ep_layer_plan *out, char err[EP_ERRLEN]) {
    int pp = cfg->pipeline_model_parallel_size, vpp = cfg->virtual_pipeline_model_parallel_size;
    int nv = pp * vpp, L = out->num_layers, mtp = out->num_mtp;
    int t[EP_MAX_VSTAGES], m[EP_MAX_VSTAGES];
    out->nvstages = 0;
    if (cfg->pipeline_model_parallel_layout[0]) {
        int e, l;
        int n = layout_parse(cfg->pipeline_model_parallel_layout, t, m, &e, &l, EP_MAX_VSTAGES,
                             err);
        if (n < 0) return -1;
        if (n != nv) {
            snprintf(err, EP_ERRLEN,
                     "--pipeline-model-parallel-layout has %d virtual stages, not "
                     "--pipeline-model-parallel-size %d x %d",
                     n, pp, vpp);
            return -1;
        }
        int nt = 0, nm = 0, t_after_m = 0;
        for (int v = 0; v < n; v++) {
            t_after_m |= t[v] > 0 && nm > 0;
            nt += t[v];
            nm += m[v];
        }
        if (nt != L || nm != mtp || t_after_m) {
            snprintf(err, EP_ERRLEN,
                     "--pipeline-model-parallel-layout holds %d decoder layers (t) and %d MTP "
                     "layers (m) but the model has %d and %d (MTP after every decoder layer)",
                     nt, nm, L, mtp);
            return -1;
        }
    } else if (cfg->account_for_embedding_in_pipeline_split ||
               cfg->account_for_loss_in_pipeline_split) {
        int e = cfg->account_for_embedding_in_pipeline_split;
        int l = cfg->account_for_loss_in_pipeline_split, units = L + e + l;
        if (units % nv != 0) {
            snprintf(err, EP_ERRLEN,
                     "--num-layers %d%s%s is not divisible by --pipeline-model-parallel-size %d x "
                     "--num-virtual-stages-per-pipeline-rank %d",
                     L, e ? " + the embedding" : "", l ? " + the loss" : "", pp, vpp);
            return -1;
        }
        for (int v = 0; v < nv; v++) {
            t[v] = units / nv - (e && v == 0) - (l && v == nv - 1);
            m[v] = v == nv - 1 ? mtp : 0;
        }
    } else {
        return 0;
    }
    if (nv > EP_MAX_VSTAGES) {
        snprintf(err, EP_ERRLEN, "more than %d virtual pipeline stages", EP_MAX_VSTAGES);
        return -1;
    }
    int at = 0;
    for (int v = 0; v < nv; v++) {
        out->vstage_first[v] = at;
        out->vstage_count[v] = t[v] + m[v];
        at += t[v] + m[v];
    }
    out->nvstages = nv;
    return 0;
}

int ep_layer_plan_build(const ep_config *cfg, ep_layer_plan *out, char err[EP_ERRLEN]) {
    if (plan_layers(cfg, out, err) != 0) return -1;
    out->first_stage_layers = cfg->decoder_first_pipeline_num_layers;
    out->last_stage_layers = cfg->decoder_last_pipeline_num_layers;
    return explicit_split(cfg, out, err);
}

/* Megatron-LM's uneven split (get_transformer_layer_offset): per chunk, a run of T layers of which
 * the first stage takes first/vpp, each middle stage mid/vpp/middle_stages, the last stage
 * last/vpp. ep_config_validate has checked that the divisions are exact. */
static void uneven_range(const ep_layer_plan *plan, int pp, int vpp, int stage, int chunk,
                         int *first, int *count) {
    int L = plan->num_layers, f = plan->first_stage_layers, l = plan->last_stage_layers;
    int middle_stages = pp - (f > 0) - (l > 0), mid = L - f - l;
    int per_mid = middle_stages > 0 ? mid / vpp / middle_stages : 0;
    int run = L / vpp, fc = f / vpp, lc = l / vpp;
    int s0 = f > 0 ? 1 : 0; /* the first middle stage */
    if (stage == 0 && f > 0) {
        *first = chunk * run;
        *count = fc;
    } else if (stage == pp - 1 && l > 0) {
        *first = chunk * run + fc + middle_stages * per_mid;
        *count = lc;
    } else {
        *first = chunk * run + fc + (stage - s0) * per_mid;
        *count = per_mid;
    }
}

void ep_layer_range(const ep_layer_plan *plan, int pp, int vpp, int stage, int chunk, int *first,
                    int *count) {
    *first = 0;
    *count = 0;
    if (pp < 1 || vpp < 1 || stage < 0 || stage >= pp || chunk < 0 || chunk >= vpp) return;
    int L = plan->num_layers;
    int last = stage == pp - 1 && chunk == vpp - 1;
    if (plan->nvstages > 0) { /* an explicit split; the stage holds its MTP layers already */
        int v = chunk * pp + stage;
        if (v < plan->nvstages) {
            *first = plan->vstage_first[v];
            *count = plan->vstage_count[v];
        }
        return;
    }
    if (plan->has_stage_marks) {
        if (chunk != 0) return; /* stage marks imply one chunk per stage */
        int f = -1, n = 0;
        for (int i = 0; i < L; i++)
            if (plan->layers[i].pp_stage == stage) {
                if (f < 0) f = i;
                n++;
            }
        *first = f < 0 ? L : f;
        *count = n + (stage == pp - 1 ? plan->num_mtp : 0);
        return;
    }
    if (plan->first_stage_layers > 0 || plan->last_stage_layers > 0) {
        uneven_range(plan, pp, vpp, stage, chunk, first, count);
        if (last) *count += plan->num_mtp;
        return;
    }
    /* Megatron interleaving: pp*vpp equal slices; chunk c of stage s holds slice c*pp + s. */
    long slices = (long)pp * vpp, idx = (long)chunk * pp + stage;
    int f = (int)(idx * L / slices), e = (int)((idx + 1) * L / slices);
    *first = f;
    *count = e - f + (last ? plan->num_mtp : 0);
}
