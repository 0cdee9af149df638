// Where a single-node launch's workers find their c10d store (MASTER_ADDR / MASTER_PORT),
// without binding anything (for the launch plan, launch_plan.h).
#pragma once
#include "elastic/launch_config.h"
#include "store/tcp_store_server.h"

namespace ddprun::launcher::backend {

// Where a single-node launch's store listens and what its workers get as MASTER_ADDR.
struct StoreEndpoint {
  store::ServerOptions server;
  std::string master_addr;
};

// Static: --master_addr:--master_port on every interface, as torchrun's agent store. c10d on
// one node: an ephemeral port and this host's --local_addr or FQDN, as torchrun's shared
// store. --standalone keeps the store on loopback: MASTER_ADDR is the FQDN when that resolves
// to 127.0.0.0/8 only (as torchrun's value on such hosts), else 127.0.0.1.
StoreEndpoint SingleNodeStoreEndpoint(const elastic::LaunchConfig& config);

// What to tell a user whose store port is taken: "pass a free --master_port", or the
// --rdzv_endpoint (PET_RDZV_ENDPOINT, ...) that gave the static master's port.
std::string FreePortHint(const elastic::LaunchConfig& config);

}  // namespace ddprun::launcher::backend
