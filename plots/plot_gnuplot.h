/* plot_gnuplot: runs one gnuplot script on data written into a private temporary folder and moves
 * the picture into place whole (ep_outfile), so that a failed plot leaves no output file.
 *
 * The script run is: a prelude written here (datafile, outfile, out_kind, plot_title), the plot's
 * own variables (vars callback), the terminal settings, then the plot's .gp text (plot_scripts.h).
 */
#ifndef PLOT_GNUPLOT_H
#define PLOT_GNUPLOT_H

#include <stdio.h>

#include "ep_err.h"

typedef void (*plot_writer)(const void *ctx, FILE *f);

typedef struct {
    const char *script; /* gnuplot text of the plot */
    const char *title;  /* shown above the plot; may be "" */
    plot_writer data;   /* writes the data file */
    plot_writer vars;   /* writes gnuplot variable settings */
    const void *ctx;
    int width_px, height_px; /* defaults when vars sets no width_px / height_px */
} plot_job;

/* "png" or "svg" from the output file's extension, else NULL. */
const char *plot_out_kind(const char *outpath);

/* The gnuplot program: $EPPLOT_GNUPLOT if set, else "gnuplot" on $PATH. Returns 0, or -1 with
 * err saying how to install it. */
int plot_find_gnuplot(char *path, size_t len, char err[EP_ERRLEN]);

/* Writes the data (and a copy to data_copy when not NULL), runs gnuplot, and renames the picture
 * onto outpath. Returns 0, or -1 with one line in err; the temporary folder is always removed. */
int plot_render(const plot_job *job, const char *outpath, const char *data_copy,
                char err[EP_ERRLEN]);

#endif
