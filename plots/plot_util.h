/* plot_util: file reading, number parsing and gnuplot string quoting shared by the plot data
 * writers. */
#ifndef PLOT_UTIL_H
#define PLOT_UTIL_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "ep_err.h"

/* Reads a whole file, NUL-terminated. Returns a malloc'd buffer (length in *len if not NULL), or
 * NULL with err naming the file. */
char *plot_read_file(const char *path, size_t *len, char err[EP_ERRLEN]);
/* Loads a JSON file (duplicate keys refused). Returns it, or NULL with err: "cannot read PATH:
 * reason" or "PATH:LINE:COL: malformed JSON: reason". */
json_t *plot_load_json(const char *path, char err[EP_ERRLEN]);
/* Parses all of s (surrounding blanks allowed) as a finite number. Returns 0 or -1. */
int plot_parse_number(const char *s, double *out);
/* Writes s as a gnuplot single-quoted string (quotes doubled). */
void plot_gp_string(FILE *f, const char *s);
/* Writes s as one field of a tab-separated data file: tabs and line ends become spaces, an empty
 * string becomes "-" so that columns never collapse. */
void plot_data_field(FILE *f, const char *s);
/* The last component of path without the given suffixes (first match removed), into buf. */
void plot_basename(const char *path, const char *const *suffixes, char *buf, size_t len);

#endif
