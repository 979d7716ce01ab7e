/* ep_io: output files that appear whole or not at all, sets of them that do too, and JSON string
 * escaping.
 *
 * An output path is written according to what it names (docs/epsim.md, "Failure behaviour"):
 * - a regular file, or a path that does not exist yet: a temporary "<target>.tmp.<pid>" beside it,
 *   renamed onto it when complete (an existing file keeps its permission bits);
 * - a symbolic link: written through - the file it points to is replaced as above, the link stays;
 * - a character or block device, a FIFO, or "-" (standard output): written in place, never
 *   replaced by a regular file;
 * - a directory, a socket: refused.
 * Temporaries are removed on every error (a failed write or close: a full disk), and on SIGINT,
 * SIGTERM, SIGHUP, SIGQUIT and SIGPIPE (handlers installed by the first ep_outfile_open; SIGXFSZ is
 * ignored so that a file-size limit is a write error too).
 */
#ifndef EP_IO_H
#define EP_IO_H

#include <stdio.h>
#include "ep_err.h"

typedef struct {
    FILE *f;
    char path[4096]; /* as given */
    char tmp[4096];  /* the temporary, "" when written in place */
    int in_place;    /* device, FIFO or "-" */
    int slot;        /* in the cleanup registry, -1 when none */
} ep_outfile;

/* Checks, before any work, that path can be written as above: its directory exists and is
 * writable, it is not a directory or a socket. Creates nothing. Returns 0, or -1 with err. */
int ep_output_check(const char *path, char err[EP_ERRLEN]);
/* Whether path is written in place (a device, a FIFO, "-"). */
int ep_output_in_place(const char *path);

/* Opens path for writing (see above). Returns 0, or -1 with err naming the path. */
int ep_outfile_open(ep_outfile *o, const char *path, char err[EP_ERRLEN]);
/* Flushes and closes, then renames the temporary onto the target (deferred while a set is open:
 * ep_outputs_begin). Returns 0, or -1 with err (temporary removed). */
int ep_outfile_commit(ep_outfile *o, char err[EP_ERRLEN]);
/* Closes and removes the temporary file. */
void ep_outfile_abort(ep_outfile *o);

/* A set of outputs that appear together or not at all: between ep_outputs_begin and
 * ep_outputs_commit, every ep_outfile_commit keeps its complete temporary; ep_outputs_commit
 * renames them all, ep_outputs_abort removes them all. Returns 0, or -1 with err. */
void ep_outputs_begin(void);
int ep_outputs_commit(char err[EP_ERRLEN]);
void ep_outputs_abort(void);

/* Writes s as a JSON string literal, quotes included. */
void ep_json_string(FILE *f, const char *s);

/* Runs handler once on the first of the n signals that arrive (then their default action, which
 * the handler re-raises), leaving alone the ones the process ignores: a cleanup before the process
 * ends on Ctrl-C or a kill. */
void ep_catch_signals(void (*handler)(int), const int *sigs, int n);

/* Copies s into out (len bytes) for an error message: control bytes, DEL and bytes that are not
 * UTF-8 as \xNN, so that echoed input cannot drive the terminal. Returns out. */
char *ep_escape_text(const char *s, char *out, size_t len);

/* Program metadata as a JSON object: program, version, git revision, plus extra_json members
 * (a JSON text of "key":value pairs without braces, or NULL). */
void ep_write_meta_json(FILE *f, const char *program, const char *extra_members);

const char *ep_version(void);
const char *ep_git_revision(void);

/* Input files that may be committed compressed (core/infile.c): a name ending in ".xz" is read
 * through `xz -dc` (large measured files - traces, timings - are committed so). */
typedef struct {
    FILE *f;
    int pipe; /* f is a pipe from xz */
} ep_infile;
/* Opens path for reading. Returns 0, or -1 with err naming the path. */
int ep_infile_open(ep_infile *in, const char *path, char err[EP_ERRLEN]);
/* Closes it. Returns 0, or -1 when the decompression failed (a truncated or corrupt .xz). */
int ep_infile_close(ep_infile *in);
/* The measured file `path` as committed: path itself when readable, else path.xz when that is.
 * Writes the name found to out (len bytes) and returns 0; -1 when neither can be read. */
int ep_infile_find(const char *path, char *out, size_t len);

#endif
