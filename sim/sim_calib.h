/* sim_calib: every number that turns op sizes into time, in one structure (docs/epsim.md,
 * "Calibration"). The defaults are derived from ../shared/hw/h200x2.md; `epsim --calib FILE`
 * replaces any subset of them from a JSON object whose keys are the field names below (tables are
 * arrays of [x, y] pairs, x ascending). Unknown keys are an error, so a typo cannot pass silently.
 */
#ifndef SIM_CALIB_H
#define SIM_CALIB_H

#include "ep_config.h"

#define SIM_CALIB_MAX_POINTS 32

typedef struct {
    int n;
    double x[SIM_CALIB_MAX_POINTS], y[SIM_CALIB_MAX_POINTS];
} sim_table;

typedef struct {
    /* host side */
    double launch_s;    /* host time to launch one kernel / NCCL call */
    double host_sync_s; /* host wake-up after a stream/event synchronisation */
    /* GPU compute */
    double kernel_overhead_s;   /* fixed GPU time per kernel (launch gap, tail) */
    sim_table gemm_efficiency;  /* fraction of peak flop/s by GEMM flops (log-interpolated) */
    double grouped_gemm_factor; /* grouped GEMM efficiency relative to one GEMM of a group's size */
    double attention_efficiency; /* fraction of peak flop/s of fused attention */
    double scan_efficiency;      /* fraction of peak flop/s of Mamba/GDN scans */
    double
        vector_flops_efficiency; /* fraction of peak flop/s of memory-bound kernels' arithmetic */
    sim_table memory_efficiency; /* fraction of HBM bandwidth by bytes moved (log-interpolated) */
    double comm_hbm_fraction;    /* HBM share taken by one running transfer (read + write) */
    /* communication */
    double nccl_base_s;            /* fixed time of one NCCL collective (launch, handshake) */
    double nccl_step_s;            /* extra time per ring step beyond the first */
    double ep_kernel_base_s;       /* fixed time of one deepep / hybridep dispatch or combine */
    double p2p_base_s;             /* fixed time of one pipeline send/recv */
    double nccl_nvlink_efficiency; /* achieved / nominal bandwidth of NCCL over NVLink */
    double nccl_ib_efficiency;     /* ... over the NIC */
    double
        ep_nvlink_efficiency; /* achieved / nominal of SM-driven NVLink stores (deepep, hybridep) */
    double ep_rdma_efficiency; /* ... of their RDMA transfers */
} sim_calib;

/* The documented defaults (docs/epsim.md lists each with its source). */
void sim_calib_default(sim_calib *c);

/* Overrides fields of c from a JSON file. Returns 0, or -1 with one line in err. */
int sim_calib_load(sim_calib *c, const char *path, char err[EP_ERRLEN]);

/* Piecewise-linear in log10(x), clamped at both ends. */
double sim_table_eval(const sim_table *t, double x);

/* Writes the calibration as a JSON object (the same schema sim_calib_load reads). */
void sim_calib_write_json(const sim_calib *c, FILE *f);

#endif
