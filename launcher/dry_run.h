// --dry_run: prints the launch's plan (launcher/backend/launch_plan.h: the one the run executes)
// with the resolved configuration and every worker's command and environment (the variables
// ddprun sets or changes), and launches nothing: no log directory, no port, no store. The
// output depends only on the configuration and the environment, so tests can compare it.
#pragma once
#include <ostream>
#include <vector>

#include "elastic/attempt_plan.h"
#include "elastic/launch_config.h"
#include "elastic/worker_env.h"
#include "launcher/backend/launch_plan.h"

namespace ddprun::launcher {

// The run's log directory as the dry run shows it (in the workers' log paths).
inline constexpr const char* kDryRunLogDir = "<log_dir>";
// The file timer's path as the dry run shows it when the launch would draw one at random.
inline constexpr const char* kDryRunTimerFile = "<temporary directory>/ddprun-timer-<random hex>";

// Prints `plan` (the plan of `config`) and the first attempt's workers of `spec` (made with
// kDryRunLogDir as the run's log directory). `original_env` is the process environment as
// ddprun found it; `spec.base_env` is the one workers inherit (after the OMP rule and
// TORCHELASTIC_SIGNALS_TO_HANDLE). What the plan knows only later is shown as such
// ("<chosen at launch>", "<chosen at rendezvous>"), with a note for what it had to assume.
void PrintDryRun(std::ostream& out, const elastic::LaunchConfig& config,
                 const backend::LaunchPlan& plan, const elastic::WorkerSpec& spec,
                 const elastic::Environment& original_env);

// The above for the plan of `config` on this machine (ReadMachineFacts) and the spec of
// `launcher_env`.
void PrintDryRun(std::ostream& out, const elastic::LaunchConfig& config,
                 const elastic::Environment& original_env,
                 const elastic::Environment& launcher_env);

// PrintDryRun of `plan` (the run's) to `out` with this process's environment as the original;
// returns exit status 0.
int RunDryRun(std::ostream& out, const elastic::LaunchConfig& config,
              const backend::LaunchPlan& plan, const elastic::Environment& launcher_env);

}  // namespace ddprun::launcher
