#include "launcher/master_endpoint.h"

#include "common/errors.h"

namespace ddprun::launcher {

rendezvous::RendezvousInfo PlannedMasterEndpoint(const elastic::LaunchConfig& config) {
  if (config.max_nodes > 1 && config.rdzv_backend != "static") {
    throw UsageError("--nnodes=" + std::to_string(config.min_nodes) + ":" +
                     std::to_string(config.max_nodes) + " with --rdzv_backend=" +
                     config.rdzv_backend + ": multi-node launches support only the static "
                     "backend in this build (--master_addr/--master_port/--node_rank)");
  }
  rendezvous::RendezvousInfo info;
  info.master_addr = config.standalone ? "127.0.0.1" : config.master_addr;
  info.master_port = config.standalone ? 0 : config.master_port.value_or(29500);
  info.use_agent_store = true;
  return info;
}

}  // namespace ddprun::launcher
