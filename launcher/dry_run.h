// --dry_run: prints the resolved configuration and every worker's command and environment
// (the variables ddprun sets), and launches nothing.
#pragma once
#include <ostream>

#include "elastic/attempt_plan.h"
#include "elastic/launch_config.h"
#include "rendezvous/rendezvous_handler.h"

namespace ddprun::launcher {

void PrintDryRun(std::ostream& out, const elastic::LaunchConfig& config,
                 const elastic::WorkerSpec& spec, const rendezvous::RendezvousInfo& master);

}  // namespace ddprun::launcher
