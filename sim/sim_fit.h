/* sim_fit: `epsim calibrate` - fits the calibration (sim_calib.h) from the raw files that
 * `epref bench calib` writes (docs/calibration.md, "The fit"), and only from them.
 *
 *   epsim calibrate DIR[:file,...] [DIR ...] [--topo T] [--out FILE]
 *
 * Each raw file (compute.json, comm.json, host.json, interference.json, and the NVLink kernel
 * curves dispatch.json / combine.json) is read from the first DIR that has it; DIR:a,b offers
 * only the files named (e.g. another machine's interference.json alone). The machine is
 * named after the first DIR (traces/<machine>/calib); --topo defaults to it and gives the peak
 * flop/s, HBM bandwidth and link bandwidth/latency that turn times into efficiencies; --out
 * defaults to traces/calib/<machine>.json beside traces/<machine>. Exit 0, or 2 with one line.
 */
#ifndef SIM_FIT_H
#define SIM_FIT_H

int sim_fit_main(int argc, char **argv);

#endif
