/* Output files (core/io.c): what each kind of path gets (a regular file replaced whole, a symlink
 * written through, a FIFO and a character device written in place, a directory refused), sets of
 * outputs all or nothing, temporaries removed on write errors and on signals. Every special file is
 * made under a temporary directory of the test: never the machine's /dev/null or /dev/full. */
#define _DEFAULT_SOURCE /* mknod, makedev */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ep_io.h"
#include "test_dir.h"


static int setup(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/ep_io_test_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int write_text(const char *path, const char *text, char err[EP_ERRLEN]) {
    ep_outfile o;
    if (ep_outfile_open(&o, path, err) != 0) return -1;
    fputs(text, o.f);
    return ep_outfile_commit(&o, err);
}

static const char *slurp(const char *path) {
    static char buf[4096];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    return buf;
}

/* A regular file is replaced whole and keeps its permission bits. */
static void test_regular_replaced(void) {
    char p[512], err[EP_ERRLEN];
    in_dir(p, sizeof p, "r.txt");
    CU_ASSERT_EQUAL_FATAL(write_text(p, "old\n", err), 0);
    chmod(p, 0640);
    CU_ASSERT_EQUAL(write_text(p, "new\n", err), 0);
    CU_ASSERT_STRING_EQUAL(slurp(p), "new\n");
    struct stat st;
    CU_ASSERT_EQUAL(stat(p, &st), 0);
    CU_ASSERT_EQUAL(st.st_mode & 0777, 0640);
    CU_ASSERT_EQUAL(entries(), 1);
    unlink(p);
}

/* A symbolic link is written through: the link stays, its target gets the text. */
static void test_symlink_written_through(void) {
    char target[512], link[512], err[EP_ERRLEN];
    in_dir(target, sizeof target, "target.txt");
    in_dir(link, sizeof link, "link.txt");
    CU_ASSERT_EQUAL_FATAL(write_text(target, "old\n", err), 0);
    CU_ASSERT_EQUAL_FATAL(symlink("target.txt", link), 0); /* relative to the link's folder */
    CU_ASSERT_EQUAL(write_text(link, "through\n", err), 0);
    struct stat st;
    CU_ASSERT_EQUAL(lstat(link, &st), 0);
    CU_ASSERT_TRUE(S_ISLNK(st.st_mode));
    CU_ASSERT_STRING_EQUAL(slurp(target), "through\n");
    /* a dangling link: its target is created */
    unlink(target);
    CU_ASSERT_EQUAL(write_text(link, "made\n", err), 0);
    CU_ASSERT_EQUAL(lstat(link, &st), 0);
    CU_ASSERT_TRUE(S_ISLNK(st.st_mode));
    CU_ASSERT_STRING_EQUAL(slurp(target), "made\n");
    CU_ASSERT_EQUAL(entries(), 2);
    unlink(link);
    unlink(target);
}

/* A FIFO is written in place (a reader gets the text), never replaced by a regular file. */
static void test_fifo_in_place(void) {
    char fifo[512], err[EP_ERRLEN];
    in_dir(fifo, sizeof fifo, "pipe");
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    CU_ASSERT_TRUE(ep_output_in_place(fifo));
    CU_ASSERT_EQUAL(ep_output_check(fifo, err), 0);
    fflush(NULL);
    pid_t p = fork();
    if (p == 0) { /* the reader */
        char buf[64] = "";
        int fd = open(fifo, O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        _exit(n == 9 && memcmp(buf, "via fifo\n", 9) == 0 ? 0 : 1);
    }
    CU_ASSERT_EQUAL(write_text(fifo, "via fifo\n", err), 0);
    int st;
    waitpid(p, &st, 0);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    struct stat s;
    CU_ASSERT_EQUAL(lstat(fifo, &s), 0);
    CU_ASSERT_TRUE(S_ISFIFO(s.st_mode));
    CU_ASSERT_EQUAL(entries(), 1);
    unlink(fifo);
}

/* As root: character devices made here with mknod (1,3 is null, 1,7 is full) are written in place
 * and stay devices; a write error on the full one is reported and leaves nothing. */
static void test_char_devices(void) {
    char null[512], full[512], err[EP_ERRLEN];
    if (geteuid() != 0) return; /* mknod needs root */
    in_dir(null, sizeof null, "null");
    in_dir(full, sizeof full, "full");
    if (mknod(null, S_IFCHR | 0666, makedev(1, 3)) != 0 ||
        mknod(full, S_IFCHR | 0666, makedev(1, 7)) != 0) {
        unlink(null);
        return; /* a container without device nodes */
    }
    CU_ASSERT_EQUAL(write_text(null, "gone\n", err), 0);
    CU_ASSERT_NOT_EQUAL(write_text(full, "no room\n", err), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "No space left on device"));
    struct stat st;
    CU_ASSERT_EQUAL(stat(null, &st), 0);
    CU_ASSERT_TRUE(S_ISCHR(st.st_mode));
    CU_ASSERT_EQUAL(stat(full, &st), 0);
    CU_ASSERT_TRUE(S_ISCHR(st.st_mode));
    CU_ASSERT_EQUAL(entries(), 2);
    unlink(null);
    unlink(full);
}

/* A directory, a missing folder: refused by the check, with the path. */
static void test_check_refuses(void) {
    char p[512], err[EP_ERRLEN];
    CU_ASSERT_EQUAL(ep_output_check(g_dir, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "it is a directory"));
    in_dir(p, sizeof p, "no/such/dir/x.csv");
    CU_ASSERT_EQUAL(ep_output_check(p, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "no/such/dir"));
    CU_ASSERT_EQUAL(ep_output_check("-", err), 0);
    CU_ASSERT_EQUAL(entries(), 0);
}

/* A set: nothing appears until ep_outputs_commit; ep_outputs_abort leaves nothing. */
static void test_set_all_or_nothing(void) {
    char a[512], b[512], err[EP_ERRLEN];
    in_dir(a, sizeof a, "a.json");
    in_dir(b, sizeof b, "b.csv");
    ep_outputs_begin();
    CU_ASSERT_EQUAL(write_text(a, "a\n", err), 0);
    CU_ASSERT_FALSE(access(a, F_OK) == 0); /* complete, not yet renamed */
    ep_outputs_abort();
    CU_ASSERT_EQUAL(entries(), 0);
    ep_outputs_begin();
    CU_ASSERT_EQUAL(write_text(a, "a\n", err), 0);
    CU_ASSERT_EQUAL(write_text(b, "b\n", err), 0);
    CU_ASSERT_EQUAL(ep_outputs_commit(err), 0);
    CU_ASSERT_STRING_EQUAL(slurp(a), "a\n");
    CU_ASSERT_STRING_EQUAL(slurp(b), "b\n");
    CU_ASSERT_EQUAL(entries(), 2);
    unlink(a);
    unlink(b);
}

/* A full disk, as a file-size limit: the write fails, the error says why, no temporary stays. */
static void test_write_error_cleans_up(void) {
    char p[512];
    in_dir(p, sizeof p, "big.csv");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &rl);
        char err[EP_ERRLEN];
        ep_outfile o;
        if (ep_outfile_open(&o, p, err) != 0) _exit(3);
        for (int i = 0; i < 100000; i++)
            fputs("0123456789abcdef\n", o.f);
        int rc = ep_outfile_commit(&o, err);
        _exit(rc != 0 && strstr(err, "File too large") ? 0 : 1);
    }
    int st;
    waitpid(pid, &st, 0);
    CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CU_ASSERT_EQUAL(entries(), 0);
}

/* SIGTERM or SIGINT while a temporary is being written: the process ends by that signal and the
 * temporary is gone. */
static void test_signal_cleans_up(void) {
    static const int sigs[] = {SIGTERM, SIGINT};
    for (int k = 0; k < 2; k++) {
        char p[512];
        in_dir(p, sizeof p, "trace.json");
        int ready[2];
        CU_ASSERT_EQUAL_FATAL(pipe(ready), 0);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            char err[EP_ERRLEN];
            ep_outfile o;
            close(ready[0]);
            if (ep_outfile_open(&o, p, err) != 0) _exit(3);
            fputs("partial", o.f);
            fflush(o.f);
            if (write(ready[1], "x", 1) != 1) _exit(4);
            for (;;)
                pause();
        }
        close(ready[1]);
        char x;
        CU_ASSERT_EQUAL(read(ready[0], &x, 1), 1);
        close(ready[0]);
        CU_ASSERT_EQUAL(entries(), 1); /* the temporary */
        kill(pid, sigs[k]);
        int st;
        waitpid(pid, &st, 0);
        CU_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == sigs[k]);
        CU_ASSERT_EQUAL(entries(), 0);
    }
}

static void test_escape(void) {
    char out[256];
    CU_ASSERT_STRING_EQUAL(ep_escape_text("a\x01\x1b[31mb\x7f", out, sizeof out),
                           "a\\x01\\x1b[31mb\\x7f");
    CU_ASSERT_STRING_EQUAL(ep_escape_text("caf\xc3\xa9 \xff", out, sizeof out),
                           "caf\xc3\xa9 \\xff");
}

/* Input files: plain, or .xz read through xz; the committed name found with or without .xz; a
 * corrupt .xz fails at close (xz-utils is installed with the test dependencies). */
static void test_infile(void) {
    char plain[600], xz[600], bad[700], found[700], err[EP_ERRLEN], cmd[1400];
    snprintf(plain, sizeof plain, "%s/in.json", g_dir);
    snprintf(xz, sizeof xz, "%s/packed.json", g_dir);
    CU_ASSERT_EQUAL_FATAL(write_text(plain, "{\"a\": 1}\n", err), 0);
    CU_ASSERT_EQUAL_FATAL(write_text(xz, "{\"b\": 2}\n", err), 0);
    snprintf(cmd, sizeof cmd, "xz -f %s", xz);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0); /* leaves packed.json.xz only */
    static const struct {
        const char *asked, *found, *text;
    } cases[] = {{"in.json", "in.json", "{\"a\": 1}\n"},
                 {"packed.json", "packed.json.xz", "{\"b\": 2}\n"}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char asked[700], want[700], text[64] = {0};
        snprintf(asked, sizeof asked, "%s/%s", g_dir, cases[k].asked);
        snprintf(want, sizeof want, "%s/%s", g_dir, cases[k].found);
        CU_ASSERT_EQUAL(ep_infile_find(asked, found, sizeof found), 0);
        CU_ASSERT_STRING_EQUAL(found, want);
        ep_infile in;
        CU_ASSERT_EQUAL_FATAL(ep_infile_open(&in, found, err), 0);
        size_t n = fread(text, 1, sizeof text - 1, in.f);
        CU_ASSERT_EQUAL(n, strlen(cases[k].text));
        CU_ASSERT_STRING_EQUAL(text, cases[k].text);
        CU_ASSERT_EQUAL(ep_infile_close(&in), 0);
    }
    snprintf(found, sizeof found, "%s/none.json", g_dir);
    CU_ASSERT_EQUAL(ep_infile_find(found, bad, sizeof bad), -1);
    ep_infile in;
    CU_ASSERT_EQUAL(ep_infile_open(&in, found, err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "none.json"));
    snprintf(bad, sizeof bad, "%s/corrupt.json.xz", g_dir);
    CU_ASSERT_EQUAL_FATAL(write_text(bad, "not xz at all\n", err), 0);
    CU_ASSERT_EQUAL_FATAL(ep_infile_open(&in, bad, err), 0);
    char sink[64];
    while (fread(sink, 1, sizeof sink, in.f) > 0) {
    }
    CU_ASSERT_EQUAL(ep_infile_close(&in), -1);
}

void ep_suite_io(void) {
    CU_pSuite s = CU_add_suite("output files", setup, teardown);
    CU_add_test(s, "a regular file is replaced whole, mode kept", test_regular_replaced);
    CU_add_test(s, "a symlink is written through", test_symlink_written_through);
    CU_add_test(s, "a FIFO is written in place", test_fifo_in_place);
    CU_add_test(s, "character devices (mknod, as root) stay devices", test_char_devices);
    CU_add_test(s, "directories and missing folders refused", test_check_refuses);
    CU_add_test(s, "a set of outputs: all or nothing", test_set_all_or_nothing);
    CU_add_test(s, "a write error (file-size limit) leaves nothing", test_write_error_cleans_up);
    CU_add_test(s, "SIGTERM and SIGINT remove the temporary", test_signal_cleans_up);
    CU_add_test(s, "echoed text is escaped", test_escape);
    CU_add_test(s, "input files: plain or .xz, found either way", test_infile);
}
