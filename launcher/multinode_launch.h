// A static multi-node launch (--nnodes=N>1, --node_rank, --master_addr/--master_port): node 0
// serves the store on every interface at --master_port; every agent joins through the static
// rendezvous, runs its workers, watches the other nodes and waits in the exit barrier.
// rdzv_conf: join_timeout (else timeout; seconds), keep_alive_interval, keep_alive_max_attempt.
#pragma once
#include <chrono>

#include "elastic/attempt_plan.h"
#include "elastic/launch_config.h"

namespace ddprun::launcher {

struct MultiNodeSettings {
  std::chrono::milliseconds join_timeout{900'000};
  std::chrono::milliseconds keep_alive_interval{5'000};
  int keep_alive_max_attempt = 3;
};

// Throws UsageError naming the rdzv_conf key of a bad value.
MultiNodeSettings ReadMultiNodeSettings(const elastic::LaunchConfig& config);

bool IsMultiNode(const elastic::LaunchConfig& config);

// Returns the launcher's exit code.
int LaunchMultiNode(const elastic::LaunchConfig& config, const elastic::WorkerSpec& spec);

}  // namespace ddprun::launcher
