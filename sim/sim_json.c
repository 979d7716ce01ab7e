/* sim_json: JSON files plain or xz-compressed (sim_json.h). */
#include "sim_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

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

ep_op_kind sim_json_kind(const char *s) {
    for (int k = 0; k < EP_OP_NUM_KINDS; k++)
        if (strcmp(ep_op_kind_name((ep_op_kind)k), s) == 0) return (ep_op_kind)k;
    return EP_OP_NUM_KINDS;
}

static ep_phase phase_of(const char *s) {
    for (int p = EP_PHASE_FWD; p <= EP_PHASE_BWD_DW; p++)
        if (strcmp(ep_phase_name((ep_phase)p), s) == 0) return (ep_phase)p;
    return EP_PHASE_NONE;
}

int sim_json_op(json_t *r, ep_op *op) {
    memset(op, 0, sizeof *op);
    op->kind = sim_json_kind(sim_json_str(r, "kind"));
    op->phase = phase_of(sim_json_str(r, "phase"));
    op->m = (int)sim_json_num(r, "m"), op->n = (int)sim_json_num(r, "n"),
    op->k = (int)sim_json_num(r, "k");
    op->batch = (int)sim_json_num(r, "batch");
    op->flops = sim_json_num(r, "flops"), op->bytes = sim_json_num(r, "bytes");
    return op->kind == EP_OP_NUM_KINDS || !(op->flops >= 0) || !(op->bytes >= 0) ? -1 : 0;
}
