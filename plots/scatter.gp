# Validation scatter: predicted against measured iteration time, with y = x and +-5 % / +-10 %
# bands. Variables (plot_scatter.c): lo, hi, nruns, within5, within10.
set title plot_title
set xlabel 'measured iteration time (s)'
set ylabel 'predicted iteration time (s)'
set xrange [lo:hi]
set yrange [lo:hi]
set size square
set grid lc rgb '#e6e6e6'
set key top left box opaque
set style fill solid 1.0 noborder
set samples 200
plot '+' using 1:(0.90 * $1):(1.10 * $1) with filledcurves lc rgb '#fbe3c4' title 'within 10 %', \
     '+' using 1:(0.95 * $1):(1.05 * $1) with filledcurves lc rgb '#cfe8cc' title 'within 5 %', \
     x with lines lc rgb '#404040' dt 2 title 'y = x', \
     datafile using 1:2 with points pt 7 ps 1.3 lc rgb '#0072b2' \
         title sprintf('%d runs: %d within 5 %%, %d within 10 %%', nruns, within5, within10), \
     datafile using 1:2:5 with labels left offset char 0.8, 0.6 font ',8' notitle
