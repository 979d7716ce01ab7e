/* Option tables (core/ep_opts.h): both value forms, flags, integers and numbers with their range,
 * a missing value (strict and any-value), handlers that stop or fail, arguments no row names, and
 * the generated --help lines. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "ep_opts.h"

typedef struct {
    const char *str;
    int flag, num, stopped, nother;
    double x;
    const char *other[8];
    const char *called;
} opts_t;

static int take_other(const char *arg, void *ctx, char err[EP_ERRLEN]) {
    opts_t *o = ctx;
    if (arg[0] == '-' && arg[1] != '-') {
        snprintf(err, EP_ERRLEN, "bad %s", arg);
        return -1;
    }
    o->other[o->nother++] = arg;
    return 0;
}

static int on_call(const ep_opt *row, const char *v, void *ctx, char err[EP_ERRLEN]) {
    opts_t *o = ctx;
    if (!strcmp(row->name, "--stop")) return 1;
    if (!v) { /* --joined alone */
        snprintf(err, EP_ERRLEN, "%s: give it", row->name);
        return -1;
    }
    o->called = v;
    return 0;
}

static int parse(const char *line, opts_t *o, int any_value, char err[EP_ERRLEN]) {
    static char buf[512];
    char *args[32];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *s = NULL, *t = strtok_r(buf, " ", &s); t && n < 32; t = strtok_r(NULL, " ", &s))
        args[n++] = strcmp(t, "''") ? t : "";
    memset(o, 0, sizeof *o);
    const ep_opt rows[] = {
        {.name = "--str", .takes = EP_OPT_VALUE, .kind = EP_OPT_STRING, .target = &o->str},
        {.name = "--flag", .kind = EP_OPT_FLAG, .target = &o->flag, .set = 7},
        {.name = "--num",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_INT,
         .target = &o->num,
         .min = 1,
         .max = 10},
        {.name = "--x",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_DOUBLE,
         .target = &o->x,
         .min = 0,
         .max = 1,
         .bad = ": give 0 to 1"},
        {.name = "", .help = "heading:"},
        {.name = "--call",
         .takes = EP_OPT_VALUE,
         .kind = EP_OPT_CALL,
         .fn = on_call,
         .missing = "--call: give it"},
        {.name = "--joined", .takes = EP_OPT_JOINED, .kind = EP_OPT_CALL, .fn = on_call},
        {.name = "--stop", .kind = EP_OPT_CALL, .fn = on_call},
        {.name = NULL},
    };
    ep_opts p = {rows, take_other, o, any_value};
    err[0] = 0;
    return ep_opts_parse(&p, n, args, err);
}

static void test_forms(void) {
    opts_t o;
    char err[EP_ERRLEN];
    CU_ASSERT_EQUAL(parse("--str a --flag --num 3 --x=0.5 pos --other v", &o, 0, err), 0);
    CU_ASSERT_STRING_EQUAL(o.str, "a");
    CU_ASSERT_EQUAL(o.flag, 7);
    CU_ASSERT_EQUAL(o.num, 3);
    CU_ASSERT_DOUBLE_EQUAL(o.x, 0.5, 0);
    CU_ASSERT_EQUAL(o.nother, 3);
    CU_ASSERT_STRING_EQUAL(o.other[0], "pos");
    CU_ASSERT_STRING_EQUAL(o.other[1], "--other");
    CU_ASSERT_EQUAL(parse("--str=b --num=10 --call=c --joined=d", &o, 0, err), 0);
    CU_ASSERT_STRING_EQUAL(o.str, "b");
    CU_ASSERT_EQUAL(o.num, 10);
    CU_ASSERT_STRING_EQUAL(o.called, "d");
    /* a flag takes no =value, and a longer name is another option: both go to `other` */
    CU_ASSERT_EQUAL(parse("--flag=1 --strx y", &o, 0, err), 0);
    CU_ASSERT_EQUAL(o.flag, 0);
    CU_ASSERT_EQUAL(o.nother, 3);
    CU_ASSERT_EQUAL(parse("--stop --num 0", &o, 0, err), 1);
    CU_ASSERT_EQUAL(parse("-q", &o, 0, err), -1);
    CU_ASSERT_STRING_EQUAL(err, "bad -q");
}

static void test_errors(void) {
    static const struct {
        const char *line, *msg;
        int any;
    } bad[] = {
        {"--str", "--str needs a value", 0},
        {"--str=", "--str needs a value", 0},
        {"--str --flag", "--str needs a value", 0},
        {"--str ''", "--str needs a value", 0},
        {"--num 0", "--num 0 is out of range (1 to 10)", 0},
        {"--num 11", "--num 11 is out of range (1 to 10)", 0},
        {"--num 2x", "--num 2x is out of range (1 to 10)", 0},
        {"--num 99999999999999999999", "--num 99999999999999999999 is out of range", 0},
        {"--x nan", "--x nan: give 0 to 1", 0},
        {"--x 2", "--x 2: give 0 to 1", 0},
        {"--call", "--call: give it", 0},
        {"--call --flag", "--call: give it", 0},
        {"--joined", "--joined: give it", 0},
        {"--num", "--num needs a value", 1},
        {"--num --flag", "--num --flag is out of range (1 to 10)", 1},
    };
    char err[EP_ERRLEN];
    opts_t o;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i].line, &o, bad[i].any, err);
        if (rc != -1 || strncmp(err, bad[i].msg, strlen(bad[i].msg)))
            printf("\n  '%s': rc %d, '%s'\n", bad[i].line, rc, err);
        CU_ASSERT_EQUAL(rc, -1);
        CU_ASSERT_NSTRING_EQUAL(err, bad[i].msg, strlen(bad[i].msg));
    }
    /* any value: the next argument, even empty or a --flag */
    CU_ASSERT_EQUAL(parse("--str --flag", &o, 1, err), 0);
    CU_ASSERT_STRING_EQUAL(o.str, "--flag");
    CU_ASSERT_EQUAL(parse("--str=", &o, 1, err), 0);
    CU_ASSERT_STRING_EQUAL(o.str, "");
}

static void test_help(void) {
    const ep_opt rows[] = {
        {.name = "--str", .takes = EP_OPT_VALUE, .arg = "S", .help = "a string\nsecond line"},
        {.name = "--hidden"},
        {.name = "", .help = "heading:"},
        {.name = "--flag", .help = "a flag"},
        {.name = "--log", .takes = EP_OPT_JOINED, .arg = "...", .help = "joined"},
        {.name = "--a-long-option", .help = "shown", .shown = "--a-long-option, -l "},
        {.name = NULL},
    };
    char buf[1024] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    ep_opts_print_help(f, rows, 10);
    fclose(f);
    CU_ASSERT_STRING_EQUAL(buf, "  --str S   a string\n"
                                "            second line\n"
                                "  heading:\n"
                                "  --flag    a flag\n"
                                "  --log=... joined\n"
                                "  --a-long-option, -l  shown\n");
}

void ep_suite_opts(void) {
    CU_pSuite s = CU_add_suite("program option tables", NULL, NULL);
    CU_add_test(s, "both value forms, flags, other arguments, stop", test_forms);
    CU_add_test(s, "missing and bad values: one line", test_errors);
    CU_add_test(s, "--help lines from the rows", test_help);
}
