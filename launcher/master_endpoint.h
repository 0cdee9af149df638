// Where workers find their c10d store (MASTER_ADDR / MASTER_PORT) for the launches this build
// supports, without binding anything (for --dry_run and for checking the request early).
#pragma once
#include "elastic/launch_config.h"
#include "rendezvous/rendezvous_handler.h"

namespace ddprun::launcher {

// Standalone: 127.0.0.1 and an ephemeral port (shown as 0) of the launcher's own store.
// Static (one or more nodes): --master_addr/--master_port, served by node 0. Throws UsageError
// for multi-node launches with another backend, which this build cannot do yet.
rendezvous::RendezvousInfo PlannedMasterEndpoint(const elastic::LaunchConfig& config);

}  // namespace ddprun::launcher
