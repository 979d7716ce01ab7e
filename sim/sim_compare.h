/* sim_compare: `epsim compare RUN [--topo T] [--calib FILE] [--json OUT]` holds a measured run
 * (RUN.args + RUN.trace.json, optionally RUN.summary.json) against an epsim simulation of the same
 * flags (docs/epsim.md, "Compare"). Exit status: 0 done, 2 bad input or unmatched ops (one line on
 * stderr), 1 internal failure. */
#ifndef SIM_COMPARE_H
#define SIM_COMPARE_H

/* argv[0] is "compare". */
int sim_compare_main(int argc, char **argv);

#endif
