/* ep_io: output files that appear whole or not at all, and JSON string escaping. */
#ifndef EP_IO_H
#define EP_IO_H

#include <stdio.h>
#include "ep_config.h"

typedef struct {
    FILE *f;
    char path[4096];
    char tmp[4096];
} ep_outfile;

/* Opens path.tmp.<pid> for writing. Returns 0, or -1 with err naming the path. */
int ep_outfile_open(ep_outfile *o, const char *path, char err[EP_ERRLEN]);
/* Flushes, closes and renames onto path. Returns 0, or -1 with err (temporary removed). */
int ep_outfile_commit(ep_outfile *o, char err[EP_ERRLEN]);
/* Closes and removes the temporary file. */
void ep_outfile_abort(ep_outfile *o);

/* Writes s as a JSON string literal, quotes included. */
void ep_json_string(FILE *f, const char *s);

/* Program metadata as a JSON object: program, version, git revision, plus extra_json members
 * (a JSON text of "key":value pairs without braces, or NULL). */
void ep_write_meta_json(FILE *f, const char *program, const char *extra_members);

const char *ep_version(void);
const char *ep_git_revision(void);

#endif
