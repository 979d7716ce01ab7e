# epsim search: step time against peak memory per GPU, one point per simulated layout
# (docs/epsim.md, "Search"). Reads the CSV of `epsim search --out` directly:
#   gnuplot -e "csv='search.csv'; out='search.png'" plots/search.gp
# Columns (by name): iteration_time_s, peak_memory_gib, rank (empty: not simulated or not fitting).
set datafile separator ','
set terminal pngcairo size 900,600
set output out
set title 'epsim search: step time against peak memory per GPU'
set xlabel 'peak memory per GPU (GiB)'
set ylabel 'step time (s)'
set grid lc rgb '#e6e6e6'
unset key
# the simulated layouts that fit; the best ten numbered by rank
plot csv using (column('rank') > 0 ? column('peak_memory_gib') : 1/0):'iteration_time_s' \
         with points pt 7 ps 0.8 lc rgb '#1f77b4', \
     '' using (column('rank') > 0 && column('rank') <= 10 ? column('peak_memory_gib') : 1/0):'iteration_time_s':(sprintf(' %d', column('rank'))) \
         with labels left font ',8'
