// The static multi-node backend (--nnodes=N>1, --node_rank, --master_addr/--master_port or a
// static --rdzv_endpoint): node 0 serves the store on every interface at the master port;
// every agent joins through the static rendezvous, watches the other nodes (NodeMonitor) and
// waits in the exit barrier. rdzv_conf (config.rdzv_settings): join_timeout (else timeout),
// keep_alive_interval, keep_alive_max_attempt. The CLI has validated the layout.
#pragma once
#include "launcher/backend/launch_backend.h"

namespace ddprun::launcher::backend {

bool IsMultiNode(const elastic::LaunchConfig& config);

std::unique_ptr<LaunchBackend> MakeStaticBackend(asio::io_context& io,
                                                 const elastic::LaunchConfig& config,
                                                 const elastic::WorkerSpec& spec);

}  // namespace ddprun::launcher::backend
