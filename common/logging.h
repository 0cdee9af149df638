// The launcher's own log: spdlog to stderr, level from LOGLEVEL (torchrun's variable;
// default WARNING), lines prefixed "[ddprun]".
#pragma once
#include <spdlog/spdlog.h>

namespace ddprun {

// Configures the default spdlog logger once per process; safe to call again.
void InitLogging();

}  // namespace ddprun
