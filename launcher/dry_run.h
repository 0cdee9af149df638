// --dry_run: prints the resolved configuration and every worker's command and environment (the
// variables ddprun sets or changes) and launches nothing: no log directory, no port, no store.
// The output depends only on the configuration and the environment, so tests can compare it.
#pragma once
#include <ostream>

#include "elastic/launch_config.h"
#include "elastic/worker_env.h"

namespace ddprun::launcher {

// `original_env` is the process environment as ddprun found it, `launcher_env` the one workers
// inherit (after the OMP rule and TORCHELASTIC_SIGNALS_TO_HANDLE). The run's log directory is
// shown as "<log_dir>". A multi-node job's ranks are shown as torchrun assigns them when every
// node runs nproc_per_node workers (other nodes are unknown here), and the output says so.
// Throws UsageError for a --node_rank that names no node of a static multi-node job.
void PrintDryRun(std::ostream& out, const elastic::LaunchConfig& config,
                 const elastic::Environment& original_env,
                 const elastic::Environment& launcher_env);

// PrintDryRun to `out` with this process's environment as the original; returns exit status 0.
int RunDryRun(std::ostream& out, const elastic::LaunchConfig& config,
              const elastic::Environment& launcher_env);

}  // namespace ddprun::launcher
