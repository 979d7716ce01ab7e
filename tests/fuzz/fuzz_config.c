/* libFuzzer target for the configuration front end: argument-file text -> parse -> validate ->
 * layer plan -> stage ranges and process groups. Beyond "no crash, no sanitizer report", it traps
 * when a validated config breaks an invariant the schedule generators rely on.
 * Build and run: scripts/fuzz.sh SECONDS. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ep_config.h"
#include "ep_groups.h"
#include "ep_layers.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);          \
            __builtin_trap();                                                                      \
        }                                                                                          \
    } while (0)

static ep_layer_plan g_plan;

static void check_message(const char *err) {
    CHECK(err[0] != 0);
    CHECK(strchr(err, '\n') == NULL);
}

/* Every decoder and MTP layer belongs to exactly one (stage, chunk). */
static void check_ranges(const ep_config *cfg) {
    static unsigned char seen[EP_MAX_LAYERS];
    int pp = cfg->pipeline_model_parallel_size, vpp = cfg->virtual_pipeline_model_parallel_size;
    memset(seen, 0, sizeof seen);
    for (int s = 0; s < pp; s++)
        for (int c = 0; c < vpp; c++) {
            int f, n;
            ep_layer_range(&g_plan, pp, vpp, s, c, &f, &n);
            CHECK(f >= 0 && n >= 0 && f + n <= g_plan.num_layers + g_plan.num_mtp);
            for (int i = f; i < f + n; i++)
                seen[i]++;
        }
    for (int i = 0; i < g_plan.num_layers + g_plan.num_mtp; i++)
        CHECK(seen[i] == 1);
}

static void check_groups(const ep_config *cfg) {
    if (cfg->world_size > 4096) return; /* keep each input fast */
    int *out = malloc((size_t)cfg->world_size * sizeof *out);
    CHECK(out != NULL);
    int ranks[2] = {0, cfg->world_size - 1};
    for (int k = 0; k < EP_GROUP_NUM_KINDS; k++)
        for (int i = 0; i < 2; i++) {
            int n = ep_group_members(cfg, (ep_group_kind)k, ranks[i], out);
            if (k == EP_GROUP_P2P) {
                CHECK(n == 0);
                continue;
            }
            CHECK(n >= 1 && n <= cfg->world_size);
            int has = 0;
            for (int j = 0; j < n; j++)
                has |= out[j] == ranks[i];
            CHECK(has);
        }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    ep_config cfg;
    char err[EP_ERRLEN];
    ep_config_defaults(&cfg);
    if (ep_config_parse_text(&cfg, text, err) != 0) {
        check_message(err);
        /* a partly parsed config must not crash the plan builder either */
        if (ep_layer_plan_build(&cfg, &g_plan, err) != 0) check_message(err);
        free(text);
        return 0;
    }
    if (ep_config_validate(&cfg, err) != 0) {
        check_message(err);
        if (ep_layer_plan_build(&cfg, &g_plan, err) != 0) check_message(err);
        free(text);
        return 0;
    }
    long long tp = cfg.tensor_model_parallel_size, cp = cfg.context_parallel_size;
    long long pp = cfg.pipeline_model_parallel_size, dp = cfg.data_parallel_size;
    CHECK(tp * cp * pp * dp == cfg.world_size);
    CHECK(cfg.global_batch_size % (cfg.micro_batch_size * cfg.data_parallel_size) == 0);
    CHECK(ep_config_num_microbatches(&cfg) >= 1);
    CHECK(cfg.pad_multiple >= 1);
    CHECK(ep_layer_plan_build(&cfg, &g_plan, err) == 0);
    CHECK(g_plan.num_layers == cfg.num_layers);
    check_ranges(&cfg);
    check_groups(&cfg);
    ep_config again = cfg; /* validation is idempotent */
    CHECK(ep_config_validate(&again, err) == 0);
    CHECK(memcmp(&again, &cfg, sizeof cfg) == 0);
    FILE *devnull = fopen("/dev/null", "w");
    if (devnull) {
        ep_config_write_json(&cfg, devnull);
        fclose(devnull);
    }
    free(text);
    return 0;
}
