/* Trace writer and atomic output files: complete files appear only on close/commit, aborted ones
 * leave nothing behind, JSON strings are escaped. */
#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ep_io.h"
#include "ep_trace.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

static void tmp_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "/tmp/ep_test_%ld_%s", (long)getpid(), name);
}

static void test_trace_roundtrip(void)
{
    char path[256], err[EP_ERRLEN];
    tmp_path(path, sizeof path, "trace.json");
    ep_trace *t = ep_trace_open(path, "{\"program\":\"test\"}", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(access(path, F_OK), -1); /* not visible before close */
    ep_trace_name_track(t, 1, 0, "comp");
    ep_trace_event ev = {.rank = 1, .stream = 0, .name = "mb0.c0.L2.dispatch.fwd",
                         .kind = "a2a_dispatch", .ts_us = 10.5, .dur_us = 2.25, .mb = 0,
                         .layer = 2, .bytes = 4096, .flops = 0};
    ep_trace_add(t, &ev);
    CU_ASSERT_EQUAL(ep_trace_close(t, err), 0);
    char *s = slurp(path);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"traceEvents\":["));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"otherData\":{\"program\":\"test\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"name\":\"mb0.c0.L2.dispatch.fwd\",\"pid\":1,\"tid\":0,"
                                     "\"ts\":10.500,\"dur\":2.250"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"kind\":\"a2a_dispatch\",\"mb\":0,\"layer\":2,\"bytes\":4096"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"thread_name\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"comp\"}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\n]}\n"));
    unlink(path);
}

static void test_trace_abort_leaves_nothing(void)
{
    char path[256], tmp[300], err[EP_ERRLEN];
    tmp_path(path, sizeof path, "aborted.json");
    ep_trace *t = ep_trace_open(path, NULL, err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CU_ASSERT_EQUAL(access(tmp, F_OK), 0);
    ep_trace_abort(t);
    CU_ASSERT_EQUAL(access(path, F_OK), -1);
    CU_ASSERT_EQUAL(access(tmp, F_OK), -1);
}

static void test_outfile_bad_dir(void)
{
    ep_outfile o;
    char err[EP_ERRLEN] = "";
    CU_ASSERT_EQUAL(ep_outfile_open(&o, "/nonexistent-dir/x.csv", err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/nonexistent-dir/x.csv"));
}

static void test_json_escape(void)
{
    char path[256], err[EP_ERRLEN];
    tmp_path(path, sizeof path, "esc.json");
    ep_outfile o;
    CU_ASSERT_EQUAL_FATAL(ep_outfile_open(&o, path, err), 0);
    ep_json_string(o.f, "a\"b\\c\nd\x01");
    CU_ASSERT_EQUAL(ep_outfile_commit(&o, err), 0);
    CU_ASSERT_STRING_EQUAL(slurp(path), "\"a\\\"b\\\\c\\nd\\u0001\"");
    unlink(path);
}

static void test_meta_has_revision(void)
{
    char path[256], err[EP_ERRLEN];
    tmp_path(path, sizeof path, "meta.json");
    ep_outfile o;
    CU_ASSERT_EQUAL_FATAL(ep_outfile_open(&o, path, err), 0);
    ep_write_meta_json(o.f, "epsim", "\"topology\":\"dgx16\"");
    CU_ASSERT_EQUAL(ep_outfile_commit(&o, err), 0);
    char *s = slurp(path);
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "{\"program\":\"epsim\",\"version\":\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, "\"git_revision\":\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(s, ",\"topology\":\"dgx16\"}"));
    CU_ASSERT_TRUE(strlen(ep_git_revision()) > 0);
    unlink(path);
}

void ep_suite_trace(void)
{
    CU_pSuite s = CU_add_suite("trace_and_io", NULL, NULL);
    CU_add_test(s, "trace written whole with the shared format", test_trace_roundtrip);
    CU_add_test(s, "aborted trace leaves no file", test_trace_abort_leaves_nothing);
    CU_add_test(s, "unwritable path names the path", test_outfile_bad_dir);
    CU_add_test(s, "JSON strings escaped", test_json_escape);
    CU_add_test(s, "metadata carries program, version, revision", test_meta_has_revision);
}
