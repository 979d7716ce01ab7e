/* Output files that appear whole or not at all (write to a temporary, then rename), JSON string
 * escaping and the metadata object every output file carries. */
#include "ep_io.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

int ep_outfile_open(ep_outfile *o, const char *path, char err[EP_ERRLEN])
{
    memset(o, 0, sizeof *o);
    if (strlen(path) + 32 >= sizeof o->tmp) {
        snprintf(err, EP_ERRLEN, "output path too long: %.64s...", path);
        return -1;
    }
    snprintf(o->path, sizeof o->path, "%s", path);
    snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%ld", path, (long)getpid());
    o->f = fopen(o->tmp, "w");
    if (!o->f) {
        snprintf(err, EP_ERRLEN, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int ep_outfile_commit(ep_outfile *o, char err[EP_ERRLEN])
{
    if (!o->f) {
        snprintf(err, EP_ERRLEN, "cannot write %s: file not open", o->path);
        return -1;
    }
    int bad = ferror(o->f);
    if (fclose(o->f) != 0)
        bad = 1;
    o->f = NULL;
    if (bad) {
        snprintf(err, EP_ERRLEN, "cannot write %s: %s", o->path, strerror(errno));
        unlink(o->tmp);
        return -1;
    }
    if (rename(o->tmp, o->path) != 0) {
        snprintf(err, EP_ERRLEN, "cannot write %s: %s", o->path, strerror(errno));
        unlink(o->tmp);
        return -1;
    }
    return 0;
}

void ep_outfile_abort(ep_outfile *o)
{
    if (o->f) {
        fclose(o->f);
        o->f = NULL;
    }
    if (o->tmp[0])
        unlink(o->tmp);
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
