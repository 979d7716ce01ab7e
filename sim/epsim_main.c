/* epsim: simulate a MoE training configuration on a GPU cluster (docs/epsim.md). */
#include <string.h>

#include "sim_cli.h"
#include "sim_compare.h"
#include "sim_fit.h"

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "sweep") == 0) return sim_sweep_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "search") == 0) return sim_search_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "compare") == 0) return sim_compare_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "calibrate") == 0) return sim_fit_main(argc - 1, argv + 1);
    return sim_cli_run(argc, argv);
}
