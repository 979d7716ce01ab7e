/* sim_json: JSON files plain or xz-compressed (sim_json.h). */
#include "sim_json.h"

#include <stdio.h>

#include "ep_io.h"

json_t *sim_json_load(const char *path, size_t flags, json_error_t *je) {
    char err[EP_ERRLEN];
    ep_infile in;
    if (ep_infile_open(&in, path, err) != 0) {
        snprintf(je->text, sizeof je->text, "cannot read it");
        je->line = 0;
        return NULL;
    }
    json_t *r = json_loadf(in.f, flags, je);
    if (ep_infile_close(&in) != 0 && r) {
        json_decref(r);
        snprintf(je->text, sizeof je->text, "xz -dc failed");
        je->line = 0;
        return NULL;
    }
    return r;
}
