// The static multi-node backend (--nnodes=N>1, --node_rank, --master_addr/--master_port or a
// static --rdzv_endpoint), as its plan (LaunchKind::kStatic) says: node 0 serves the store on
// the plan's served_store; every agent joins through the static rendezvous at the plan's
// agent_store, watches the other nodes (NodeMonitor) and waits in the exit barrier, with the
// plan's timeouts (join_timeout, else rdzv_conf's timeout; keep_alive_interval,
// keep_alive_max_attempt) and token. The CLI has validated the layout.
#pragma once
#include "launcher/backend/launch_backend.h"

namespace ddprun::launcher::backend {

std::unique_ptr<LaunchBackend> MakeStaticBackend(asio::io_context& io, const LaunchPlan& plan);

}  // namespace ddprun::launcher::backend
