// A static multi-node launch (--nnodes=N>1, --node_rank, --master_addr/--master_port): node 0
// serves the store on every interface at --master_port; every agent joins through the static
// rendezvous, runs its workers, watches the other nodes and waits in the exit barrier.
// rdzv_conf (config.rdzv_settings): join_timeout (else timeout), keep_alive_interval,
// keep_alive_max_attempt. The CLI has validated the layout (CheckLaunchable).
#pragma once
#include "elastic/attempt_plan.h"
#include "elastic/event_sink.h"
#include "elastic/launch_config.h"

namespace ddprun::launcher {

bool IsMultiNode(const elastic::LaunchConfig& config);

// Returns the launcher's exit code.
int LaunchMultiNode(const elastic::LaunchConfig& config, const elastic::WorkerSpec& spec,
                    elastic::EventSink* events);

}  // namespace ddprun::launcher
