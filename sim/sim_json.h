/* sim_json: the JSON files epsim reads (measured traces, calibration records), plain or committed
 * compressed with xz (ep_infile, core/infile.c). */
#ifndef SIM_JSON_H
#define SIM_JSON_H

#include <jansson.h>

#include "ep_sched.h"

/* json_loadf of path (a name ending in ".xz" decompressed); NULL with je set. */
json_t *sim_json_load(const char *path, size_t flags, json_error_t *je);
/* A record's number (NAN when the key is missing or not a number) and string ("" when missing). */
double sim_json_num(json_t *o, const char *key);
const char *sim_json_str(json_t *o, const char *key);
/* The op kind of its name (ep_op_kind_name's spelling); EP_OP_NUM_KINDS for none. */
ep_op_kind sim_json_kind(const char *s);
/* The op a calibration record stands for: its kind, phase, m, n, k, batch, flops and bytes (the
 * rest zero). Returns 0, or -1 for an unknown kind or flops or bytes missing or negative. */
int sim_json_op(json_t *r, ep_op *op);

#endif
