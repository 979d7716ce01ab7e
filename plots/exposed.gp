# Exposed communication per kind, one stacked bar per configuration (ms per iteration).
# Variables (plot_exposed.c): nbars, ymax, kind_title[], kind_color[].
set title plot_title
set ylabel 'exposed communication (ms per iteration)'
set style data histograms
set style histogram rowstacked
set style fill solid 1.0 border lc rgb '#ffffff'
set boxwidth 0.6
set yrange [0:ymax]
set grid ytics lc rgb '#e6e6e6'
set key outside right top vertical
set xtics nomirror scale 0
if (nbars > 4) set xtics rotate by -30 left
plot for [k=1:5] datafile using (column(k + 1)):xtic(1) lc rgb kind_color[k] title kind_title[k], \
     '' using 0:7:(sprintf('%.2f', $7)) with labels offset 0, 0.8 notitle
