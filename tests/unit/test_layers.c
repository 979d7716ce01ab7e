/* Layer patterns: the --hybrid-override-pattern grammar (accepted and rejected forms, positions in
 * messages), GPT plans from --moe-layer-freq, MTP layers, and Megatron's stage/chunk assignment. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "ep_layers.h"
#include "test_util.h"

static ep_layer_plan g_plan;
static char g_err[EP_ERRLEN];

static void test_accepts_groups(void) {
    CU_ASSERT_EQUAL_FATAL(ep_pattern_parse("[*-]", &g_plan, g_err), 0);
    CU_ASSERT_EQUAL(g_plan.num_layers, 1);
    CU_ASSERT_STRING_EQUAL(g_plan.layers[0].blocks, "*-");
    CU_ASSERT_EQUAL(g_plan.layers[0].nblocks, 2);
    CU_ASSERT_EQUAL(g_plan.layers[0].is_moe, 0);

    CU_ASSERT_EQUAL_FATAL(ep_pattern_parse("[*E]", &g_plan, g_err), 0);
    CU_ASSERT_EQUAL(g_plan.num_layers, 1);
    CU_ASSERT_STRING_EQUAL(g_plan.layers[0].blocks, "*E");
    CU_ASSERT_EQUAL(g_plan.layers[0].is_moe, 1);

    CU_ASSERT_EQUAL_FATAL(ep_pattern_parse("M[M*]-", &g_plan, g_err), 0);
    CU_ASSERT_EQUAL_FATAL(g_plan.num_layers, 3);
    CU_ASSERT_STRING_EQUAL(g_plan.layers[0].blocks, "M");
    CU_ASSERT_STRING_EQUAL(g_plan.layers[1].blocks, "M*");
    CU_ASSERT_STRING_EQUAL(g_plan.layers[2].blocks, "-");
    CU_ASSERT_EQUAL(g_plan.has_stage_marks, 0);
    CU_ASSERT_EQUAL(g_plan.layers[1].pp_stage, -1);
    CU_ASSERT_EQUAL(g_plan.num_mtp, 0);

    CU_ASSERT_EQUAL_FATAL(ep_pattern_parse("MDGE[MDG*E]", &g_plan, g_err), 0);
    CU_ASSERT_EQUAL(g_plan.num_layers, 5);
    CU_ASSERT_STRING_EQUAL(g_plan.layers[4].blocks, "MDG*E");
}

static void expect_reject(const char *pattern, const char *what) {
    int rc = ep_pattern_parse(pattern, &g_plan, g_err);
    CU_ASSERT_EQUAL(rc, -1);
    int ok = strstr(g_err, what) != NULL && strstr(g_err, "--hybrid-override-pattern") != NULL;
    if (!ok) printf("\n  pattern '%s': got '%s', want '%s'\n", pattern, g_err, what);
    CU_ASSERT_TRUE(ok);
}

static void test_rejects(void) {
    expect_reject("[[*E]]", "nested [ at position 2");
    expect_reject("M[*[E]]", "nested [ at position 4");
    expect_reject("M[]E", "empty group [] at position 2");
    expect_reject("[E*]", "E at position 2 must be the last symbol of its group");
    expect_reject("M[-M]", "- at position 3 must be the last symbol of its group");
    expect_reject("[*EE]", "E at position 3 must be the last symbol");
    expect_reject("*X", "unknown symbol 'X' at position 2");
    expect_reject("* E", "unknown symbol byte 0x20 at position 2");
    expect_reject("*e", "unknown symbol 'e' at position 2");
    expect_reject("M[*E", "unbalanced [ at position 2");
    expect_reject("M*E]", "unbalanced ] at position 4");
    expect_reject("[*|E]", "| at position 3 is inside a bracket group");
    expect_reject("*E||*E", "empty pipeline stage before | at position 4");
    expect_reject("|*E", "empty pipeline stage before | at position 1");
    expect_reject("*E|", "empty pipeline stage after | at position 3");
    expect_reject("/*E", "no decoder layers before / at position 1");
    expect_reject("*E/", "empty MTP pattern after / at position 3");
    expect_reject("*E//*E", "empty MTP pattern after / at position 3");
    expect_reject("*E/*|E", "inside the MTP pattern");
    expect_reject("*E/E*", "E at position 4 must be the last symbol of its MTP pattern");
    expect_reject("[M*[E]", "nested [");
    expect_reject("[MMMMMMMMM]", "more than 8 symbols");
    expect_reject("", "empty");
    char many[EP_MAX_LAYERS + 2];
    memset(many, 'M', EP_MAX_LAYERS + 1);
    many[EP_MAX_LAYERS + 1] = 0;
    expect_reject(many, "more than 512 layers");
}

static void test_stage_marks_and_mtp(void) {
    /* outside brackets every symbol is a layer: M * E | [ME] - | * E, then one MTP layer */
    CU_ASSERT_EQUAL_FATAL(ep_pattern_parse("M*E|[ME]-|*E/*E", &g_plan, g_err), 0);
    CU_ASSERT_EQUAL(g_plan.has_stage_marks, 1);
    CU_ASSERT_EQUAL_FATAL(g_plan.num_layers, 7);
    CU_ASSERT_EQUAL(g_plan.num_mtp, 1);
    int want_stage[] = {0, 0, 0, 1, 1, 2, 2, 2};
    for (int i = 0; i < 8; i++)
        CU_ASSERT_EQUAL(g_plan.layers[i].pp_stage, want_stage[i]);
    CU_ASSERT_EQUAL(g_plan.layers[7].is_mtp, 1);
    CU_ASSERT_EQUAL(g_plan.layers[6].is_mtp, 0);
    CU_ASSERT_STRING_EQUAL(g_plan.layers[3].blocks, "ME");
    CU_ASSERT_STRING_EQUAL(g_plan.layers[7].blocks, "*E");
    int f, n;
    ep_layer_range(&g_plan, 3, 1, 0, 0, &f, &n);
    CU_ASSERT_EQUAL(f, 0);
    CU_ASSERT_EQUAL(n, 3);
    ep_layer_range(&g_plan, 3, 1, 1, 0, &f, &n);
    CU_ASSERT_EQUAL(f, 3);
    CU_ASSERT_EQUAL(n, 2);
    ep_layer_range(&g_plan, 3, 1, 2, 0, &f, &n);
    CU_ASSERT_EQUAL(f, 5);
    CU_ASSERT_EQUAL(n, 3); /* two decoder layers + the MTP layer */

    /* an MTP segment is one logical layer; brackets in it only group visually */
    CU_ASSERT_EQUAL_FATAL(ep_pattern_parse("M*M*/[*E]/*E", &g_plan, g_err), 0);
    CU_ASSERT_EQUAL(g_plan.num_layers, 4);
    CU_ASSERT_EQUAL(g_plan.num_mtp, 2);
    CU_ASSERT_STRING_EQUAL(g_plan.layers[4].blocks, "*E");
    CU_ASSERT_EQUAL(g_plan.layers[4].is_moe, 1);
}

static void test_interleaved_ranges(void) {
    ep_config cfg;
    CU_ASSERT_EQUAL_FATAL(
        ep_test_config(&cfg,
                       "--num-layers 8 --pipeline-model-parallel-size 2 "
                       "--num-virtual-stages-per-pipeline-rank 2 --mtp-num-layers 1",
                       g_err),
        0);
    CU_ASSERT_EQUAL_FATAL(ep_layer_plan_build(&cfg, &g_plan, g_err), 0);
    CU_ASSERT_EQUAL(g_plan.num_layers, 8);
    CU_ASSERT_EQUAL(g_plan.num_mtp, 1);
    /* chunk c of stage s holds slice c*pp + s */
    const int want[2][2][2] = {{{0, 2}, {4, 2}}, {{2, 2}, {6, 3}}}; /* [stage][chunk] = {first,n} */
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 2; c++) {
            int f, n;
            ep_layer_range(&g_plan, 2, 2, s, c, &f, &n);
            CU_ASSERT_EQUAL(f, want[s][c][0]);
            CU_ASSERT_EQUAL(n, want[s][c][1]);
        }
    /* out-of-range stage or chunk holds nothing */
    int f, n;
    ep_layer_range(&g_plan, 2, 2, 2, 0, &f, &n);
    CU_ASSERT_EQUAL(n, 0);
    ep_layer_range(&g_plan, 2, 2, 0, 2, &f, &n);
    CU_ASSERT_EQUAL(n, 0);
}

static void test_ranges_cover_every_layer_once(void) {
    ep_config cfg;
    const int shapes[][3] = {{16, 4, 2}, {16, 1, 1}, {12, 3, 1}, {24, 2, 3}, {61, 1, 1}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        char flags[256];
        snprintf(
            flags, sizeof flags,
            "--num-layers %d --pipeline-model-parallel-size %d "
            "--num-virtual-stages-per-pipeline-rank %d --global-batch-size 12 --mtp-num-layers 1",
            shapes[k][0], shapes[k][1], shapes[k][2]);
        CU_ASSERT_EQUAL_FATAL(ep_test_config(&cfg, flags, g_err), 0);
        CU_ASSERT_EQUAL_FATAL(ep_layer_plan_build(&cfg, &g_plan, g_err), 0);
        int seen[EP_MAX_LAYERS] = {0}, pp = shapes[k][1], vpp = shapes[k][2];
        for (int s = 0; s < pp; s++)
            for (int c = 0; c < vpp; c++) {
                int f, n;
                ep_layer_range(&g_plan, pp, vpp, s, c, &f, &n);
                CU_ASSERT_EQUAL(n, shapes[k][0] / (pp * vpp) + (s == pp - 1 && c == vpp - 1));
                for (int i = f; i < f + n; i++)
                    seen[i]++;
            }
        for (int i = 0; i < g_plan.num_layers + g_plan.num_mtp; i++)
            CU_ASSERT_EQUAL(seen[i], 1);
    }
}

/* Stage s, chunk c -> {first, count} of Megatron-LM's uneven split, for one flag set. */
static void expect_uneven(const char *flags, int pp, int vpp, const int (*want)[2]) {
    ep_config cfg;
    CU_ASSERT_EQUAL_FATAL(ep_test_config(&cfg, flags, g_err), 0);
    CU_ASSERT_EQUAL_FATAL(ep_layer_plan_build(&cfg, &g_plan, g_err), 0);
    int seen[EP_MAX_LAYERS] = {0};
    for (int c = 0; c < vpp; c++)
        for (int s = 0; s < pp; s++) {
            int f, n;
            ep_layer_range(&g_plan, pp, vpp, s, c, &f, &n);
            CU_ASSERT_EQUAL(f, want[c * pp + s][0]);
            CU_ASSERT_EQUAL(n, want[c * pp + s][1]);
            for (int i = f; i < f + n; i++)
                seen[i]++;
        }
    for (int i = 0; i < g_plan.num_layers + g_plan.num_mtp; i++)
        CU_ASSERT_EQUAL(seen[i], 1);
}

/* --decoder-first/last-pipeline-num-layers: the offsets of Megatron-LM's
 * get_transformer_layer_offset, worked out by hand. */
static void test_uneven_stages(void) {
    /* DeepSeek-V3's 61 layers on 8 stages: 5 first, 8 last, 6 x 8 between; MTP on the last */
    const int dsv3[8][2] = {{0, 5},  {5, 8},  {13, 8}, {21, 8},
                            {29, 8}, {37, 8}, {45, 8}, {53, 8 + 1}};
    expect_uneven("--num-layers 61 --pipeline-model-parallel-size 8 --mtp-num-layers 1 "
                  "--decoder-first-pipeline-num-layers 5 --decoder-last-pipeline-num-layers 8 "
                  "--global-batch-size 8",
                  8, 1, dsv3);
    /* VPP 2: each chunk is a run of 8 layers, first 1 + middle 3 + 3 + last 1 */
    const int vpp2[8][2] = {{0, 1}, {1, 3}, {4, 3}, {7, 1}, {8, 1}, {9, 3}, {12, 3}, {15, 1}};
    expect_uneven("--num-layers 16 --pipeline-model-parallel-size 4 "
                  "--num-virtual-stages-per-pipeline-rank 2 --decoder-first-pipeline-num-layers 2 "
                  "--decoder-last-pipeline-num-layers 2 --global-batch-size 8",
                  4, 2, vpp2);
    /* only the first stage given: the last stage is a middle one */
    const int first_only[3][2] = {{0, 2}, {2, 3}, {5, 3}};
    expect_uneven("--num-layers 8 --pipeline-model-parallel-size 3 "
                  "--decoder-first-pipeline-num-layers 2 --global-batch-size 6",
                  3, 1, first_only);
}

static void test_gpt_plan(void) {
    ep_config cfg;
    CU_ASSERT_EQUAL_FATAL(
        ep_test_config(&cfg, "--moe-layer-freq ([0]*1+[1]*3) --mtp-num-layers 2", g_err), 0);
    CU_ASSERT_EQUAL_FATAL(ep_layer_plan_build(&cfg, &g_plan, g_err), 0);
    CU_ASSERT_EQUAL(g_plan.num_layers, 4);
    CU_ASSERT_EQUAL(g_plan.num_mtp, 2);
    CU_ASSERT_STRING_EQUAL(g_plan.layers[0].blocks, "*-");
    CU_ASSERT_EQUAL(g_plan.layers[0].is_moe, 0);
    CU_ASSERT_STRING_EQUAL(g_plan.layers[1].blocks, "*E");
    CU_ASSERT_EQUAL(g_plan.layers[3].is_moe, 1);
    CU_ASSERT_EQUAL(g_plan.layers[4].is_mtp, 1);
    CU_ASSERT_STRING_EQUAL(g_plan.layers[4].blocks, "*E"); /* like the last decoder layer */
    CU_ASSERT_EQUAL(g_plan.layers[5].is_mtp, 1);
    CU_ASSERT_EQUAL(g_plan.layers[0].pp_stage, -1);

    CU_ASSERT_EQUAL_FATAL(ep_test_config(&cfg, "--num-experts 0", g_err), 0);
    CU_ASSERT_EQUAL_FATAL(ep_layer_plan_build(&cfg, &g_plan, g_err), 0);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_STRING_EQUAL(g_plan.layers[i].blocks, "*-");

    /* a hybrid pattern without an MTP part: MTP layers are attention + MoE */
    CU_ASSERT_EQUAL_FATAL(
        ep_test_config(&cfg, "--hybrid-override-pattern M[*E]M- --mtp-num-layers 1", g_err), 0);
    CU_ASSERT_EQUAL_FATAL(ep_layer_plan_build(&cfg, &g_plan, g_err), 0);
    CU_ASSERT_EQUAL(g_plan.num_mtp, 1);
    CU_ASSERT_STRING_EQUAL(g_plan.layers[4].blocks, "*E");
    CU_ASSERT_EQUAL(cfg.moe_layer_is_moe[1], 1);
    CU_ASSERT_EQUAL(cfg.moe_layer_is_moe[3], 0);
}

static void test_freq_parser(void) {
    int m[EP_MAX_LAYERS];
    CU_ASSERT_EQUAL_FATAL(ep_moe_layer_freq_parse("3", 7, m, g_err), 0);
    const int want[] = {1, 0, 0, 1, 0, 0, 1};
    for (int i = 0; i < 7; i++)
        CU_ASSERT_EQUAL(m[i], want[i]);
    CU_ASSERT_EQUAL_FATAL(ep_moe_layer_freq_parse("( [0]*3 + [1]*58 )", 61, m, g_err), 0);
    CU_ASSERT_EQUAL(m[2], 0);
    CU_ASSERT_EQUAL(m[3], 1);
    CU_ASSERT_EQUAL(m[60], 1);
    CU_ASSERT_EQUAL(ep_moe_layer_freq_parse("[0]*3+[1]*57", 61, m, g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(
        strstr(g_err, "--moe-layer-freq lists 60 layers but --num-layers is 61"));
    CU_ASSERT_EQUAL(ep_moe_layer_freq_parse("[0]*3+", 3, m, g_err), -1);
    CU_ASSERT_EQUAL(ep_moe_layer_freq_parse("[0]*99999999", 3, m, g_err), -1);
    CU_ASSERT_EQUAL(ep_moe_layer_freq_parse("[]", 3, m, g_err), -1);
    CU_ASSERT_EQUAL(ep_moe_layer_freq_parse("1", 0, m, g_err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(g_err, "--num-layers 0"));
}

void ep_suite_layers(void) {
    CU_pSuite s = CU_add_suite("layers", NULL, NULL);
    CU_add_test(s, "pattern accepts [*-], [*E], M[M*]-", test_accepts_groups);
    CU_add_test(s, "pattern rejects nesting, empty groups, misplaced E, unknown symbols",
                test_rejects);
    CU_add_test(s, "| stage marks and / MTP layers", test_stage_marks_and_mtp);
    CU_add_test(s, "interleaved stage/chunk ranges (Megatron)", test_interleaved_ranges);
    CU_add_test(s, "ranges cover every layer once", test_ranges_cover_every_layer_once);
    CU_add_test(s, "uneven first/last pipeline stages (Megatron offsets)", test_uneven_stages);
    CU_add_test(s, "GPT plan from --moe-layer-freq, MTP like the last layer", test_gpt_plan);
    CU_add_test(s, "--moe-layer-freq parser", test_freq_parser);
}
