# Sweep: the best configurations by tokens/s per GPU, best at the top.
# Variables (plot_sweep.c): nbars, xmax.
set title plot_title
set xlabel 'tokens/s per GPU'
set xrange [0:xmax]
set yrange [nbars - 0.5:-0.5]
set ytics nomirror scale 0
set grid xtics lc rgb '#e6e6e6'
set style fill solid 1.0 noborder
unset key
# column 4: the bar colour (grey where the model state alone exceeds the GPU's memory)
plot datafile using ($2 / 2):1:(0):2:($1 - 0.38):($1 + 0.38):4:ytic(3) with boxxyerror \
         lc rgb variable, \
     '' using 2:1:(sprintf(' %.0f', $2)) with labels left font ',9'
