// Turns a LaunchConfig into what the agent needs on this machine: the worker command, the
// launcher environment, the run's log directory and the worker spec.
#pragma once
#include <string>
#include <vector>

#include "elastic/attempt_plan.h"
#include "elastic/launch_config.h"
#include "launcher/backend/launch_plan.h"
#include "launcher/process/session_keeper.h"
#include "launcher/process/warm_pool.h"

namespace ddprun::launcher {

// The process environment as a map.
elastic::Environment CurrentEnvironment();

// torchrun's worker command: [python, -u, (-m), script, args...], or [script, args...]; with
// config.local_rank_arg, --<it>=${local_rank} right after the script.
std::vector<std::string> BuildCommand(const elastic::LaunchConfig& config);

// --warm-restart: where BuildCommand put the entry point, for the plan's warm pool; none without
// a pool.
std::optional<elastic::WorkerSpec::WarmStart> WarmStartOf(const elastic::LaunchConfig& config,
                                                          const backend::LaunchPlan& plan);

// --warm-restart: the pool's interpreter, modules, sys.path[0] (the script's directory; the
// current one for -m), environment (the workers' base one), and the keeper and job cgroup its
// workers register with; none without a pool.
std::optional<process::WarmPoolOptions> WarmPoolOptionsOf(const elastic::LaunchConfig& config,
                                                          const backend::LaunchPlan& plan,
                                                          const elastic::WorkerSpec& spec,
                                                          const process::SessionKeeper& keeper);

// The name shown in "<name> FAILED": the script, module or binary.
std::string EntrypointName(const elastic::LaunchConfig& config);

// "<log_dir>/<run_id>_XXXXXX", created now. Without --log_dir it lives in a new temporary
// torchelastic_XXXXXX directory, which is removed at exit unless some output was redirected
// into it and a log file was written (then its path is printed so that the logs are not lost).
class RunLogDir {
 public:
  RunLogDir(const elastic::LaunchConfig& config, const std::string& run_id);
  ~RunLogDir();
  RunLogDir(const RunLogDir&) = delete;
  RunLogDir& operator=(const RunLogDir&) = delete;
  const std::string& Path() const { return run_dir_; }

 private:
  std::string temp_root_;  // empty when --log_dir was given
  std::string run_dir_;
  bool keep_ = false;
};

// torchelastic's file timer: off ("") unless `env` has TORCHELASTIC_ENABLE_FILE_TIMER=1 exactly;
// then TORCHELASTIC_TIMER_FILE if set and not empty, else a new
// <temp dir>/ddprun-timer-<32 random hex digits> (temp dir: TMPDIR, TEMP, TMP, else /tmp, as
// Python's tempfile).
std::string FileTimerPath(const elastic::Environment& env);

// The spec of this launch on the node `plan` describes (its host name, every local rank's
// CPUs); its timer file (FileTimerPath) is chosen here, once.
elastic::WorkerSpec MakeWorkerSpec(const elastic::LaunchConfig& config,
                                   const backend::LaunchPlan& plan, const elastic::Environment& env,
                                   const std::string& run_log_dir);

}  // namespace ddprun::launcher
