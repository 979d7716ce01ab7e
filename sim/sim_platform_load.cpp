// The one C++ file of epsim: SimGrid reports platform errors as C++ exceptions, which C cannot
// catch.
#include <simgrid/engine.h>
#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>

#include <cstdio>
#include <exception>
#include <vector>

extern "C" int sim_platform_load_file(const char *path, char *err, size_t len) {
    try {
        simgrid_load_platform(path);
        return 0;
    } catch (const std::exception &e) {
        std::snprintf(err, len, "%s", e.what());
        return -1;
    }
}

// Waits until one of execs[0..n) finishes or timeout seconds passed (timeout < 0: no limit).
// Returns the index of a finished exec, or -1 on timeout. Goes through s4u::Activity::wait_any_for:
// the C wrapper sg_exec_wait_any_for (via s4u::Exec::wait_any_for) crashes on a timeout in 3.32.
extern "C" long sim_exec_wait_any_for(simgrid::s4u::Exec **execs, size_t n, double timeout) {
    std::vector<simgrid::s4u::ActivityPtr> acts;
    acts.reserve(n);
    for (size_t i = 0; i < n; i++)
        acts.emplace_back(execs[i]);
    return (long)simgrid::s4u::Activity::wait_any_for(acts, timeout);
}

// Drops the reference that sg_actor_parallel_exec_init took for the C caller (the C API's own waits
// drop it; ours above does not): without it every finished transfer stays allocated, ~1.6 kB each.
extern "C" void sim_exec_release(simgrid::s4u::Exec *exec) {
    exec->unref();
}

// Seals the loaded platform so that routes can be asked before any simulation runs (epsim
// calibrate reads link bandwidths and latencies without simulating).
extern "C" void sim_platform_seal(void) {
    simgrid::s4u::Engine::get_instance()->seal_platform();
}
