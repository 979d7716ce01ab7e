/* sim_cli: the epsim command line (docs/epsim.md, "Usage"). Exit status: 0 done, 2 bad input
 * (flags, config, platform, calibration) with one line on stderr, 1 internal failure. */
#ifndef SIM_CLI_H
#define SIM_CLI_H

/* One simulation: `epsim [--topo T] [epsim options] [Megatron flags, @files]`. SimGrid allows one
 * per process. */
int sim_cli_run(int argc, char **argv);

/* `epsim sweep --grid "flag=v1,v2;flag2=a,b" [--jobs N] [--shard i/n] --out ranked.csv [flags]`:
 * every combination in its own process, ranked by tokens/s/GPU. */
int sim_sweep_main(int argc, char **argv);

/* `epsim search --global-batch-size N --out CSV [--budget N] [--jobs N] [--shard i/n]
 * [--max-gpu-memory GIB] [--topo T] [flags]`: the legal layouts, pruned, the rest simulated by
 * increasing lower bound within the budget (sim_search.c). */
int sim_search_main(int argc, char **argv);

#endif
