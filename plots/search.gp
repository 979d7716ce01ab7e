# Search: step time against peak memory per GPU, one point per layout `epsim search` simulated
# (blue: fits, grey: its simulated peak exceeds the GPU memory; the ten best carry their rank).
# Variables (plot_search.c): gpu_gib (0: unknown), xmax, npoints, nfit.
set title plot_title
set xrange [0:xmax]
set xlabel 'peak memory per GPU (GiB)'
set ylabel 'step time (s)'
set grid lc rgb '#e6e6e6'
unset key
if (gpu_gib > 0) {
    set arrow from gpu_gib, graph 0 to gpu_gib, graph 1 nohead lc rgb '#d55e00' dt 2
    set label sprintf('GPU memory %.1f GiB', gpu_gib) at gpu_gib, graph 0.03 right offset -0.5, 0 \
        font ',8' tc rgb '#d55e00'
}
plot datafile using 1:2:3 with points pt 7 ps 0.9 lc rgb variable, \
     '' using 1:2:4 with labels left offset char 0.6, 0.3 font ',8'
