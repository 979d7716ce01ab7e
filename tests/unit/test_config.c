/* Configuration: flag parsing (both forms, booleans, --no-, enums, aliases, unknown flags),
 * argument files (comments, nesting, missing files), every validation message, derived settings,
 * --help and JSON coverage of the flag table, and the presets in configs/. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ep_config.h"
#include "ep_layers.h"
#include "test_util.h"

static ep_config g_cfg;
static char g_err[EP_ERRLEN];

/* Parses a flag string with positional and pass-through lists. */
static int parse_with_lists(const char *flags, ep_arglist *pos, ep_arglist *unk) {
    static char buf[4096];
    char *argv[128];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", flags);
    argv[argc++] = "prog";
    for (char *t = strtok(buf, " "); t && argc < 127; t = strtok(NULL, " "))
        argv[argc++] = t;
    ep_config_defaults(&g_cfg);
    return ep_config_parse(&g_cfg, argc, argv, pos, unk, g_err);
}

static void test_defaults_validate(void) {
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg, "", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 4);
    CU_ASSERT_EQUAL(g_cfg.hidden_size, 1024);
    CU_ASSERT_EQUAL(g_cfg.num_experts, 8);
    CU_ASSERT_EQUAL(g_cfg.moe_router_topk, 2);
    CU_ASSERT_EQUAL(g_cfg.world_size, 1);
    CU_ASSERT_EQUAL(g_cfg.data_parallel_size, 1);
    CU_ASSERT_EQUAL(g_cfg.expert_tensor_parallel_size, 1);
    CU_ASSERT_EQUAL(g_cfg.kv_channels, 64);
    CU_ASSERT_EQUAL(g_cfg.num_query_groups, 16);
    CU_ASSERT_EQUAL(g_cfg.pad_multiple, 1);
    CU_ASSERT_EQUAL(g_cfg.seqlen_mean, 1024);
    CU_ASSERT_EQUAL(ep_config_num_microbatches(&g_cfg), 8);
    CU_ASSERT_EQUAL(ep_config_backend(&g_cfg), EP_BACKEND_ALLTOALL);
}

static void test_both_forms(void) {
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--num-layers 8 --hidden-size=512", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 8);
    CU_ASSERT_EQUAL(g_cfg.hidden_size, 512);
    CU_ASSERT_EQUAL(
        ep_test_config(&g_cfg, "--routing-zipf-s=1.5 --seed 18446744073709551615", g_err), 0);
    CU_ASSERT_DOUBLE_EQUAL(g_cfg.route_zipf_s, 1.5, 1e-12);
    CU_ASSERT_EQUAL(g_cfg.seed, UINT64_MAX);
    /* a later flag wins */
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--num-layers 8 --num-layers=2", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 2);
}

static void test_bools(void) {
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--use-distributed-optimizer --no-swiglu", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.use_distributed_optimizer, 1);
    CU_ASSERT_EQUAL(g_cfg.swiglu, 0);
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--no-swiglu --swiglu", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.swiglu, 1);
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--swiglu=false", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.swiglu, 0);
    /* a bool takes no separate value: "8" becomes an unexpected positional argument */
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--swiglu 8", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "unexpected argument '8'"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--swiglu=maybe", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--swiglu"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--no-swiglu=1", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--no-swiglu takes no value"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--no-num-layers", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--num-layers is not an on/off flag"));
}

/* Megatron-LM flags with no effect on a step are accepted, listed once each, and keep their
 * arity; flags that change the step and are not modelled stay unknown. */
static void test_ignored_megatron_flags(void) {
    CU_ASSERT_EQUAL_FATAL(
        ep_test_config(&g_cfg,
                       "--lr 1e-4 --bf16 --num-layers 6 --moe-z-loss-coeff=0.01 "
                       "--bf16 --use-flash-attn --min-lr 1e-5",
                       g_err),
        0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 6);
    CU_ASSERT_STRING_EQUAL(g_cfg.ignored_flags,
                           "--lr --bf16 --moe-z-loss-coeff --use-flash-attn --min-lr");
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--data-path 0.7 a 0.3 b --num-layers 5", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 5);
    CU_ASSERT_STRING_EQUAL(g_cfg.ignored_flags, "--data-path");
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--num-layers 6", g_err), 0);
    CU_ASSERT_STRING_EQUAL(g_cfg.ignored_flags, "");
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--bf16=1", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--bf16 takes no value"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--lr", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--lr needs a value"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--lr --bf16", g_err), -1);
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--no-bf16", g_err), -1);
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--moe-use-upcycling", g_err), -1); /* not modelled */
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--moe-use-upcycling"));
    /* a long list ends in "..." and never overflows */
    char many[4096] = "";
    static const char *const names[] = {
        "lr",           "min-lr",          "lr-decay-style",    "lr-decay-iters",
        "weight-decay", "adam-beta1",      "adam-beta2",        "adam-eps",
        "clip-grad",    "init-method-std", "attention-dropout", "hidden-dropout",
        "norm-epsilon", "normalization",   "rotary-base",       "save",
        "load",         "save-interval",   "eval-interval",     "eval-iters",
        "log-interval"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "--%s 1 ", names[i]);
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg, many, g_err), 0);
    size_t len = strlen(g_cfg.ignored_flags);
    CU_ASSERT(len < sizeof g_cfg.ignored_flags);
    CU_ASSERT(len >= 3 && strcmp(g_cfg.ignored_flags + len - 3, "...") == 0);
    CU_ASSERT_EQUAL(strncmp(g_cfg.ignored_flags, "--lr --min-lr ", 14), 0);
}

static void test_enums_and_aliases(void) {
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg,
                                   "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend "
                                   "hybridep --fp8-format e4m3 --fp8-recipe mxfp8 --routing zipf "
                                   "--outer-dp-sharding-strategy no_shard --seqlen-dist lognormal",
                                   g_err),
                    0);
    CU_ASSERT_EQUAL(g_cfg.moe_token_dispatcher_type, EP_DISPATCHER_FLEX);
    CU_ASSERT_EQUAL(ep_config_backend(&g_cfg), EP_BACKEND_HYBRIDEP);
    CU_ASSERT_STRING_EQUAL(ep_backend_name(ep_config_backend(&g_cfg)), "hybridep");
    CU_ASSERT_EQUAL(g_cfg.fp8_recipe, EP_FP8_RECIPE_MXFP8);
    CU_ASSERT_EQUAL(g_cfg.route_dist, EP_ROUTE_ZIPF);
    CU_ASSERT_EQUAL(g_cfg.seqlen_dist, EP_SEQLEN_LOGNORMAL);
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--moe-token-dispatcher-type bogus", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--moe-token-dispatcher-type: 'bogus' is not one of "
                                         "alltoall, allgather, flex"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg,
                                   "--vocab-size 50000 --moe-router-padding-for-fp8 "
                                   "--fp8-format hybrid",
                                   g_err),
                    0);
    CU_ASSERT_EQUAL(g_cfg.vocab_size, 50000);
    CU_ASSERT_EQUAL(g_cfg.moe_router_padding_for_quantization, 1);
    CU_ASSERT_STRING_EQUAL(ep_backend_name(EP_BACKEND_DEEPEP), "deepep");
    CU_ASSERT_STRING_EQUAL(ep_backend_name(EP_BACKEND_ALLGATHER), "allgather");
}

static void test_bad_values(void) {
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--num-layers x", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--num-layers: 'x' is not an integer"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--num-layers", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--num-layers needs a value"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--num-layers --hidden-size 5", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--num-layers needs a value"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--seed -1", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--seed"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--routing-zipf-s 1.5x", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--routing-zipf-s"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--num-layers 99999999999", g_err), -1);
    char big[1200] = "--hybrid-override-pattern ";
    memset(big + strlen(big), 'M', 1100);
    big[sizeof big - 1] = 0;
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, big, g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--hybrid-override-pattern: value longer than"));
}

static void test_unknown_and_positional(void) {
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--bogus 3", g_err), -1);
    CU_ASSERT_STRING_EQUAL(g_err, "unknown flag --bogus");
    /* a Megatron-LM flag that changes the step and is not modelled says so, and why */
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--softmax-type learnable", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--softmax-type is Megatron-LM's but not modelled: "));
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "attention sinks"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--fp16", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "only bf16 and FP8"));
    CU_ASSERT_PTR_NULL(ep_config_unmodelled_flag("bogus"));
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--num-layers 4 run", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "unexpected argument 'run'"));
    ep_arglist pos, unk;
    CU_ASSERT_EQUAL_FATAL(
        parse_with_lists("sweep --bogus 3 --num-layers 8 --flag2 --x=1 --topo dgx16 tail", &pos,
                         &unk),
        0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 8);
    CU_ASSERT_EQUAL_FATAL(pos.count, 2);
    CU_ASSERT_STRING_EQUAL(pos.items[0], "sweep");
    CU_ASSERT_STRING_EQUAL(pos.items[1], "tail");
    CU_ASSERT_EQUAL_FATAL(unk.count, 6);
    const char *want[] = {"--bogus", "3", "--flag2", "--x=1", "--topo", "dgx16"};
    for (int i = 0; i < 6; i++)
        CU_ASSERT_STRING_EQUAL(unk.items[i], want[i]);
}

/* A scratch directory with argument files. */
static char g_dir[256];

static void write_file(const char *rel, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, rel);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(text, f);
    fclose(f);
}

static int parse_file_args(const char *fmt, ep_arglist *unk) {
    char line[1024];
    snprintf(line, sizeof line, fmt, g_dir, g_dir);
    return parse_with_lists(line, NULL, unk);
}

static int files_setup(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/ep_cfg_test_%ld", (long)getpid());
    char sub[300];
    snprintf(sub, sizeof sub, "%s/sub", g_dir);
    return mkdir(g_dir, 0700) != 0 || mkdir(sub, 0700) != 0;
}

static int files_cleanup(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) != 0;
}

static void test_argument_files(void) {
    write_file("a.args", "# a comment line --num-layers 99\n"
                         "--num-layers 8   # trailing comment\n"
                         "--hidden-size=512#glued comment\n"
                         "\t@sub/b.args\n");
    write_file("sub/b.args", "--num-experts 16 @c.args --swiglu\n");
    write_file("sub/c.args", "--moe-router-topk 4\n--outside-flag value\n");
    ep_arglist unk;
    CU_ASSERT_EQUAL_FATAL(parse_file_args("@%s/a.args --hidden-size 256", &unk), 0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 8);
    CU_ASSERT_EQUAL(g_cfg.hidden_size, 256); /* the command line after the file wins */
    CU_ASSERT_EQUAL(g_cfg.num_experts, 16);
    CU_ASSERT_EQUAL(g_cfg.moe_router_topk, 4); /* c.args resolved next to b.args */
    /* pass-through tokens from a file outlive the file's buffer */
    CU_ASSERT_EQUAL_FATAL(unk.count, 2);
    CU_ASSERT_STRING_EQUAL(unk.items[0], "--outside-flag");
    CU_ASSERT_STRING_EQUAL(unk.items[1], "value");
    /* without a pass-through list the same file is an error naming the file */
    CU_ASSERT_EQUAL(parse_file_args("@%s/a.args", NULL), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "unknown flag --outside-flag"));
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "sub/c.args"));
}

static void test_argument_file_errors(void) {
    CU_ASSERT_EQUAL(parse_file_args("@%s/missing.args", NULL), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "cannot read argument file"));
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "missing.args"));
    write_file("nest.args", "--num-layers 2 @sub/gone.args\n");
    CU_ASSERT_EQUAL(parse_file_args("@%s/nest.args", NULL), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "sub/gone.args"));
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "(in "));
    write_file("loop.args", "--num-layers 2 @loop.args\n");
    CU_ASSERT_EQUAL(parse_file_args("@%s/loop.args", NULL), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "nested deeper than 8"));
    CU_ASSERT_EQUAL(parse_file_args("@%s/sub", NULL), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "not a regular file"));
    write_file("dangling.args", "--num-layers\n");
    CU_ASSERT_EQUAL(parse_file_args("@%s/dangling.args", NULL), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--num-layers needs a value"));
}

static void test_parse_text(void) {
    ep_config_defaults(&g_cfg);
    CU_ASSERT_EQUAL(ep_config_parse_text(&g_cfg, "--num-layers 6 # six\n--no-swiglu\n", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 6);
    CU_ASSERT_EQUAL(g_cfg.swiglu, 0);
    CU_ASSERT_EQUAL(ep_config_parse_text(&g_cfg, "--num-layers 6 stray", g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "unexpected argument 'stray'"));
    CU_ASSERT_EQUAL(ep_config_parse_text(&g_cfg, "--what", g_err), -1);
    CU_ASSERT_STRING_EQUAL(g_err, "unknown flag --what");
    CU_ASSERT_EQUAL(ep_config_parse_text(&g_cfg, "", g_err), 0);
}

static void test_set_by_name(void) {
    ep_config_defaults(&g_cfg);
    CU_ASSERT_EQUAL(ep_config_set(&g_cfg, "expert-model-parallel-size", "4", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.expert_model_parallel_size, 4);
    CU_ASSERT_EQUAL(ep_config_set(&g_cfg, "vocab-size", "7", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.vocab_size, 7);
    CU_ASSERT_EQUAL(ep_config_set(&g_cfg, "nope", "1", g_err), -1);
    CU_ASSERT_PTR_NULL(ep_config_find_flag("nope"));
    CU_ASSERT_PTR_NOT_NULL(ep_config_find_flag("moe-hybridep-num-blocks-permute"));
}

/* ---- validation: every message names its flags ---- */

typedef struct {
    const char *flags;
    const char *must[3]; /* substrings of the message */
} bad_case;

static const bad_case k_bad[] = {
    {"--num-layers 0", {"--num-layers 0 is outside 1..512"}},
    {"--micro-batch-size 0", {"--micro-batch-size 0"}},
    {"--ddp-bucket-size -1", {"--ddp-bucket-size -1 must be >= 0"}},
    {"--hidden-size 1000", {"--hidden-size 1000", "--num-attention-heads 16", "--kv-channels"}},
    {"--group-query-attention", {"--group-query-attention", "--num-query-groups"}},
    {"--num-query-groups 3", {"--num-query-groups 3", "--num-attention-heads 16"}},
    {"--tensor-model-parallel-size 3 --world-size 3",
     {"--tensor-model-parallel-size 3", "--num-attention-heads 16"}},
    {"--num-query-groups 2 --tensor-model-parallel-size 4 --world-size 4",
     {"--tensor-model-parallel-size 4", "--num-query-groups 2"}},
    {"--multi-latent-attention --kv-lora-rank 0", {"--multi-latent-attention", "--kv-lora-rank"}},
    {"--multi-latent-attention --qk-head-dim 0", {"--multi-latent-attention", "--qk-head-dim"}},
    {"--multi-latent-attention --qk-pos-emb-head-dim 0",
     {"--multi-latent-attention", "--qk-pos-emb-head-dim"}},
    {"--multi-latent-attention --v-head-dim 0", {"--multi-latent-attention", "--v-head-dim"}},
    {"--context-parallel-size 2 --seq-length 2050 --world-size 2",
     {"--seq-length 2050", "--context-parallel-size 2"}},
    {"--world-size 16 --data-parallel-size 4", {"--world-size 16", "--data-parallel-size", "= 4"}},
    {"--world-size 12 --tensor-model-parallel-size 8",
     {"--world-size 12", "--tensor-model-parallel-size", "(8)"}},
    {"--data-parallel-size 1048576 --tensor-model-parallel-size 2",
     {"--data-parallel-size", "exceeds"}},
    {"--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 "
     "--num-virtual-stages-per-pipeline-rank 2",
     {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
      "mutually exclusive"}},
    {"--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 3",
     {"--num-layers 4", "--pipeline-model-parallel-size 2",
      "--num-layers-per-virtual-pipeline-stage 3"}},
    {"--num-virtual-stages-per-pipeline-rank 2",
     {"--num-virtual-stages-per-pipeline-rank 2", "--pipeline-model-parallel-size > 1"}},
    {"--num-layers 8 --hybrid-override-pattern *E|*E|*E*E --pipeline-model-parallel-size 2",
     {"--hybrid-override-pattern has 3 pipeline stages", "--pipeline-model-parallel-size is 2"}},
    {"--hybrid-override-pattern *E|*E --pipeline-model-parallel-size 2 "
     "--num-virtual-stages-per-pipeline-rank 2",
     {"--hybrid-override-pattern", "--num-virtual-stages-per-pipeline-rank 1"}},
    {"--num-layers 5 --pipeline-model-parallel-size 2",
     {"--num-layers 5", "--pipeline-model-parallel-size 2",
      "--num-virtual-stages-per-pipeline-rank 1"}},
    {"--decoder-first-pipeline-num-layers 2",
     {"--decoder-first/last-pipeline-num-layers", "--pipeline-model-parallel-size > 1"}},
    {"--num-layers 8 --pipeline-model-parallel-size 3 --decoder-first-pipeline-num-layers 3",
     {"--num-layers 8", "leaves 5 for 2 middle stages x 1 chunks"}},
    {"--num-layers 8 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
     "--decoder-first-pipeline-num-layers 3",
     {"--decoder-first-pipeline-num-layers 3",
      "divisible by --num-virtual-stages-per-pipeline-rank 2"}},
    {"--num-layers 4 --pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 3 "
     "--decoder-last-pipeline-num-layers 3",
     {"--num-layers 4", "leaves -2"}},
    {"--num-layers 4 --hybrid-override-pattern *E|*E --pipeline-model-parallel-size 2 "
     "--decoder-first-pipeline-num-layers 1",
     {"| stage marks", "--decoder-first/last-pipeline-num-layers", "mutually exclusive"}},
    {"--num-layers 510 --mtp-num-layers 5", {"--num-layers 510", "--mtp-num-layers 5"}},
    {"--hybrid-override-pattern *E*E --moe-layer-freq 2",
     {"--moe-layer-freq", "--hybrid-override-pattern", "mutually exclusive"}},
    {"--hybrid-override-pattern *[E", {"--hybrid-override-pattern", "unbalanced [ at position 2"}},
    {"--hybrid-override-pattern *E*E --num-layers 3",
     {"--hybrid-override-pattern has 4 layers", "--num-layers is 3"}},
    {"--hybrid-override-pattern *E*E/*E --mtp-num-layers 2",
     {"--hybrid-override-pattern has 1 MTP layers", "--mtp-num-layers is 2"}},
    {"--hybrid-override-pattern *E*E --num-experts 0",
     {"--hybrid-override-pattern has E layers", "--num-experts is 0"}},
    {"--hybrid-override-pattern M*M- --mamba-head-dim 96",
     {"--mamba-head-dim 96", "--hidden-size 1024", "--mamba-num-heads"}},
    {"--hybrid-override-pattern M*M- --mamba-num-heads 6 --tensor-model-parallel-size 4 "
     "--world-size 4",
     {"--tensor-model-parallel-size 4", "--mamba-num-heads"}},
    {"--hybrid-override-pattern M*M- --mamba-num-heads 36 --mamba-num-groups 8",
     {"--mamba-num-groups 8", "36 Mamba heads"}},
    {"--hybrid-override-pattern M*M- --mamba-num-groups 2 --tensor-model-parallel-size 4 "
     "--world-size 4",
     {"--tensor-model-parallel-size 4", "2 Mamba groups", "--mamba-num-groups"}},
    {"--moe-layer-freq [1,0,1]", {"--moe-layer-freq lists 3 layers", "--num-layers is 4"}},
    {"--moe-layer-freq [1,0,1,1,1]", {"--moe-layer-freq lists more layers", "--num-layers 4"}},
    {"--moe-layer-freq abc", {"--moe-layer-freq 'abc'"}},
    {"--moe-layer-freq [1,2,1,1]", {"--moe-layer-freq '[1,2,1,1]'"}},
    {"--moe-layer-freq 0", {"--moe-layer-freq 0 must be >= 1"}},
    {"--window-size 128", {"--window-size '128'", "L,R"}},
    {"--window-size 127,x", {"--window-size '127,x'", "L,R"}},
    {"--window-size -2,0", {"--window-size '-2,0'"}},
    {"--window-size 127,4", {"--window-size right part 4", "causally"}},
    {"--window-attn-skip-freq 2", {"--window-attn-skip-freq", "needs --window-size"}},
    {"--window-size 127,0 --window-attn-skip-freq 0", {"--window-attn-skip-freq 0 must be >= 1"}},
    {"--window-size 127,0 --window-attn-skip-freq [1,0]",
     {"--window-attn-skip-freq lists 2 layers", "--num-layers is 4"}},
    {"--window-size 127,0 --context-parallel-size 2 --world-size 2",
     {"--window-size", "--context-parallel-size 2", "not modelled"}},
    {"--num-experts 0 --expert-model-parallel-size 2 --world-size 2",
     {"--expert-model-parallel-size 2", "--num-experts"}},
    {"--moe-router-topk 9", {"--moe-router-topk 9", "--num-experts 8"}},
    {"--expert-model-parallel-size 3 --world-size 3",
     {"--expert-model-parallel-size 3 does not divide --num-experts 8"}},
    {"--expert-tensor-parallel-size 3 --world-size 3 --moe-ffn-hidden-size 1000",
     {"--expert-tensor-parallel-size 3", "--moe-ffn-hidden-size 1000"}},
    {"--moe-router-group-topk 2", {"--moe-router-group-topk", "--moe-router-num-groups"}},
    {"--moe-router-num-groups 3 --moe-router-group-topk 1",
     {"--moe-router-num-groups 3", "--num-experts 8"}},
    {"--moe-router-num-groups 4", {"--moe-router-num-groups", "--moe-router-group-topk"}},
    {"--moe-router-num-groups 4 --moe-router-group-topk 5",
     {"--moe-router-group-topk 5", "--moe-router-num-groups 4"}},
    {"--moe-router-num-groups 4 --moe-router-group-topk 1 --moe-router-topk 4",
     {"--moe-router-topk 4", "--moe-router-group-topk 1"}},
    {"--world-size 4 --expert-model-parallel-size 8",
     {"--expert-model-parallel-size 8", "--expert-tensor-parallel-size 1", "= 4"}},
    {"--routing group-limited", {"--routing group-limited", "--moe-router-num-groups"}},
    {"--routing zipf --routing-zipf-s 0", {"--routing-zipf-s", "--routing zipf"}},
    {"--world-size 4 --global-batch-size 6",
     {"--global-batch-size 6", "--micro-batch-size 1", "--data-parallel-size 4"}},
    {"--num-layers 8 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2 "
     "--world-size 2 --global-batch-size 3",
     {"--num-virtual-stages-per-pipeline-rank 2", "--global-batch-size",
      "--pipeline-model-parallel-size 2"}},
    {"--world-size 8 --num-distributed-optimizer-instances 2",
     {"--num-distributed-optimizer-instances 2", "--use-distributed-optimizer",
      "--use-megatron-fsdp"}},
    {"--world-size 6 --global-batch-size 6 --num-distributed-optimizer-instances 4 "
     "--use-distributed-optimizer",
     {"--num-distributed-optimizer-instances 4", "data-parallel size 6"}},
    {"--world-size 8 --expert-model-parallel-size 8 --num-distributed-optimizer-instances 2 "
     "--use-megatron-fsdp",
     {"--num-distributed-optimizer-instances 2", "expert data-parallel size 1",
      "--expert-model-parallel-size"}},
    {"--data-parallel-sharding-strategy optim",
     {"--data-parallel-sharding-strategy", "--use-megatron-fsdp"}},
    {"--outer-dp-sharding-strategy optim --use-megatron-fsdp",
     {"--outer-dp-sharding-strategy optim", "--num-distributed-optimizer-instances > 1"}},
    {"--overlap-param-gather --overlap-grad-reduce",
     {"--overlap-param-gather", "--use-distributed-optimizer"}},
    {"--overlap-param-gather --use-distributed-optimizer",
     {"--overlap-param-gather", "--overlap-grad-reduce"}},
    {"--overlap-param-gather-with-optimizer-step --use-distributed-optimizer --overlap-grad-reduce "
     "--overlap-param-gather",
     {"--overlap-param-gather-with-optimizer-step", "interleaved schedule"}},
    {"--moe-hybridep-fuse-permute",
     {"--moe-hybridep-fuse-permute", "--moe-token-dispatcher-type flex",
      "--moe-flex-dispatcher-backend hybridep"}},
    {"--moe-hybridep-fuse-permute --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend "
     "hybridep --moe-hybridep-num-blocks-permute 0",
     {"--moe-hybridep-fuse-permute", "--moe-hybridep-num-blocks-permute"}},
    {"--moe-token-dispatcher-type flex --moe-deepep-num-sms 7",
     {"--moe-deepep-num-sms 7 must be even"}},
    {"--overlap-moe-expert-parallel-comm",
     {"--overlap-moe-expert-parallel-comm", "--expert-model-parallel-size > 1"}},
    {"--overlap-moe-expert-parallel-comm --expert-model-parallel-size 2 --world-size 2 "
     "--moe-token-dispatcher-type allgather",
     {"--overlap-moe-expert-parallel-comm", "--moe-token-dispatcher-type alltoall"}},
    {"--overlap-moe-expert-parallel-comm --expert-model-parallel-size 2 --world-size 4 "
     "--pipeline-model-parallel-size 2",
     {"--overlap-moe-expert-parallel-comm", "--pipeline-model-parallel-size 2",
      "--num-virtual-stages-per-pipeline-rank > 1"}},
    {"--overlap-moe-expert-parallel-comm --expert-model-parallel-size 2 --world-size 2 "
     "--mtp-num-layers 2",
     {"--overlap-moe-expert-parallel-comm", "--mtp-num-layers 2"}},
    {"--delay-wgrad-compute", {"--delay-wgrad-compute", "--overlap-moe-expert-parallel-comm"}},
    {"--moe-expert-capacity-factor 1.0 --moe-token-dispatcher-type flex",
     {"--moe-expert-capacity-factor", "alltoall"}},
    {"--moe-pad-expert-input-to-capacity",
     {"--moe-pad-expert-input-to-capacity", "--moe-expert-capacity-factor > 0"}},
    {"--exp-avg-dtype bf16", {"--exp-avg-dtype bf16", "needs --use-precision-aware-optimizer"}},
    {"--main-grads-dtype fp16 --use-precision-aware-optimizer",
     {"--main-grads-dtype fp16", "fp32 or bf16"}},
    {"--main-params-dtype bf16 --use-precision-aware-optimizer",
     {"--main-params-dtype bf16", "fp32 or fp16"}},
    {"--moe-enable-deepep", {"--moe-enable-deepep", "--moe-token-dispatcher-type flex"}},
    {"--moe-enable-deepep --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep",
     {"--moe-enable-deepep", "hybridep", "only one backend"}},
    {"--moe-shared-expert-overlap --moe-token-dispatcher-type allgather",
     {"--moe-shared-expert-overlap", "alltoall or flex"}},
    {"--moe-shared-expert-overlap --overlap-moe-expert-parallel-comm --world-size 2 "
     "--expert-model-parallel-size 2",
     {"--moe-shared-expert-overlap", "--overlap-moe-expert-parallel-comm", "mutually exclusive"}},
    {"--sequence-packing --moe-token-dispatcher-type allgather",
     {"--sequence-packing", "--moe-token-dispatcher-type"}},
    {"--seqlen-mean 4096", {"--seqlen-mean 4096 exceeds --seq-length 2048"}},
    {"--seqlen-min 2000 --seqlen-mean 1000", {"--seqlen-min 2000 exceeds --seqlen-mean 1000"}},
    {"--moe-permute-budget 100",
     {"--moe-permute-budget", "--moe-flex-dispatcher-backend hybridep"}},
    {"--moe-router-padding-for-quantization",
     {"--moe-router-padding-for-quantization", "--fp8-format"}},
    {"--moe-pad-mode device", {"--moe-pad-mode device", "--moe-flex-dispatcher-backend hybridep"}},
    {"--moe-pad-mode host --moe-pad-multiple 24", {"--moe-pad-multiple 24", "1, 16, 32, 64, 128"}},
    {"--moe-pad-multiple 16", {"--moe-pad-multiple 16", "--moe-pad-mode"}},
    {"--moe-pad-mode host", {"--moe-pad-mode host", "--fp8-format", "--moe-pad-multiple"}},
    {"--tensor-model-parallel-size 2 --no-sequence-parallel",
     {"--tensor-model-parallel-size 2", "--sequence-parallel"}},
    {"--recompute-granularity full --recompute-num-layers 1",
     {"--recompute-granularity full", "--recompute-method uniform or block"}},
    {"--recompute-granularity full --recompute-method block",
     {"--recompute-num-layers between 1 and", "got 0"}},
    {"--recompute-granularity full --recompute-method uniform --recompute-num-layers 5",
     {"--recompute-num-layers", "(4)", "got 5"}},
    {"--recompute-granularity selective --recompute-num-layers 2",
     {"selective", "no --recompute-num-layers"}},
    {"--recompute-method uniform", {"--recompute-method", "--recompute-granularity full"}},
    {"--recompute-modules moe_act", {"--recompute-modules", "--recompute-granularity selective"}},
    {"--recompute-granularity full --recompute-method block --recompute-num-layers 1 "
     "--overlap-moe-expert-parallel-comm --expert-model-parallel-size 2 --world-size 2",
     {"--overlap-moe-expert-parallel-comm", "--recompute-granularity full"}},
    {"--recompute-granularity selective --recompute-modules core_attn moe "
     "--overlap-moe-expert-parallel-comm --expert-model-parallel-size 2 --world-size 2",
     {"--overlap-moe-expert-parallel-comm", "moe module"}},
};

/* --recompute-modules takes words up to the next flag, as Megatron-LM's nargs='*' does; a word
 * that is no module is refused; selective alone means core_attn. */
static void test_recompute_modules_words(void) {
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg,
                                         "--recompute-granularity selective --recompute-modules "
                                         "moe_act layernorm --num-layers 4",
                                         g_err),
                          0);
    CU_ASSERT_STRING_EQUAL(g_cfg.recompute_modules, "moe_act layernorm");
    CU_ASSERT_EQUAL(g_cfg.recompute_mask, EP_RC_MOE_ACT | EP_RC_LAYERNORM);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 4);
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--recompute-granularity selective", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.recompute_mask, EP_RC_CORE_ATTN);
    CU_ASSERT_EQUAL(
        ep_test_config(&g_cfg, "--recompute-granularity selective --recompute-modules=mlp", g_err),
        0);
    CU_ASSERT_EQUAL(g_cfg.recompute_mask, EP_RC_MLP);
    CU_ASSERT_NOT_EQUAL(ep_test_config(&g_cfg,
                                       "--recompute-granularity selective --recompute-modules "
                                       "core_attn attn",
                                       g_err),
                        0);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--recompute-modules: 'attn' is not one of core_attn"));
}

static void test_validation_messages(void) {
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        int rc = ep_test_config(&g_cfg, k_bad[i].flags, g_err);
        if (rc != -2) printf("\n  case '%s': rc %d, '%s'\n", k_bad[i].flags, rc, g_err);
        CU_ASSERT_EQUAL(rc, -2);
        CU_ASSERT_PTR_NULL(strchr(g_err, '\n')); /* one line */
        for (int j = 0; j < 3 && k_bad[i].must[j]; j++) {
            int ok = strstr(g_err, k_bad[i].must[j]) != NULL;
            if (!ok)
                printf("\n  case '%s': '%s' lacks '%s'\n", k_bad[i].flags, g_err, k_bad[i].must[j]);
            CU_ASSERT_TRUE(ok);
        }
    }
}

static void test_derived_layout(void) {
    CU_ASSERT_EQUAL_FATAL(
        ep_test_config(
            &g_cfg, "--world-size 16 --tensor-model-parallel-size 2 --global-batch-size 16", g_err),
        0);
    CU_ASSERT_EQUAL(g_cfg.data_parallel_size, 8);
    CU_ASSERT_EQUAL(g_cfg.expert_tensor_parallel_size, 2);
    CU_ASSERT_EQUAL(ep_config_num_microbatches(&g_cfg), 2);
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg,
                                         "--data-parallel-size 4 --pipeline-model-parallel-size 2 "
                                         "--global-batch-size 32 --micro-batch-size 2",
                                         g_err),
                          0);
    CU_ASSERT_EQUAL(g_cfg.world_size, 8);
    CU_ASSERT_EQUAL(ep_config_num_microbatches(&g_cfg), 4);
    /* the older VPP spelling converts: 8 layers / (PP 2 x 2 per chunk) = 2 chunks */
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg,
                                         "--num-layers 8 --pipeline-model-parallel-size 2 "
                                         "--num-layers-per-virtual-pipeline-stage 2",
                                         g_err),
                          0);
    CU_ASSERT_EQUAL(g_cfg.virtual_pipeline_model_parallel_size, 2);
    CU_ASSERT_EQUAL(g_cfg.world_size, 2);
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--world-size 8 --data-parallel-size 8", g_err), 0);
    /* Megatron-LM scripts pass --sequence-parallel with TP; without TP it changes nothing */
    CU_ASSERT_EQUAL(
        ep_test_config(&g_cfg, "--tensor-model-parallel-size 2 --sequence-parallel", g_err), 0);
    CU_ASSERT_EQUAL(ep_test_config(&g_cfg, "--no-sequence-parallel", g_err), 0);
}

static void test_derived_padding(void) {
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg, "--moe-pad-mode host --fp8-format e4m3", g_err),
                          0);
    CU_ASSERT_EQUAL(g_cfg.pad_multiple, 16);
    CU_ASSERT_EQUAL_FATAL(
        ep_test_config(&g_cfg, "--moe-pad-mode host --fp8-format e4m3 --fp8-recipe mxfp8", g_err),
        0);
    CU_ASSERT_EQUAL(g_cfg.pad_multiple, 32);
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg,
                                         "--moe-router-padding-for-quantization --fp8-format e4m3 "
                                         "--fp8-recipe blockwise",
                                         g_err),
                          0);
    CU_ASSERT_EQUAL(g_cfg.pad_mode, EP_PAD_HOST);
    CU_ASSERT_EQUAL(g_cfg.pad_multiple, 16);
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg,
                                         "--moe-token-dispatcher-type flex "
                                         "--moe-flex-dispatcher-backend hybridep --moe-pad-mode "
                                         "device --moe-pad-multiple 128 --moe-permute-budget 4096",
                                         g_err),
                          0);
    CU_ASSERT_EQUAL(g_cfg.pad_multiple, 128);
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg, "--fp8-format e4m3", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.pad_multiple, 1); /* fp8 alone does not ask for padding */
}

static void test_moe_layer_freq_forms(void) {
    const struct {
        const char *freq;
        int want[4];
    } cases[] = {{"2", {1, 0, 1, 0}},
                 {"3", {1, 0, 0, 1}},
                 {"([0]*1+[1]*3)", {0, 1, 1, 1}},
                 {"'([0]*1+[1]*3)'", {0, 1, 1, 1}},
                 {"[1,0,0,1]", {1, 0, 0, 1}},
                 {"[0,1]*2", {0, 1, 0, 1}}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char flags[128];
        snprintf(flags, sizeof flags, "--moe-layer-freq %s", cases[i].freq);
        CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg, flags, g_err), 0);
        for (int l = 0; l < 4; l++)
            CU_ASSERT_EQUAL(g_cfg.moe_layer_is_moe[l], cases[i].want[l]);
    }
    /* a dense model has no MoE layer whatever the frequency says */
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg, "--num-experts 0", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.moe_layer_is_moe[0], 0);
}

static void test_validate_idempotent(void) {
    const char *flags =
        "--world-size 16 --expert-model-parallel-size 4 --global-batch-size 32 "
        "--num-layers 8 --pipeline-model-parallel-size 2 "
        "--num-layers-per-virtual-pipeline-stage 2 --moe-pad-mode host "
        "--fp8-format e4m3 --use-megatron-fsdp "
        "--num-distributed-optimizer-instances 2 --overlap-moe-expert-parallel-comm";
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg, flags, g_err), 0);
    char a[8192], b[8192];
    FILE *f = fmemopen(a, sizeof a, "w");
    ep_config_write_json(&g_cfg, f);
    fclose(f);
    CU_ASSERT_EQUAL_FATAL(ep_config_validate(&g_cfg, g_err), 0);
    f = fmemopen(b, sizeof b, "w");
    ep_config_write_json(&g_cfg, f);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(a, b);
}

/* ep_config_resolve: each "0 = derived" field gets the effective value --help documents, a
 * given value stays, and a resolved configuration resolves to itself. */
static void test_resolve_unset(void) {
    ep_config_defaults(&g_cfg);
    g_cfg.hidden_size = 1024;
    g_cfg.num_attention_heads = 16;
    g_cfg.tensor_model_parallel_size = 2;
    g_cfg.seq_length = 4096;
    g_cfg.ffn_hidden_size = 0;
    g_cfg.moe_ffn_hidden_size = 0;
    g_cfg.kv_channels = 0;
    g_cfg.num_query_groups = 0;
    g_cfg.expert_tensor_parallel_size = 0;
    g_cfg.seqlen_mean = 0;
    ep_config_resolve(&g_cfg);
    CU_ASSERT_EQUAL(g_cfg.ffn_hidden_size, 4096);          /* 4 x hidden */
    CU_ASSERT_EQUAL(g_cfg.moe_ffn_hidden_size, 4096);      /* the dense FFN */
    CU_ASSERT_EQUAL(g_cfg.kv_channels, 64);                /* hidden / heads */
    CU_ASSERT_EQUAL(g_cfg.num_query_groups, 16);           /* heads */
    CU_ASSERT_EQUAL(g_cfg.expert_tensor_parallel_size, 2); /* TP */
    CU_ASSERT_EQUAL(g_cfg.seqlen_mean, 2048);              /* seq-length / 2 */
    ep_config once;
    memcpy(&once, &g_cfg, sizeof once);
    ep_config_resolve(&g_cfg);
    CU_ASSERT_EQUAL(memcmp(&once, &g_cfg, sizeof once), 0);
    /* given values stay */
    g_cfg.ffn_hidden_size = 3000;
    g_cfg.moe_ffn_hidden_size = 512;
    g_cfg.kv_channels = 96;
    g_cfg.num_query_groups = 4;
    g_cfg.expert_tensor_parallel_size = 1;
    g_cfg.seqlen_mean = 700;
    memcpy(&once, &g_cfg, sizeof once);
    ep_config_resolve(&g_cfg);
    CU_ASSERT_EQUAL(memcmp(&once, &g_cfg, sizeof once), 0);
    /* a one-token sequence still has a mean of at least one */
    g_cfg.seq_length = 1;
    g_cfg.seqlen_mean = 0;
    ep_config_resolve(&g_cfg);
    CU_ASSERT_EQUAL(g_cfg.seqlen_mean, 1);
}

/* Validation resolves: a validated configuration holds the effective values, and neither
 * ep_config_resolve nor a second validation changes a byte of it. The Mamba heads keep their 0
 * where no Mamba layer needs them (the metadata prints it) and are read through the accessor. */
static void test_resolve_in_validation(void) {
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg,
                                         "--ffn-hidden-size 0 --moe-ffn-hidden-size 0 "
                                         "--tensor-model-parallel-size 2 --seq-length 1024 "
                                         "--pipeline-model-parallel-size 2 --world-size 8",
                                         g_err),
                          0);
    CU_ASSERT_EQUAL(g_cfg.ffn_hidden_size, 4096);
    CU_ASSERT_EQUAL(g_cfg.moe_ffn_hidden_size, 4096);
    CU_ASSERT_EQUAL(g_cfg.kv_channels, 64);
    CU_ASSERT_EQUAL(g_cfg.num_query_groups, 16);
    CU_ASSERT_EQUAL(g_cfg.expert_tensor_parallel_size, 2);
    CU_ASSERT_EQUAL(g_cfg.seqlen_mean, 512);
    CU_ASSERT_EQUAL(g_cfg.data_parallel_size, 2);
    CU_ASSERT_EQUAL(g_cfg.pad_multiple, 1);
    CU_ASSERT_EQUAL(g_cfg.mamba_num_heads, 0);
    CU_ASSERT_DOUBLE_EQUAL(ep_config_mamba_heads(&g_cfg), 2.0 * 1024 / 64, 0);
    ep_config once;
    memcpy(&once, &g_cfg, sizeof once);
    ep_config_resolve(&g_cfg);
    CU_ASSERT_EQUAL(memcmp(&once, &g_cfg, sizeof once), 0);
    CU_ASSERT_EQUAL_FATAL(ep_config_validate(&g_cfg, g_err), 0);
    CU_ASSERT_EQUAL(memcmp(&once, &g_cfg, sizeof once), 0);
    /* Mamba layers: validation writes the heads; GDN layers alone leave the 0 */
    CU_ASSERT_EQUAL_FATAL(
        ep_test_config(&g_cfg, "--hybrid-override-pattern M*ME --num-layers 4", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.mamba_num_heads, 32);
    CU_ASSERT_EQUAL_FATAL(
        ep_test_config(&g_cfg, "--hybrid-override-pattern G*GE --num-layers 4", g_err), 0);
    CU_ASSERT_EQUAL(g_cfg.mamba_num_heads, 0);
    CU_ASSERT_DOUBLE_EQUAL(ep_config_mamba_heads(&g_cfg), 32, 0);
    g_cfg.mamba_num_heads = 48;
    CU_ASSERT_DOUBLE_EQUAL(ep_config_mamba_heads(&g_cfg), 48, 0);
    /* ETP before validation: TP where unset */
    ep_config_defaults(&g_cfg);
    g_cfg.tensor_model_parallel_size = 4;
    CU_ASSERT_EQUAL(ep_config_expert_tensor_parallel(&g_cfg), 4);
    g_cfg.expert_tensor_parallel_size = 1;
    CU_ASSERT_EQUAL(ep_config_expert_tensor_parallel(&g_cfg), 1);
}

static char *capture(void (*fn)(const ep_config *, FILE *), const ep_config *cfg) {
    static char buf[1 << 16];
    FILE *f = fmemopen(buf, sizeof buf, "w");
    if (!f) return NULL;
    fn(cfg, f);
    fclose(f);
    return buf;
}

static void help_adapter(const ep_config *cfg, FILE *f) {
    (void)cfg;
    ep_config_print_help(f);
}

static void test_help_lists_every_flag(void) {
    char *h = capture(help_adapter, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    int n;
    const ep_flag *t = ep_config_flags(&n);
    for (int i = 0; i < n; i++) {
        char want[160];
        snprintf(want, sizeof want, "--%s ", t[i].name);
        CU_ASSERT_PTR_NOT_NULL(strstr(h, want));
        CU_ASSERT_TRUE(strlen(t[i].help) > 0);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "Model:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "Parallel layout:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "MoE and dispatch:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "Sequence packing (THD):"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "[project] token-to-expert routing"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "--moe-token-dispatcher-type alltoall|allgather|flex"));
    CU_ASSERT_PTR_NOT_NULL(strstr(h, "[default 1024]"));
}

static void test_json_has_every_flag(void) {
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&g_cfg, "--moe-layer-freq ([0]*1+[1]*3)", g_err), 0);
    char *j = capture(ep_config_write_json, &g_cfg);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    int n;
    const ep_flag *t = ep_config_flags(&n);
    for (int i = 0; i < n; i++) {
        if (t[i].type == EP_FLAG_ALIAS) continue;
        char key[160];
        int k = snprintf(key, sizeof key, "\"");
        for (const char *p = t[i].name; *p; p++)
            key[k++] = *p == '-' ? '_' : *p;
        snprintf(key + k, sizeof key - (size_t)k, "\":");
        CU_ASSERT_PTR_NOT_NULL(strstr(j, key));
    }
    CU_ASSERT_EQUAL(j[0], '{');
    CU_ASSERT_EQUAL(j[strlen(j) - 1], '}');
    CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"num_layers\":4,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"moe_token_dispatcher_type\":\"alltoall\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"swiglu\":true"));
    CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"routing\":\"uniform\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"moe_layer_freq\":\"([0]*1+[1]*3)\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"moe_layers\":[1,2,3]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"backend\":\"alltoall\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"ignored_flags\":\"\"}"));
}

/* ---- presets ---- */

static int load_preset(const char *name, const char *layout) {
    char flags[1024];
    snprintf(flags, sizeof flags, "@%s/configs/%s %s", EP_SOURCE_DIR, name, layout);
    int rc = ep_test_config(&g_cfg, flags, g_err);
    if (rc != 0) printf("\n  preset %s: %s\n", name, g_err);
    return rc;
}

static int count_moe(void) {
    int n = 0;
    for (int i = 0; i < g_cfg.num_layers; i++)
        n += g_cfg.moe_layer_is_moe[i];
    return n;
}

static void test_presets(void) {
    CU_ASSERT_EQUAL_FATAL(load_preset("deepseek-v3.args",
                                      "--world-size 256 --pipeline-model-parallel-size 1 "
                                      "--expert-model-parallel-size 64 --global-batch-size 256 "
                                      "--moe-token-dispatcher-type flex"),
                          0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 61);
    CU_ASSERT_EQUAL(count_moe(), 58);
    CU_ASSERT_EQUAL(g_cfg.moe_layer_is_moe[2], 0);
    CU_ASSERT_EQUAL(g_cfg.moe_layer_is_moe[3], 1);
    CU_ASSERT_EQUAL(g_cfg.mtp_num_layers, 1);
    CU_ASSERT_EQUAL(g_cfg.num_experts, 256);
    CU_ASSERT_EQUAL(g_cfg.moe_router_num_groups, 8);
    CU_ASSERT_EQUAL(g_cfg.multi_latent_attention, 1);
    CU_ASSERT_EQUAL(g_cfg.vocab_size, 129280);

    CU_ASSERT_EQUAL_FATAL(load_preset("deepseek-v3-proxy16.args",
                                      "--world-size 4 --expert-model-parallel-size 2 "
                                      "--pipeline-model-parallel-size 2 "
                                      "--num-virtual-stages-per-pipeline-rank 2 "
                                      "--overlap-moe-expert-parallel-comm --delay-wgrad-compute"),
                          0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 16);
    CU_ASSERT_EQUAL(g_cfg.hidden_size, 7168);
    CU_ASSERT_EQUAL(g_cfg.moe_layer_is_moe[0], 0);
    CU_ASSERT_EQUAL(count_moe(), 15);
    CU_ASSERT_EQUAL(g_cfg.mtp_num_layers, 1);

    CU_ASSERT_EQUAL_FATAL(load_preset("qwen3-30b-a3b.args",
                                      "--world-size 16 --expert-model-parallel-size 16 "
                                      "--global-batch-size 32 --overlap-moe-expert-parallel-comm"),
                          0);
    CU_ASSERT_EQUAL(count_moe(), 48);
    CU_ASSERT_EQUAL(g_cfg.num_query_groups, 4);
    CU_ASSERT_EQUAL(g_cfg.moe_ffn_hidden_size, 768);

    CU_ASSERT_EQUAL_FATAL(load_preset("qwen3-235b-a22b.args",
                                      "--world-size 64 --tensor-model-parallel-size 4 "
                                      "--expert-model-parallel-size 16 "
                                      "--expert-tensor-parallel-size 1 --global-batch-size 64"),
                          0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 94);
    CU_ASSERT_EQUAL(g_cfg.num_attention_heads, 64);

    CU_ASSERT_EQUAL_FATAL(load_preset("mixtral-8x7b.args",
                                      "--world-size 16 --expert-model-parallel-size 8 "
                                      "--pipeline-model-parallel-size 2 --global-batch-size 16"),
                          0);
    CU_ASSERT_EQUAL(g_cfg.num_experts, 8);
    CU_ASSERT_EQUAL(g_cfg.moe_router_topk, 2);

    CU_ASSERT_EQUAL_FATAL(load_preset("hybrid-mamba-moe.args",
                                      "--world-size 16 --expert-model-parallel-size 8 "
                                      "--pipeline-model-parallel-size 2 "
                                      "--num-virtual-stages-per-pipeline-rank 2 "
                                      "--global-batch-size 16 --moe-token-dispatcher-type flex "
                                      "--moe-flex-dispatcher-backend hybridep "
                                      "--overlap-moe-expert-parallel-comm"),
                          0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 32);
    CU_ASSERT_EQUAL(count_moe(), 16);
    CU_ASSERT_EQUAL(g_cfg.mamba_num_heads, 128);
    ep_layer_plan plan;
    CU_ASSERT_EQUAL_FATAL(ep_layer_plan_build(&g_cfg, &plan, g_err), 0);
    CU_ASSERT_STRING_EQUAL(plan.layers[1].blocks, "ME");
    CU_ASSERT_STRING_EQUAL(plan.layers[3].blocks, "*E");

    /* the presets of the published suite (configs/published/), with one layout each */
    CU_ASSERT_EQUAL_FATAL(load_preset("gpt-oss-120b.args",
                                      "--world-size 64 --pipeline-model-parallel-size 4 "
                                      "--expert-model-parallel-size 8 --global-batch-size 64"),
                          0);
    CU_ASSERT_EQUAL(count_moe(), 36);
    CU_ASSERT_EQUAL(g_cfg.kv_channels, 64);
    CU_ASSERT_EQUAL_FATAL(load_preset("nemotron3-nano-30b-a3b.args",
                                      "--world-size 16 --expert-model-parallel-size 8 "
                                      "--global-batch-size 16"),
                          0);
    CU_ASSERT_EQUAL(g_cfg.num_layers, 52);
    CU_ASSERT_EQUAL(count_moe(), 23);
    CU_ASSERT_EQUAL_FATAL(load_preset("moonlight-16b-a3b.args",
                                      "--world-size 8 --tensor-model-parallel-size 2 "
                                      "--expert-model-parallel-size 8 "
                                      "--expert-tensor-parallel-size 1 --global-batch-size 4"),
                          0);
    CU_ASSERT_EQUAL(count_moe(), 26);
    static const char *const dense[] = {"llama3-70b.args", "llama31-405b.args", "llama2-13b.args",
                                        "llama2-70b.args", "gpt3-175b.args", "nemotron4-340b.args"};
    for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) {
        CU_ASSERT_EQUAL_FATAL(load_preset(dense[i], "--world-size 16 --tensor-model-parallel-size 8 "
                                                    "--pipeline-model-parallel-size 2 "
                                                    "--global-batch-size 16"),
                              0);
        CU_ASSERT_EQUAL(count_moe(), 0);
    }
    /* whole recipe launch lines (configs/recipes/), as they are */
    CU_ASSERT_EQUAL_FATAL(load_preset("recipes/deepseek-v3-h100x1024-bf16.args", ""), 0);
    CU_ASSERT_EQUAL(g_cfg.world_size, 1024);
    CU_ASSERT_EQUAL(g_cfg.virtual_pipeline_model_parallel_size, 4);
    CU_ASSERT_EQUAL(g_cfg.expert_tensor_parallel_size, 1);
    CU_ASSERT_EQUAL(ep_config_num_microbatches(&g_cfg), 256);
    CU_ASSERT_EQUAL_FATAL(load_preset("recipes/qwen3-235b-a22b-h100x256-bf16.args", ""), 0);
    CU_ASSERT_EQUAL(g_cfg.world_size, 256);
    CU_ASSERT_EQUAL(ep_config_num_microbatches(&g_cfg), 512);
    CU_ASSERT_EQUAL(g_cfg.overlap_param_gather_with_optimizer_step, 1);
}

void ep_suite_config(void) {
    CU_pSuite s = CU_add_suite("config_parse", NULL, NULL);
    CU_add_test(s, "defaults validate and describe a small GPT-MoE", test_defaults_validate);
    CU_add_test(s, "--flag value and --flag=value", test_both_forms);
    CU_add_test(s, "booleans and --no-<flag>", test_bools);
    CU_add_test(s, "enums and alias spellings", test_enums_and_aliases);
    CU_add_test(s, "Megatron-LM flags without effect are accepted", test_ignored_megatron_flags);
    CU_add_test(s, "malformed values name the flag", test_bad_values);
    CU_add_test(s, "unknown flags and positional arguments", test_unknown_and_positional);
    CU_add_test(s, "argument text from memory", test_parse_text);
    CU_add_test(s, "set a flag by name", test_set_by_name);
    CU_add_test(s, "--help lists every flag by group", test_help_lists_every_flag);
    CU_add_test(s, "JSON holds every resolved setting", test_json_has_every_flag);

    s = CU_add_suite("config_files", files_setup, files_cleanup);
    CU_add_test(s, "comments, nesting, relative includes", test_argument_files);
    CU_add_test(s, "missing, looping and dangling files", test_argument_file_errors);

    s = CU_add_suite("config_validate", NULL, NULL);
    CU_add_test(s, "every violation: one line naming the flags", test_validation_messages);
    CU_add_test(s, "world, DP, ETP, VPP derived", test_derived_layout);
    CU_add_test(s, "pad multiple from fp8 recipe or flag", test_derived_padding);
    CU_add_test(s, "--moe-layer-freq forms", test_moe_layer_freq_forms);
    CU_add_test(s, "validation is idempotent", test_validate_idempotent);
    CU_add_test(s, "presets load and validate", test_presets);
    CU_add_test(s, "--recompute-modules words", test_recompute_modules_words);
    CU_add_test(s, "unset fields resolve to their effective values", test_resolve_unset);
    CU_add_test(s, "validation resolves once, idempotently", test_resolve_in_validation);
}
