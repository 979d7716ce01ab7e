// The one C++ file of epsim: SimGrid reports platform errors as C++ exceptions, which C cannot
// catch.
#include <simgrid/engine.h>

#include <cstdio>
#include <exception>

extern "C" int sim_platform_load_file(const char *path, char *err, size_t len) {
    try {
        simgrid_load_platform(path);
        return 0;
    } catch (const std::exception &e) {
        std::snprintf(err, len, "%s", e.what());
        return -1;
    }
}
