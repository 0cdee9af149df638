// Where workers find their c10d store (MASTER_ADDR / MASTER_PORT) and who serves it.
#pragma once
#include "elastic/launch_config.h"
#include "rendezvous/rendezvous_handler.h"

namespace ddprun::launcher {

// Standalone: this host (--local_addr, else its FQDN as torchrun) and a free port on which
// worker rank 0 hosts the store (TORCHELASTIC_USE_AGENT_STORE=False). Static single node:
// --master_addr/--master_port. Throws UsageError for launches this build cannot do yet.
rendezvous::RendezvousInfo ChooseMasterEndpoint(const elastic::LaunchConfig& config);

// A port that was free a moment ago (bind to port 0, read it back, close).
int FindFreePort();

}  // namespace ddprun::launcher
