#include "elastic/attempt_plan.h"

#include <algorithm>

#include "elastic/arg_template.h"

namespace ddprun::elastic {
namespace {

bool ShownOnConsole(const WorkerSpec& spec, int local_rank) {
  const auto& filter = spec.local_ranks_filter;
  return filter.empty() || std::find(filter.begin(), filter.end(), local_rank) != filter.end();
}

// torchrun's LogsSpecs: a redirected stream goes to its file; a tee'd one to its file and,
// prefixed, to the console; ranks outside the filter never reach the console.
StreamRoute RouteStream(const WorkerSpec& spec, int local_rank, int stream_bit,
                        const std::string& file) {
  const bool tee = (spec.tee.For(local_rank) & stream_bit) != 0;
  const bool redirect = tee || (spec.redirects.For(local_rank) & stream_bit) != 0;
  StreamRoute route;
  if (redirect && !spec.run_log_dir.empty()) route.file = file;
  route.prefixed = tee;
  route.to_console = ShownOnConsole(spec, local_rank) && (tee || !redirect);
  // Through the launcher: stderr always (its tail and the stacks go into the failure summary),
  // stdout too when its bytes are progress (a redirected stream is still watched: the launcher
  // then copies it to its file).
  route.watched = stream_bit == StreamSelection::kStderr || spec.hang.On();
  return route;
}

std::string RankDir(const std::string& attempt_dir, int local_rank) {
  return attempt_dir + "/" + std::to_string(local_rank);
}

// --warm-restart: the entry point and its arguments, as they are in the worker's argv.
std::optional<WarmEntry> WarmEntryOf(const WorkerSpec& spec, const std::vector<std::string>& argv) {
  if (!spec.warm || spec.warm->entry_index >= argv.size()) return std::nullopt;
  const auto entry = argv.begin() + static_cast<std::ptrdiff_t>(spec.warm->entry_index);
  return WarmEntry{spec.warm->module, *entry, {entry, argv.end()}};
}

WorkerLaunch PlanWorker(const WorkerSpec& spec, const WorkerGroupEnv& group,
                        const std::string& attempt_dir, int local_rank) {
  WorkerLaunch worker;
  worker.local_rank = local_rank;
  worker.global_rank = group.ranks.base_global_rank + local_rank;
  const std::map<std::string, std::string> arg_values{{"local_rank", std::to_string(local_rank)}};
  for (const auto& arg : spec.command) worker.argv.push_back(SafeSubstitute(arg, arg_values));
  worker.warm = WarmEntryOf(spec, worker.argv);
  const std::string rank_dir = attempt_dir.empty() ? "" : RankDir(attempt_dir, local_rank);
  worker.error_file = rank_dir.empty() ? "" : rank_dir + "/error.json";
  worker.env = BuildWorkerEnv(spec.base_env, group, local_rank, worker.error_file);
  const bool hang_detection = spec.hang.On();
  worker.pulse_file = hang_detection && !rank_dir.empty() ? rank_dir + "/pulse" : "";
  worker.stacks_file = rank_dir.empty() ? "" : rank_dir + "/stacks.log";
  if (local_rank < static_cast<int>(spec.cpu_binding.size())) {
    worker.cpu_binding = spec.cpu_binding[static_cast<std::size_t>(local_rank)];
  }
  AddDiagnosticsEnv(worker.env, {rank_dir, worker.pulse_file, spec.timer_file});
  worker.out = RouteStream(spec, local_rank, StreamSelection::kStdout, rank_dir + "/stdout.log");
  worker.err = RouteStream(spec, local_rank, StreamSelection::kStderr, rank_dir + "/stderr.log");
  worker.prefix =
      SafeSubstitute(spec.prefix_template, {{"role_name", spec.role},
                                            {"local_rank", std::to_string(local_rank)},
                                            {"rank", std::to_string(worker.global_rank)},
                                            {"hostname", spec.hostname}});
  return worker;
}

}  // namespace

WorkerGroupEnv MakeGroupEnv(const WorkerSpec& spec, const rendezvous::RendezvousInfo& round,
                            const RankAssignment& ranks, int restart_count,
                            const std::string& run_id) {
  WorkerGroupEnv group;
  group.role = spec.role;
  group.local_world_size = spec.local_world_size;
  group.group_rank = round.group_rank;
  group.group_world_size = round.group_world_size;
  group.ranks = ranks;
  group.master_addr = round.master_addr;
  group.master_port = round.master_port;
  group.restart_count = restart_count;
  group.max_restarts = spec.max_restarts;
  group.run_id = run_id;
  group.use_agent_store = round.use_agent_store;
  group.virtual_local_rank = spec.virtual_local_rank;
  return group;
}

std::string AttemptDir(const WorkerSpec& spec, int restart_count) {
  if (spec.run_log_dir.empty()) return "";
  return spec.run_log_dir + "/attempt_" + std::to_string(restart_count);
}

AttemptLaunch PlanAttempt(const WorkerSpec& spec, const WorkerGroupEnv& group) {
  AttemptLaunch attempt;
  attempt.attempt_dir = AttemptDir(spec, group.restart_count);
  attempt.duplicate_stdout_filters = spec.duplicate_stdout_filters;
  attempt.duplicate_stderr_filters = spec.duplicate_stderr_filters;
  attempt.hang = spec.hang;
  attempt.timer_file = spec.timer_file;
  for (int local_rank = 0; local_rank < spec.local_world_size; ++local_rank) {
    attempt.workers.push_back(PlanWorker(spec, group, attempt.attempt_dir, local_rank));
  }
  return attempt;
}

}  // namespace ddprun::elastic
