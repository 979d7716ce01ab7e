/* Output files that appear whole or not at all (write to a temporary, then rename; devices and
 * FIFOs in place), sets of them, cleanup on signals, JSON string escaping and the metadata object
 * every output file carries (ep_io.h). */
#include "ep_io.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LINKS 40 /* symbolic links followed, as the kernel does */
#define MAX_SLOTS 32 /* temporaries alive at once */

/* Temporaries alive, for ep_outputs_* and the signal handler: 0 free, 1 open, 2 complete and
 * waiting for ep_outputs_commit. */
static struct {
    char tmp[4096], target[4096];
    volatile sig_atomic_t state;
} g_slot[MAX_SLOTS];
static int g_deferred;
static int g_handlers;

static void on_signal(int sig)
{
    for (int i = 0; i < MAX_SLOTS; i++)
        if (g_slot[i].state) unlink(g_slot[i].tmp); /* async-signal-safe */
    /* SA_RESETHAND | SA_NODEFER: the default action (termination) happens here */
    raise(sig);
}

void ep_catch_signals(void (*handler)(int), const int *sigs, int n)
{
    for (int i = 0; i < n; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = handler;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
        sigaction(sigs[i], &sa, NULL);
    }
}

static void install_handlers(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
    if (g_handlers) return;
    g_handlers = 1;
    ep_catch_signals(on_signal, sigs, (int)(sizeof sigs / sizeof sigs[0]));
    signal(SIGXFSZ, SIG_IGN); /* a file-size limit fails the write (EFBIG) instead of killing */
}

static int slot_take(const char *tmp, const char *target)
{
    for (int i = 0; i < MAX_SLOTS; i++)
        if (!g_slot[i].state) {
            snprintf(g_slot[i].tmp, sizeof g_slot[i].tmp, "%s", tmp);
            snprintf(g_slot[i].target, sizeof g_slot[i].target, "%s", target);
            g_slot[i].state = 1;
            return i;
        }
    return -1;
}

static void slot_drop(int i)
{
    if (i < 0 || i >= MAX_SLOTS) return;
    g_slot[i].state = 0;
}

/* Follows symbolic links from path: target gets the path finally named, *exists whether it exists
 * (then *st describes it). Returns 0, or -1 with errno (a loop, a name too long, lstat failing
 * for another reason than a missing file). */
static int resolve(const char *path, char *target, size_t len, struct stat *st, int *exists)
{
    char cur[4096], link[4096];
    if (snprintf(cur, sizeof cur, "%s", path) >= (int)sizeof cur) return errno = ENAMETOOLONG, -1;
    for (int hop = 0; hop <= MAX_LINKS; hop++) {
        if (lstat(cur, st) != 0) {
            if (errno != ENOENT) return -1;
            *exists = 0;
            break;
        }
        if (!S_ISLNK(st->st_mode)) {
            *exists = 1;
            break;
        }
        if (hop == MAX_LINKS) return errno = ELOOP, -1;
        ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0) return -1;
        link[n] = 0;
        const char *slash = strrchr(cur, '/');
        if (link[0] == '/' || !slash) {
            snprintf(cur, sizeof cur, "%s", link);
        } else {
            char dir[4096];
            snprintf(dir, sizeof dir, "%.*s", (int)(slash - cur), cur);
            if (snprintf(cur, sizeof cur, "%s/%s", dir, link) >= (int)sizeof cur)
                return errno = ENAMETOOLONG, -1;
        }
    }
    if (snprintf(target, len, "%s", cur) >= (int)len) return errno = ENAMETOOLONG, -1;
    return 0;
}

static void dir_of(const char *path, char *dir, size_t len)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, len, ".");
    else if (slash == path)
        snprintf(dir, len, "/");
    else
        snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

static int in_place_mode(mode_t m)
{
    return S_ISCHR(m) || S_ISBLK(m) || S_ISFIFO(m);
}

int ep_output_in_place(const char *path)
{
    char target[4096];
    struct stat st;
    int exists = 0;
    if (strcmp(path, "-") == 0) return 1;
    return resolve(path, target, sizeof target, &st, &exists) == 0 && exists &&
           in_place_mode(st.st_mode);
}

int ep_output_check(const char *path, char err[EP_ERRLEN])
{
    char target[4096], dir[4096];
    struct stat st;
    int exists = 0;
    if (strcmp(path, "-") == 0) return 0;
    if (!path[0]) {
        snprintf(err, EP_ERRLEN, "an output path is empty");
        return -1;
    }
    if (resolve(path, target, sizeof target, &st, &exists) != 0) {
        snprintf(err, EP_ERRLEN, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    if (exists && S_ISDIR(st.st_mode)) {
        snprintf(err, EP_ERRLEN, "cannot write %s: it is a directory", path);
        return -1;
    }
    if (exists && !S_ISREG(st.st_mode) && !in_place_mode(st.st_mode)) {
        snprintf(err, EP_ERRLEN, "cannot write %s: not a file, device or FIFO", path);
        return -1;
    }
    if (exists && access(target, W_OK) != 0) {
        snprintf(err, EP_ERRLEN, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    if (exists && in_place_mode(st.st_mode)) return 0;
    /* a temporary is created beside the target and renamed: its directory must take both */
    dir_of(target, dir, sizeof dir);
    struct stat ds;
    if (stat(dir, &ds) != 0) {
        snprintf(err, EP_ERRLEN, "cannot write %s: directory %s: %s", path, dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(ds.st_mode)) {
        snprintf(err, EP_ERRLEN, "cannot write %s: %s is not a directory", path, dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, EP_ERRLEN, "cannot write %s: directory %s: %s", path, dir, strerror(errno));
        return -1;
    }
    return 0;
}

int ep_outfile_open(ep_outfile *o, const char *path, char err[EP_ERRLEN])
{
    char target[4096];
    struct stat st;
    int exists = 0;
    memset(o, 0, sizeof *o);
    o->slot = -1;
    install_handlers();
    if (strlen(path) + 32 >= sizeof o->tmp) {
        snprintf(err, EP_ERRLEN, "output path too long: %.64s...", path);
        return -1;
    }
    snprintf(o->path, sizeof o->path, "%s", path);
    if (strcmp(path, "-") == 0) {
        o->f = stdout;
        o->in_place = 1;
        return 0;
    }
    if (resolve(path, target, sizeof target - 32, &st, &exists) != 0) {
        snprintf(err, EP_ERRLEN, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    if (exists && S_ISDIR(st.st_mode)) {
        snprintf(err, EP_ERRLEN, "cannot write %s: it is a directory", path);
        return -1;
    }
    if (exists && in_place_mode(st.st_mode)) {
        o->in_place = 1;
        o->f = fopen(path, "w");
        if (!o->f) {
            snprintf(err, EP_ERRLEN, "cannot write %s: %s", path, strerror(errno));
            return -1;
        }
        return 0;
    }
    if (exists && !S_ISREG(st.st_mode)) {
        snprintf(err, EP_ERRLEN, "cannot write %s: not a file, device or FIFO", path);
        return -1;
    }
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", target, (long)getpid());
    o->slot = slot_take(o->tmp, target);
    if (o->slot < 0) {
        snprintf(err, EP_ERRLEN, "cannot write %s: too many output files open", path);
        o->tmp[0] = 0;
        return -1;
    }
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_EXCL, 0666);
    if (fd < 0 && errno == EEXIST) { /* a leftover of an earlier process with this pid */
        unlink(o->tmp);
        fd = open(o->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_EXCL, 0666);
    }
    if (fd >= 0 && exists) /* the replaced file's permission bits */
        (void)fchmod(fd, st.st_mode & 07777);
    o->f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!o->f) {
        snprintf(err, EP_ERRLEN, "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        unlink(o->tmp);
        slot_drop(o->slot);
        o->slot = -1;
        o->tmp[0] = 0;
        return -1;
    }
    return 0;
}

/* Flushes and closes o->f (not stdout); returns 0 or the errno of the first failure. */
static int close_checked(ep_outfile *o)
{
    int e = 0;
    errno = 0;
    if (fflush(o->f) != 0) e = errno ? errno : EIO;
    if (ferror(o->f) && !e) e = errno ? errno : EIO;
    if (o->f != stdout && fclose(o->f) != 0 && !e) e = errno ? errno : EIO;
    o->f = NULL;
    return e;
}

int ep_outfile_commit(ep_outfile *o, char err[EP_ERRLEN])
{
    if (!o->f) {
        snprintf(err, EP_ERRLEN, "cannot write %s: file not open", o->path);
        return -1;
    }
    int e = close_checked(o);
    if (o->in_place) {
        if (e) snprintf(err, EP_ERRLEN, "cannot write %s: %s", o->path, strerror(e));
        return e ? -1 : 0;
    }
    if (e) {
        snprintf(err, EP_ERRLEN, "cannot write %s: %s", o->path, strerror(e));
        unlink(o->tmp);
        slot_drop(o->slot);
        return -1;
    }
    if (g_deferred && o->slot >= 0) {
        g_slot[o->slot].state = 2;
        return 0;
    }
    const char *target = o->slot >= 0 ? g_slot[o->slot].target : o->path;
    if (rename(o->tmp, target) != 0) {
        snprintf(err, EP_ERRLEN, "cannot write %s: %s", o->path, strerror(errno));
        unlink(o->tmp);
        slot_drop(o->slot);
        return -1;
    }
    slot_drop(o->slot);
    return 0;
}

void ep_outfile_abort(ep_outfile *o)
{
    if (o->f && o->f != stdout) fclose(o->f);
    o->f = NULL;
    if (o->tmp[0]) unlink(o->tmp);
    slot_drop(o->slot);
    o->slot = -1;
}

void ep_outputs_begin(void)
{
    g_deferred = 1;
}

int ep_outputs_commit(char err[EP_ERRLEN])
{
    int rc = 0;
    g_deferred = 0;
    for (int i = 0; i < MAX_SLOTS; i++) {
        if (g_slot[i].state != 2) continue;
        if (rc == 0 && rename(g_slot[i].tmp, g_slot[i].target) != 0) {
            snprintf(err, EP_ERRLEN, "cannot write %s: %s", g_slot[i].target, strerror(errno));
            rc = -1;
        }
        if (rc != 0) unlink(g_slot[i].tmp);
        g_slot[i].state = 0;
    }
    return rc;
}

void ep_outputs_abort(void)
{
    g_deferred = 0;
    for (int i = 0; i < MAX_SLOTS; i++)
        if (g_slot[i].state) {
            unlink(g_slot[i].tmp);
            g_slot[i].state = 0;
        }
}

/* Length of the UTF-8 sequence at p (1..4), or 0 when it is not one. */
static int utf8_len(const unsigned char *p)
{
    int n = p[0] >= 0xF0 && p[0] <= 0xF4 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC2 && p[0] < 0xE0 ? 2 : 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    return n;
}

char *ep_escape_text(const char *s, char *out, size_t len)
{
    size_t k = 0;
    if (!len) return out;
    for (const unsigned char *p = (const unsigned char *)s; *p && k + 5 < len;) {
        int n = *p >= 0x80 ? utf8_len(p) : 1;
        if (*p < 0x20 || *p == 0x7f || n == 0) {
            k += (size_t)snprintf(out + k, len - k, "\\x%02x", *p);
            p++;
        } else {
            if (k + (size_t)n + 1 >= len) break;
            memcpy(out + k, p, (size_t)n);
            k += (size_t)n;
            p += n;
        }
    }
    out[k] = 0;
    return out;
}

void ep_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

void ep_write_meta_json(FILE *f, const char *program, const char *extra_members)
{
    fputs("{\"program\":", f);
    ep_json_string(f, program);
    fputs(",\"version\":", f);
    ep_json_string(f, ep_version());
    fputs(",\"git_revision\":", f);
    ep_json_string(f, ep_git_revision());
    if (extra_members && extra_members[0])
        fprintf(f, ",%s", extra_members);
    fputc('}', f);
}
