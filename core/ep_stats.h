/* ep_stats: summary statistics shared by the simulator's fit and epref's benchmarks. */
#ifndef EP_STATS_H
#define EP_STATS_H

/* Median of v[0..n) (sorts v in place; the mean of the two middle values when n is even),
 * NAN when n is 0. */
double ep_median(double *v, int n);

#endif
