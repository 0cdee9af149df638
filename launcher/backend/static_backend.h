// The static multi-node backend (--nnodes=N>1, --node_rank, --master_addr/--master_port or a
// static --rdzv_endpoint), as its plan (LaunchKind::kStatic) says: node 0 serves the store on
// the plan's served_store; every agent joins through the static rendezvous at the plan's
// agent_store, watches the other nodes (NodeMonitor) and waits in the exit barrier. rdzv_conf
// (config.rdzv_settings): join_timeout (else timeout), keep_alive_interval,
// keep_alive_max_attempt. The CLI has validated the layout.
#pragma once
#include "launcher/backend/launch_backend.h"

namespace ddprun::launcher::backend {

std::unique_ptr<LaunchBackend> MakeStaticBackend(asio::io_context& io,
                                                 const elastic::LaunchConfig& config,
                                                 const LaunchPlan& plan,
                                                 const elastic::WorkerSpec& spec);

}  // namespace ddprun::launcher::backend
