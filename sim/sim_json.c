/* sim_json: JSON files plain or xz-compressed (sim_json.h). */
#include "sim_json.h"

#include <math.h>
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

double sim_json_num(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

const char *sim_json_str(json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}
