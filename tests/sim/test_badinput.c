/* Bad and unusual input end to end (issue 27; docs/epsim.md, "Failure behaviour"): every case gets
 * exit status 2 and one line on stderr, nothing on stdout and no output file, or runs; nothing
 * crashes, nothing outside the outputs is touched. Special files are made under a temporary
 * directory of the test, never the machine's /dev/null or /dev/full. */
#define _DEFAULT_SOURCE /* mknod, makedev */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "ep_config.h"
#include "sim_test_util.h"
#include "test_dir.h"

/* A model that simulates in a blink on h200x2. */
#define TINY                                                                                       \
    "--topo h200x2 --num-layers 1 --moe-layer-freq 1 --mtp-num-layers 0 --seq-length 512 "         \
    "--global-batch-size 2"

static int setup(void) {
    snprintf(g_dir, sizeof g_dir, "%s/sim_bad_%d_XXXXXX", EP_BINARY_DIR, (int)getpid());
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx %s; rm -rf %s", g_dir, g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *text, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(text, 1, len, f);
    fclose(f);
}

/* Lines of epsim's stderr, without the three lines AddressSanitizer prints in the sanitizer build
 * when SimGrid switches to an actor's stack (a run that fails after simulating). */
static int err_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += !(strstr(line, "WARNING: ASan is ignoring requested __asan_handle_no_return") ||
               strstr(line, "False positive error reports may follow") ||
               strstr(line, "github.com/google/sanitizers/issues/189"));
    fclose(f);
    return n;
}

/* Runs a shell command; its exit status, 128 + signal when killed. */
static int sh(const char *cmd) {
    fflush(NULL);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* epsim args: exit 2, one line on stderr containing `msg` (when given), nothing on stdout, and
 * the test directory as it was. */
static void expect_refused(const char *args, const char *msg) {
    char out[512], err[512], full[8192];
    tmp_path(out, sizeof out, "bad.out");
    tmp_path(err, sizeof err, "bad.err");
    int before = entries();
    snprintf(full, sizeof full, "%s --summary-json %s/refused.json", args, g_dir);
    int rc = epsim_exec(full, out, err);
    int lines = err_lines(err);
    if (rc != 2 || lines != 1 || (msg && !file_has(err, msg))) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "head -c 400 %s", err);
        fprintf(stderr, "\n  epsim %s: exit %d, %d lines on stderr:\n", args, rc, lines);
        sh(cmd);
    }
    CU_ASSERT_EQUAL(rc, 2);
    CU_ASSERT_EQUAL(lines, 1);
    CU_ASSERT_EQUAL(lines_of(out), 0);
    if (msg) CU_ASSERT(file_has(err, msg));
    CU_ASSERT_EQUAL(entries(), before);
    remove(out);
    remove(err);
}

/* Every malformed platform of the fuzz corpus: refused with one line before SimGrid sees it. */
static void test_platform_corpus(void) {
    char dir[512], args[1024];
    snprintf(dir, sizeof dir, "%s/tests/fuzz/platforms", EP_SOURCE_DIR);
    DIR *d = opendir(dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, ".xml")) continue;
        snprintf(args, sizeof args, "--topo %s/%s --num-layers 1", dir, e->d_name);
        expect_refused(args, "epsim: platform ");
        n++;
    }
    closedir(d);
    CU_ASSERT(n >= 25);
}

/* Each file argument missing, empty, a directory, binary, unreadable (not as root): exit 2. An
 * empty argument file holds no flags: the model is the library default, named as the file. */
static void test_file_arguments(void) {
    char empty[512], bin[512], unread[512], args[2048];
    in_dir(empty, sizeof empty, "empty");
    in_dir(bin, sizeof bin, "binary");
    in_dir(unread, sizeof unread, "unreadable");
    write_file(empty, "", 0);
    write_file(bin,
               "\x7f"
               "ELF\x01\x02\x1b[2J\xff\xfe{",
               13);
    write_file(unread, "--num-layers 1\n", 15);
    chmod(unread, 0);
    static const char *const kinds[] = {"--topo %s", "--topo h200x2 --calib %s", TINY " @%s"};
    const char *files[] = {"/nonexistent-dir/f", empty, g_dir, bin, unread};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 5; i++) {
            if (i == 4 && geteuid() == 0) continue; /* root reads it anyway */
            if (k == 2 && i == 1) continue;         /* below */
            snprintf(args, sizeof args, kinds[k], files[i]);
            expect_refused(args, NULL);
        }
    /* as root, unreadable for an unprivileged user (setpriv drops to nobody) */
    if (geteuid() == 0 && sh("command -v setpriv >/dev/null") == 0) {
        static const char *const as_nobody[] = {"--topo %s", "--topo h200x2 --calib %s",
                                                "--topo h200x2 @%s"};
        char cmd[4096], err[512];
        tmp_path(err, sizeof err, "nobody.err");
        for (int k = 0; k < 3; k++) {
            snprintf(args, sizeof args, as_nobody[k], unread);
            snprintf(cmd, sizeof cmd,
                     "setpriv --reuid=65534 --regid=65534 --clear-groups %s/sim/epsim %s "
                     ">/dev/null 2>%s",
                     EP_BINARY_DIR, args, err);
            CU_ASSERT_EQUAL(sh(cmd), 2);
            CU_ASSERT_EQUAL(err_lines(err), 1);
            CU_ASSERT(file_has(err, "Permission denied"));
        }
        remove(err);
    }
    char out[512];
    tmp_path(out, sizeof out, "empty.out");
    snprintf(args, sizeof args, TINY " @%s", empty);
    CU_ASSERT_EQUAL(epsim_exec(args, out, NULL), 0);
    CU_ASSERT(file_has(out, "epsim: model empty + flags on h200x2"));
    remove(out);
    remove(empty);
    remove(bin);
    remove(unread);
}

/* A binary argument file is echoed escaped: no control byte reaches the terminal. */
static void test_echo_escaped(void) {
    char bin[512], err[512], args[1024];
    in_dir(bin, sizeof bin, "ctrl.args");
    tmp_path(err, sizeof err, "ctrl.err");
    write_file(bin,
               "\x1b[2J\x07"
               "abc",
               8);
    snprintf(args, sizeof args, TINY " @%s", bin);
    CU_ASSERT_EQUAL(epsim_exec(args, NULL, err), 2);
    FILE *f = fopen(err, "rb");
    int c, ctrl = 0;
    while (f && (c = fgetc(f)) != EOF)
        ctrl += (c < 0x20 && c != '\n') || c == 0x7f;
    if (f) fclose(f);
    CU_ASSERT_EQUAL(ctrl, 0);
    if (!file_has(err, "\\x1b[2J\\x07abc")) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "cat -v %s >&2", err);
        sh(cmd);
    }
    CU_ASSERT(file_has(err, "\\x1b[2J\\x07abc"));
    remove(bin);
    remove(err);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Output paths are checked before anything else: a directory as --trace leaves neither of the
 * other outputs, and a missing directory is reported at once even for DeepSeek-V3 on 1024 GPUs
 * (86 s of simulation). */
static void test_outputs_checked_first(void) {
    char args[2048], a[512], b[512];
    in_dir(a, sizeof a, "a.json");
    in_dir(b, sizeof b, "b.csv");
    snprintf(args, sizeof args, TINY " --summary-json %s --csv %s --trace %s", a, b, g_dir);
    expect_refused(args, "--trace: cannot write");
    double t0 = now();
    snprintf(args, sizeof args,
             "--topo dgx1024 @%s/configs/deepseek-v3.args --csv %s/no/such/dir/x.csv",
             EP_SOURCE_DIR, g_dir);
    expect_refused(args, "no/such/dir");
    CU_ASSERT(now() - t0 < 5);
    snprintf(args, sizeof args, TINY " --csv %s --trace %s", a, a);
    expect_refused(args, "name the same file");
}

/* Outputs through a symlink, into a FIFO, onto character devices made here (as root), and "-":
 * the link and the special files stay what they are. */
static void test_output_kinds(void) {
    char target[512], link[512], fifo[512], got[512], dev[512], cmd[4096];
    in_dir(target, sizeof target, "target.csv");
    in_dir(link, sizeof link, "link.csv");
    in_dir(fifo, sizeof fifo, "fifo.csv");
    in_dir(got, sizeof got, "from_fifo.csv");
    write_file(target, "old\n", 4);
    CU_ASSERT_EQUAL_FATAL(symlink("target.csv", link), 0);
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    snprintf(cmd, sizeof cmd,
             "cat %s >%s & %s/sim/epsim " TINY " --csv %s --summary-json %s "
             ">/dev/null 2>&1; rc=$?; wait; exit $rc",
             fifo, got, EP_BINARY_DIR, fifo, link);
    CU_ASSERT_EQUAL(sh(cmd), 0);
    struct stat st;
    CU_ASSERT(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    CU_ASSERT(file_has(target, "\"iteration_time_s\""));
    CU_ASSERT(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    CU_ASSERT(file_has(got, "rank,stream,name,kind"));
    /* "-": the CSV on stdout, the summary on stderr */
    char out[512], err[512];
    tmp_path(out, sizeof out, "dash.out");
    tmp_path(err, sizeof err, "dash.err");
    CU_ASSERT_EQUAL(epsim_exec(TINY " --csv -", out, err), 0);
    CU_ASSERT(file_has(out, "rank,stream,name,kind"));
    CU_ASSERT(file_has(err, "iteration time"));
    remove(out);
    remove(err);
    if (geteuid() == 0) { /* devices made with mknod here: null and full */
        static const int minor[] = {3, 7};
        for (int k = 0; k < 2; k++) {
            in_dir(dev, sizeof dev, k ? "full" : "null");
            if (mknod(dev, S_IFCHR | 0666, makedev(1, minor[k])) != 0) break;
            char args[2048];
            snprintf(args, sizeof args, TINY " --csv %s", dev);
            if (k == 0) CU_ASSERT_EQUAL(epsim_exec(args, NULL, NULL), 0);
            if (k == 1) expect_refused(args, "No space left on device");
            CU_ASSERT(stat(dev, &st) == 0 && S_ISCHR(st.st_mode));
            remove(dev);
        }
    }
    remove(fifo);
    remove(got);
    remove(link);
    remove(target);
    CU_ASSERT_EQUAL(entries(), 0);
}

/* A full disk (a file-size limit) while writing: exit 2, one line, none of the outputs and no
 * temporary (the summary JSON written first is not left either). */
static void test_write_error_leaves_nothing(void) {
    char cmd[4096], err[512];
    tmp_path(err, sizeof err, "fsize.err");
    snprintf(cmd, sizeof cmd,
             "ulimit -f 64; %s/sim/epsim " TINY " --num-layers 4 --summary-json %s/s.json --csv "
             "%s/big.csv >/dev/null 2>%s",
             EP_BINARY_DIR, g_dir, g_dir, err);
    CU_ASSERT_EQUAL(sh(cmd), 2);
    CU_ASSERT_EQUAL(err_lines(err), 1);
    CU_ASSERT(file_has(err, "File too large"));
    CU_ASSERT_EQUAL(entries(), 0);
    remove(err);
}

/* Memory: refused before building with the estimate and the limit; --max-memory checked. A step
 * that large is sampled unless the whole step is asked for (test_sampled_by_default). */
static void test_memory_guard(void) {
    expect_refused("--topo dgx16 --global-batch-size 16777216 --sample-microbatches 0",
                   "above the limit of");
    expect_refused(TINY " --max-memory 0.0001", "above the limit of 0.0 GiB (--max-memory)");
    expect_refused(TINY " --max-memory lots", "--max-memory 'lots'");
}

/* The summary's first line names the model: the preset, the @file, or the built-in default. */
static void test_model_named(void) {
    char out[512], args[1024], af[512];
    tmp_path(out, sizeof out, "model.out");
    in_dir(af, sizeof af, "ep8.args");
    write_file(af, "--expert-model-parallel-size 2 --use-distributed-optimizer\n", 59);
    CU_ASSERT_EQUAL(epsim_exec("--topo h200x2 --num-layers 2", out, NULL), 0);
    CU_ASSERT(file_has(out, "epsim: model deepseek-v3-proxy16.args + flags on h200x2 ("));
    snprintf(args, sizeof args, "--topo h200x2 @%s", af);
    CU_ASSERT_EQUAL(epsim_exec(args, out, NULL), 0);
    CU_ASSERT(file_has(out, "epsim: model ep8.args on h200x2 ("));
    CU_ASSERT_EQUAL(epsim_exec("--topo h200x2 --no-preset", out, NULL), 0);
    CU_ASSERT(file_has(out, "epsim: model built-in default on h200x2 ("));
    remove(af);
    remove(out);
}

/* --help shows the defaults epsim uses (the preset's 16 layers, EP from the topology); --version;
 * --train-iters is named as without effect. */
static void test_help_version_notes(void) {
    char out[512], err[512];
    tmp_path(out, sizeof out, "help.out");
    tmp_path(err, sizeof err, "help.err");
    CU_ASSERT_EQUAL(epsim_exec("--help", out, NULL), 0);
    CU_ASSERT_EQUAL(sh("true"), 0);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "grep -q -- '--num-layers N .*\\[default 16\\]' %s", out);
    CU_ASSERT_EQUAL(sh(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "grep -q -- '--expert-model-parallel-size N .*\\[default from --topo' %s", out);
    CU_ASSERT_EQUAL(sh(cmd), 0);
    CU_ASSERT_EQUAL(epsim_exec("--version", out, NULL), 0);
    CU_ASSERT(file_has(out, "epsim "));
    CU_ASSERT_EQUAL(lines_of(out), 1);
    CU_ASSERT_EQUAL(epsim_exec(TINY " --train-iters 1000000", NULL, err), 0);
    CU_ASSERT(file_has(err, "accepted without effect on the simulated step: --train-iters"));
    remove(out);
    remove(err);
}

/* Flags and options refused with their own message. */
static void test_refused_flags(void) {
    expect_refused(TINY " --moe-flex-dispatcher-backend hybridep",
                   "--moe-flex-dispatcher-backend has no effect without "
                   "--moe-token-dispatcher-type flex");
    expect_refused(TINY " --moe-hybridep-num-sms 8", "has no effect without the hybridep backend");
    expect_refused(TINY " --hidden-size 9223372036854775807", "is out of range");
    expect_refused(TINY " --seed 99999999999999999999999", "is out of range");
    expect_refused(TINY " --routing-zipf-s 1e999", "is out of range");
    expect_refused("--topo h200x2 --log=nonsense", "--log=nonsense");
    expect_refused("--topo h200x2 --log=root.thres:bogus", "level 'bogus'");
    expect_refused("--topo h200x2 --log=root.fmt:%q", "format sequences");
    expect_refused("--topo h200x2 --log=root.app:bogus", "file:PATH");
    expect_refused("--topo h200x2 --cfg=network/model:Foo", "--cfg");
    expect_refused("--topo", "--topo needs a value");
    expect_refused("--topo=", "--topo needs a value");
    expect_refused("--topo dgx8 --world-size 16", "does not fit topology dgx8");
}

/* Sweeps: every row failing is exit 2 and no CSV; --jobs 0, --shard 3/2 and a missing --out get
 * their own message (the options also as --opt=V); the README's example (with --out) runs. */
static void test_sweep_failures(void) {
    char out[512], args[2048], err[512];
    in_dir(out, sizeof out, "sweep.csv");
    tmp_path(err, sizeof err, "sweep.err");
    static const struct {
        const char *args, *msg;
    } cases[] = {
        {"--grid \"no-such-flag=1,2\"", "none of the 2 configurations could be simulated"},
        {"--grid \"num-layers=1\" --jobs 0", "--jobs 0"},
        {"--grid \"num-layers=1\" --jobs many", "--jobs many"},
        {"--grid \"num-layers=1\" --shard 3/2", "--shard 3/2"},
        {"--grid \"num-layers=1\" --shard 1", "--shard 1"},
        {"--grid \"num-layers\"", "--grid"},
        {"--grid \"num-layers=1\" --csv x.csv", "--csv is not available in a sweep"},
        /* also as --csv=P (before the option table, every run wrote the same P) */
        {"--grid \"num-layers=1\" --csv=x.csv", "--csv is not available in a sweep"},
        {"--grid=\"num-layers=1\" --jobs=0", "--jobs 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "sweep %s --out %s " TINY, cases[i].args, out);
        int rc = epsim_exec(args, NULL, err);
        if (rc != 2 || err_lines(err) != 1 || !file_has(err, cases[i].msg))
            fprintf(stderr, "\n  epsim %s: exit %d\n", args, rc);
        CU_ASSERT_EQUAL(rc, 2);
        CU_ASSERT_EQUAL(err_lines(err), 1);
        CU_ASSERT(file_has(err, cases[i].msg));
        CU_ASSERT_FALSE(file_exists(out));
    }
    CU_ASSERT_EQUAL(epsim_exec("sweep --grid \"num-layers=1\" " TINY, NULL, err), 2);
    CU_ASSERT(file_has(err, "needs --out CSV"));
    /* README: ranks a grid of the EP size and the flex backends */
    snprintf(args, sizeof args,
             "sweep --grid \"expert-model-parallel-size=8,16;moe-flex-dispatcher-backend=deepep,"
             "hybridep\" --moe-token-dispatcher-type flex --jobs 2 --out %s --num-layers 2",
             out);
    CU_ASSERT_EQUAL(epsim_exec(args, NULL, NULL), 0);
    CU_ASSERT_EQUAL(lines_of(out), 5);
    snprintf(args, sizeof args, "grep -c ',ok$' %s | grep -qx 4", out);
    CU_ASSERT_EQUAL(sh(args), 0);
    remove(out);
    remove(err);
}

/* A file of the current directory named like a bundled topology is used, and the run says so. */
static void test_shadowing_named(void) {
    char shadow[512], cmd[4096], err[512];
    in_dir(shadow, sizeof shadow, "dgx8");
    tmp_path(err, sizeof err, "shadow.err");
    snprintf(cmd, sizeof cmd, "cp %s/sim/topos/h200x2.xml %s", EP_SOURCE_DIR, shadow);
    CU_ASSERT_EQUAL_FATAL(sh(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "cd %s && %s/sim/epsim --topo dgx8 --num-layers 1 --moe-layer-freq 1 "
             "--mtp-num-layers 0 >/dev/null 2>%s",
             g_dir, EP_BINARY_DIR, err);
    CU_ASSERT_EQUAL(sh(cmd), 0);
    CU_ASSERT(file_has(err, "note: --topo dgx8 is the file ./dgx8 of the current directory"));
    remove(shadow);
    remove(err);
}

/* Every configuration flag with a missing, non-numeric, negative, zero and huge value: it runs
 * (exit 0) or is refused with one line and no output (exit 2); never anything else. */
static void test_flag_matrix(void) {
    static const char *const values[] = {NULL, "abc", "-5", "0", "99999999999999999999", "1e400"};
    int n, runs = 0, refused = 0;
    const ep_flag *t = ep_config_flags(&n);
    char args[2048], js[512], out[512], err[512];
    in_dir(js, sizeof js, "m.json");
    tmp_path(out, sizeof out, "matrix.out");
    tmp_path(err, sizeof err, "matrix.err");
    for (int i = 0; i < n; i++) {
        if (t[i].type == EP_FLAG_ALIAS) continue;
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            if (t[i].type == EP_FLAG_BOOL)
                snprintf(args, sizeof args, TINY " --summary-json %s --%s=%s", js, t[i].name,
                         values[v] ? values[v] : "");
            else
                snprintf(args, sizeof args, TINY " --summary-json %s --%s %s", js, t[i].name,
                         values[v] ? values[v] : "");
            int rc = epsim_exec(args, out, err);
            if (rc == 0) {
                runs++;
                CU_ASSERT(file_exists(js));
                remove(js);
            } else {
                refused++;
                if (rc != 2 || err_lines(err) != 1 || lines_of(out) != 0)
                    fprintf(stderr, "\n  --%s %s: exit %d, %d lines on stderr\n", t[i].name,
                            values[v] ? values[v] : "(missing)", rc, err_lines(err));
                CU_ASSERT_EQUAL(rc, 2);
                CU_ASSERT_EQUAL(err_lines(err), 1);
                CU_ASSERT_EQUAL(lines_of(out), 0);
                CU_ASSERT_FALSE(file_exists(js));
            }
        }
    }
    CU_ASSERT(refused > 3 * n);
    CU_ASSERT(runs > 0);
    CU_ASSERT_EQUAL(entries(), 0);
    remove(out);
    remove(err);
}

/* One printed command, made runnable from the source folder: the programs and the `build` argument
 * of scripts point at this build, every output (after --out, --csv, --summary-json, --trace, -o,
 * or a .png, and scripts/calibrate.sh's files through CALIB_DIR) goes into the test folder, and a
 * "# ..." comment is dropped. Returns 0, or -1 for a line with placeholders (<name>, ...). */
static int runnable(const char *printed, char *cmd, size_t n) {
    if (strchr(printed, '<') || strstr(printed, "...")) return -1;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", printed);
    char *hash = strstr(buf, " #");
    if (hash) *hash = 0;
    /* calibrations into the test folder; of the published suite (a 2-minute, 15 GiB run) the two
     * Nemotron 3 Nano recompute cases */
    size_t len = (size_t)snprintf(cmd, n,
                                  "cd %s && export CALIB_DIR=%s/calib "
                                  "ONLY='^nemotron3-nano-h100x16-bf16' &&",
                                  EP_SOURCE_DIR, g_dir);
    int first = 1, out_next = 0;
    for (char *tok = strtok(buf, " "); tok && len < n; tok = strtok(NULL, " ")) {
        const char *base = strrchr(tok, '/') ? strrchr(tok, '/') + 1 : tok;
        size_t k = strlen(tok);
        int program = first && !strchr(tok, '=');
        if (program && !strncmp(tok, "./build/", 8))
            len += (size_t)snprintf(cmd + len, n - len, " %s/%s", EP_BINARY_DIR, tok + 8);
        else if (program &&
                 (!strcmp(tok, "epsim") || !strcmp(tok, "epsched") || !strcmp(tok, "epplot")))
            len += (size_t)snprintf(cmd + len, n - len, " %s/%s/%s", EP_BINARY_DIR,
                                    !strcmp(tok, "epsim")     ? "sim"
                                    : !strcmp(tok, "epsched") ? "apps"
                                                              : "plots",
                                    tok);
        else if (!strcmp(tok, "build"))
            len += (size_t)snprintf(cmd + len, n - len, " %s", EP_BINARY_DIR);
        else if (out_next || (k > 4 && !strcmp(tok + k - 4, ".png")))
            len += (size_t)snprintf(cmd + len, n - len, " %s/%s", g_dir, base);
        else
            len += (size_t)snprintf(cmd + len, n - len, " %s", tok);
        out_next = !strcmp(tok, "--out") || !strcmp(tok, "--csv") ||
                   !strcmp(tok, "--summary-json") || !strcmp(tok, "--trace") || !strcmp(tok, "-o");
        if (program) first = 0;
    }
    snprintf(cmd + len, n - len, " >/dev/null 2>&1");
    return 0;
}

/* Runs the commands printed in one markdown file: the "$ " lines of its code blocks,
 * continuations joined. Returns how many ran; each must exit 0. */
static int run_printed_commands(const char *md) {
    char path[512], line[2048], cmd[8192];
    snprintf(path, sizeof path, "%s/%s", EP_SOURCE_DIR, md);
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    int ran = 0, fenced = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "```", 3)) fenced = !fenced;
        if (!fenced || strncmp(line, "$ ", 2) != 0) continue;
        char joined[4096] = "";
        size_t len = 0;
        for (;;) {
            line[strcspn(line, "\n")] = 0;
            size_t k = strlen(line);
            int more = k > 0 && line[k - 1] == '\\';
            if (more) line[k - 1] = ' ';
            len += (size_t)snprintf(joined + len, sizeof joined - len, "%s", line);
            if (!more || !fgets(line, sizeof line, f)) break;
        }
        if (runnable(joined + 2, cmd, sizeof cmd) != 0) continue;
        int rc = sh(cmd);
        if (rc != 0) fprintf(stderr, "\n  %s: %s: exit %d\n", md, joined + 2, rc);
        CU_ASSERT_EQUAL(rc, 0);
        ran++;
    }
    fclose(f);
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf %s/calib %s/*.png %s/*.csv %s/*.json", g_dir, g_dir, g_dir,
             g_dir);
    sh(rm);
    return ran;
}

/* Every command printed in README.md and docs/ (the "$ " lines of code blocks) runs as printed. */
static void test_printed_commands(void) {
    CU_ASSERT(run_printed_commands("README.md") >= 4);
    static const char *const docs[] = {
        "docs/epsim.md", "docs/schedule.md", "docs/validation.md", "docs/calibration.md",
        "docs/plots.md", "docs/routing.md",  "docs/performance.md"};
    int ran = 0;
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++)
        ran += run_printed_commands(docs[i]);
    CU_ASSERT(ran >= 8);
    CU_ASSERT_EQUAL(entries(), 0);
}

void ep_suite_badinput(void) {
    CU_pSuite s = CU_add_suite("bad input end to end", setup, teardown);
    CU_add_test(s, "malformed platforms: one line, exit 2", test_platform_corpus);
    CU_add_test(s, "file arguments: missing, empty, directory, binary, unreadable",
                test_file_arguments);
    CU_add_test(s, "echoed input is escaped", test_echo_escaped);
    CU_add_test(s, "outputs checked before anything else", test_outputs_checked_first);
    CU_add_test(s, "symlink, FIFO, devices, -: written as what they are", test_output_kinds);
    CU_add_test(s, "a write error leaves no output at all", test_write_error_leaves_nothing);
    CU_add_test(s, "memory estimate refused above the limit", test_memory_guard);
    CU_add_test(s, "the summary names the model", test_model_named);
    CU_add_test(s, "--help defaults, --version, --train-iters noted", test_help_version_notes);
    CU_add_test(s, "flags refused with their own message", test_refused_flags);
    CU_add_test(s, "sweep failures", test_sweep_failures);
    CU_add_test(s, "a shadowing file is named", test_shadowing_named);
    CU_add_test(s, "every flag with bad values", test_flag_matrix);
    CU_add_test(s, "commands printed in README and docs/ run", test_printed_commands);
}
