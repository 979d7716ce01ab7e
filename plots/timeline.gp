# Timeline: one lane per (rank, stream), predicted ops above measured ones, coloured by class.
# Variables (plot_timeline.c): nblocks, block_title[], block_color[], both, nlanes, x_from, x_to;
# y tics and lane separators are set before this script runs.
set title plot_title
set xlabel 'time from the first op (ms)'
set xrange [x_from:x_to]
set yrange [-0.6:nlanes - 0.4]
set ytics nomirror scale 0
set xtics nomirror out
set grid xtics lc rgb '#e6e6e6'
set key outside bottom center horizontal samplen 1.5
set bmargin 5.5
set style fill solid 1.0 noborder
# ops shorter than a pixel (host syncs take no time) are widened to one so that they still show
minw = (x_to - x_from) / 1500.0
plot for [i=1:nblocks] datafile index (i - 1) \
     using (($1 + $2) / 2):(($3 + $4) / 2):1:($2 - $1 < minw ? $1 + minw : $2):3:4 with boxxyerror \
     lc rgb block_color[i] title block_title[i]
