/* ref_boot: one process per GPU, and a small TCP channel among them (docs/epref.md).
 *
 * Ranks come from the built-in launcher (`--nproc N` forks N processes on this machine) or from
 * the variables of the usual launchers, first match wins:
 *   RANK, WORLD_SIZE, LOCAL_RANK (torchrun), SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (srun),
 *   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK (mpirun);
 * none of them: a single process. Rank 0 listens on MASTER_ADDR:MASTER_PORT (default port 29500)
 * and every other rank connects to it; the channel carries the NCCL unique id, CUDA IPC handles
 * and small host-side gathers. Plain POSIX sockets.
 */
#ifndef REF_BOOT_H
#define REF_BOOT_H

#include <stddef.h>

typedef struct {
    int rank, size, local_rank;
    int *fds; /* rank 0: socket of every rank (fds[0] unused); others: fds[0] = rank 0 */
} ref_world;

/* If argv holds `--nproc N` (removed from argv), forks N children with the launcher variables
 * set; each child returns 0 and goes on as one rank. The parent waits for all of them and
 * returns 1 with *exit_status set to the first failing child's status (0 if all succeeded);
 * when a child fails, the others are killed. Without --nproc returns 0 at once. */
int ref_boot_launch(int *argc, char **argv, int *exit_status);

/* The rank and world size the launcher variables give, as ref_boot_init reads them, without
 * connecting (for checks before any rank starts). Returns 0, or -1 with a message in err. */
int ref_boot_peek(int *rank, int *size, char *err, size_t len);

/* Reads the variables and connects the ranks. Returns 0, or -1 with a message on stderr. */
int ref_boot_init(ref_world *w);
void ref_boot_fini(ref_world *w);

/* all[r*bytes ..] = rank r's `mine`, on every rank. Returns 0 or -1. */
int ref_boot_allgather(ref_world *w, const void *mine, void *all, size_t bytes);
/* Rank 0's buf to everyone. */
int ref_boot_bcast(ref_world *w, void *buf, size_t bytes);
int ref_boot_barrier(ref_world *w);

/* Seconds on the monotonic clock (the launcher's grace period, the executor's watchdog). */
double ref_mono_s(void);

#endif
