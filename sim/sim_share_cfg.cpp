// The one setting of SimGrid that sim_share reads as text (the C interface has no string getter).
#include <string>
#include <xbt/config.hpp>

extern "C" int sim_share_solver_ok(void);

// sim_share follows FairBottleneck, the solver ptask_L07 uses by default.
int sim_share_solver_ok(void)
{
  try {
    return simgrid::config::get_value<std::string>("host/solver") == "fairbottleneck";
  } catch (...) {
    return 0;
  }
}
