/* gnuplot runs (plot_gnuplot.h). gnuplot is run directly (fork/exec, no shell), so file names need
 * no shell quoting; its messages go to a log in the temporary folder and the last line is reported
 * if it fails. */
#include "plot_gnuplot.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include "ep_io.h"
#include "plot_util.h"

const char *plot_out_kind(const char *outpath) {
    size_t n = strlen(outpath);
    if (n > 4 && !strcmp(outpath + n - 4, ".png")) return "png";
    if (n > 4 && !strcmp(outpath + n - 4, ".svg")) return "svg";
    return NULL;
}

static int executable(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int plot_find_gnuplot(char *path, size_t len, char err[EP_ERRLEN]) {
    const char *env = getenv("EPPLOT_GNUPLOT");
    if (env && env[0]) {
        if (!executable(env)) {
            snprintf(err, EP_ERRLEN, "EPPLOT_GNUPLOT=%s is not an executable file", env);
            return -1;
        }
        snprintf(path, len, "%s", env);
        return 0;
    }
    const char *p = getenv("PATH");
    while (p && *p) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        snprintf(path, len, "%.*s/gnuplot", (int)n, n ? p : ".");
        if (executable(path)) return 0;
        p = e ? e + 1 : NULL;
    }
    snprintf(err, EP_ERRLEN,
             "gnuplot not found on PATH (install it: apt-get install gnuplot-nox; or set "
             "EPPLOT_GNUPLOT)");
    return -1;
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[4200];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(dir);
}

static int write_file(const char *path, const plot_job *job, plot_writer w, char err[EP_ERRLEN]) {
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, EP_ERRLEN, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    w(job->ctx, f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        snprintf(err, EP_ERRLEN, "cannot write %s", path);
        return -1;
    }
    return 0;
}

static void prelude(FILE *f, const plot_job *job, const char *dir, const char *kind) {
    char p[4200];
    fputs("# written by epplot\ndatafile = ", f);
    snprintf(p, sizeof p, "%s/data.tsv", dir);
    plot_gp_string(f, p);
    fputs("\noutfile = ", f);
    snprintf(p, sizeof p, "%s/out.%s", dir, kind);
    plot_gp_string(f, p);
    fprintf(f, "\nout_kind = '%s'\nplot_title = ", kind);
    plot_gp_string(f, job->title ? job->title : "");
    fputc('\n', f);
    if (job->vars) job->vars(job->ctx, f);
    fprintf(f,
            "if (!exists('width_px')) width_px = %d\n"
            "if (!exists('height_px')) height_px = %d\n"
            "if (out_kind eq 'svg') {\n"
            "    set terminal svg size width_px, height_px noenhanced font 'sans,11' "
            "background '#ffffff'\n"
            "} else {\n"
            "    if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
            "        set terminal pngcairo size width_px, height_px noenhanced font 'sans,10'\n"
            "    } else {\n"
            "        set terminal png size width_px, height_px noenhanced\n"
            "    }\n"
            "}\n"
            "set output outfile\n"
            "set datafile separator '\\t'\n",
            job->width_px > 0 ? job->width_px : 1200, job->height_px > 0 ? job->height_px : 700);
}

/* Last non-empty line of the gnuplot log, for the one-line error. */
static void last_line(const char *log, char *buf, size_t len) {
    char e[EP_ERRLEN];
    char *text = plot_read_file(log, NULL, e);
    buf[0] = 0;
    if (!text) return;
    char *end = text + strlen(text);
    while (end > text && (end[-1] == '\n' || end[-1] == ' '))
        *--end = 0;
    char *s = strrchr(text, '\n');
    snprintf(buf, len, "%s", s ? s + 1 : text);
    free(text);
}

static int run_gnuplot(const char *gp, const char *dir, char err[EP_ERRLEN]) {
    char script[4200], log[4200];
    snprintf(script, sizeof script, "%s/plot.gp", dir);
    snprintf(log, sizeof log, "%s/gnuplot.log", dir);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, EP_ERRLEN, "cannot start gnuplot: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int nul = open("/dev/null", O_RDWR);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (nul >= 0) dup2(nul, 0);
        execl(gp, "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            snprintf(err, EP_ERRLEN, "gnuplot: %s", strerror(errno));
            return -1;
        }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char line[300];
        last_line(log, line, sizeof line);
        snprintf(err, EP_ERRLEN, "gnuplot failed (%s %d)%s%s",
                 WIFEXITED(st) ? "exit status" : "signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), line[0] ? ": " : "", line);
        return -1;
    }
    return 0;
}

/* Copies src into an ep_outfile at dst, so dst appears whole or not at all. */
static int install(const char *src, const char *dst, char err[EP_ERRLEN]) {
    size_t n;
    FILE *in = fopen(src, "rb");
    if (!in) {
        snprintf(err, EP_ERRLEN, "gnuplot wrote no picture");
        return -1;
    }
    ep_outfile o;
    if (ep_outfile_open(&o, dst, err) != 0) {
        fclose(in);
        return -1;
    }
    char buf[1 << 16];
    long total = 0;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        fwrite(buf, 1, n, o.f);
        total += (long)n;
    }
    int bad = ferror(in);
    fclose(in);
    if (bad || total == 0) {
        snprintf(err, EP_ERRLEN,
                 bad ? "cannot read gnuplot's picture" : "gnuplot wrote an empty picture");
        ep_outfile_abort(&o);
        return -1;
    }
    return ep_outfile_commit(&o, err);
}

static int copy_data(const char *src, const char *dst, char err[EP_ERRLEN]) {
    size_t len;
    char *text = plot_read_file(src, &len, err);
    if (!text) return -1;
    ep_outfile o;
    if (ep_outfile_open(&o, dst, err) != 0) {
        free(text);
        return -1;
    }
    fwrite(text, 1, len, o.f);
    free(text);
    return ep_outfile_commit(&o, err);
}

int plot_render(const plot_job *job, const char *outpath, const char *data_copy,
                char err[EP_ERRLEN]) {
    const char *kind = plot_out_kind(outpath);
    if (!kind) {
        snprintf(err, EP_ERRLEN, "output %s: name it .png or .svg", outpath);
        return -1;
    }
    char gp[4096];
    if (plot_find_gnuplot(gp, sizeof gp, err) != 0) return -1;
    const char *tmp = getenv("TMPDIR");
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/epplot.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        snprintf(err, EP_ERRLEN, "cannot make a temporary folder in %s: %s",
                 tmp && tmp[0] ? tmp : "/tmp", strerror(errno));
        return -1;
    }
    int rc = -1;
    snprintf(path, sizeof path, "%s/data.tsv", dir);
    if (write_file(path, job, job->data, err) != 0) goto out;
    snprintf(path, sizeof path, "%s/plot.gp", dir);
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, EP_ERRLEN, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    prelude(f, job, dir, kind);
    fputs(job->script, f);
    if (fclose(f) != 0) {
        snprintf(err, EP_ERRLEN, "cannot write %s", path);
        goto out;
    }
    if (run_gnuplot(gp, dir, err) != 0) goto out;
    snprintf(path, sizeof path, "%s/out.%s", dir, kind);
    if (install(path, outpath, err) != 0) goto out;
    snprintf(path, sizeof path, "%s/data.tsv", dir);
    if (data_copy && copy_data(path, data_copy, err) != 0) {
        unlink(outpath); /* all outputs or none */
        goto out;
    }
    rc = 0;
out:
    remove_dir(dir);
    return rc;
}
