// Turns the worker spec, this round's ranks and the attempt number into the processes to start:
// argv with ${local_rank} substituted, environments, log files and console routing.
#pragma once
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "elastic/launch_config.h"
#include "elastic/process_context.h"
#include "elastic/worker_env.h"
#include "rendezvous/rendezvous_handler.h"

namespace ddprun::elastic {

// What the agent runs on this node, fixed for the agent's lifetime.
struct WorkerSpec {
  std::string role = "default";
  int local_world_size = 1;
  int max_restarts = 0;
  std::vector<std::string> command;  // before ${local_rank} substitution
  Environment base_env;              // the launcher's environment (after the OMP rule)
  std::string run_log_dir;           // "<log_dir>/<run_id>_<random>"; empty: no files at all
  StreamSelection redirects;
  StreamSelection tee;
  std::vector<int> local_ranks_filter;  // empty: every rank on the console
  std::string prefix_template = "[${role_name}${local_rank}]:";
  std::string hostname;
  bool virtual_local_rank = false;
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  HangTimeouts hang;              // --hang-timeout and --hang-startup-timeout; off unless hang.On()
  int max_no_progress_hangs = 3;  // --max-no-progress-hangs; 0: never stop for them
  std::string timer_file;         // TORCHELASTIC_ENABLE_FILE_TIMER=1: the timer FIFO; "": no timer
  std::vector<CpuBinding> cpu_binding;  // --numa-binding, by local rank; empty: none
  // --warm-restart: where the entry point is in `command` (the script or module; what follows
  // is its arguments) and how runpy runs it; none: workers are always exec'd.
  struct WarmStart {
    std::size_t entry_index = 0;
    bool module = false;
    bool operator==(const WarmStart&) const = default;
  };
  std::optional<WarmStart> warm;
};

// The group environment of one attempt: the spec's role and sizes, the round's place in the
// group and master endpoint, the ranks assigned in the round, and the restart count.
WorkerGroupEnv MakeGroupEnv(const WorkerSpec& spec, const rendezvous::RendezvousInfo& round,
                            const RankAssignment& ranks, int restart_count,
                            const std::string& run_id);

std::string AttemptDir(const WorkerSpec& spec, int restart_count);

// `group` carries ranks, master address and restart count of this attempt. Every worker's stderr
// is watched; with hang detection on its stdout too, and it gets a pulse FIFO
// <attempt_dir>/<local_rank>/pulse; stacks go to <attempt_dir>/<local_rank>/stacks.log (no files
// without an attempt dir). The environment is BuildWorkerEnv's plus AddDiagnosticsEnv's.
AttemptLaunch PlanAttempt(const WorkerSpec& spec, const WorkerGroupEnv& group);

}  // namespace ddprun::elastic
