#include "elastic/torchelastic_events.h"

#include <chrono>

namespace ddprun::elastic {
namespace {

// torch 2.x's ProcessFailure when the worker wrote no error file (_EMPTY_ERROR_DATA, dumped).
constexpr const char* kNoErrorFile =
    R"({"message": "<NONE>", "errorTraits": {"category": "system_terminated_error", )"
    R"("retryability": "False"}})";

nlohmann::json OrNull(const std::optional<std::string>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json OrNull(const std::optional<int>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

TorchelasticEvents::TorchelasticEvents(TorchelasticRun run, LineWriter write, Clock& clock)
    : run_(std::move(run)), write_(std::move(write)), clock_(clock), started_(clock.Now()) {}

void TorchelasticEvents::Record(const std::string& event, const nlohmann::json& fields) {
  role_ = fields.value("role", role_);
  host_ = fields.value("host", host_);
  restart_count_ = fields.value("restart_count", restart_count_);
  if (fields.contains("group_rank")) group_rank_ = fields["group_rank"].get<int>();
  if (event == "rendezvous_started") {
    rendezvous_started_ = clock_.Now();
  } else if (event == "round_formed") {
    OnRoundFormed(fields);
  } else if (event == "workers_started") {
    OnWorkersStarted(fields);
  } else if (event == "worker_exited") {
    OnWorkerExited(fields);
  } else if (event == "finished") {
    OnFinished(fields);
  }
}

void TorchelasticEvents::OnRoundFormed(const nlohmann::json& fields) {
  group_world_size_ = fields.value("group_world_size", group_world_size_);
  world_size_ = fields.value("world_size", world_size_);
  std::optional<double> duration_ms;
  if (rendezvous_started_) {
    duration_ms =
        std::chrono::duration<double, std::milli>(clock_.Now() - *rendezvous_started_).count();
  }
  rendezvous_started_.reset();
  Tell("RENDEZVOUS", "AGENT", nullptr, std::nullopt, duration_ms);
}

void TorchelasticEvents::OnWorkersStarted(const nlohmann::json& fields) {
  workers_.clear();
  const nlohmann::json pids = fields.value("pids", nlohmann::json::array());
  int local_rank = 0;
  for (const auto& rank : fields.value("ranks", nlohmann::json::array())) {
    Worker worker;
    worker.local_rank = local_rank;
    worker.global_rank = rank.get<int>();
    if (static_cast<size_t>(local_rank) < pids.size() && pids[local_rank].get<int>() > 0) {
      worker.pid = pids[local_rank].get<int>();
    }
    workers_.push_back(worker);
    ++local_rank;
  }
  for (const Worker& worker : workers_) {
    Tell("START", "WORKER", &worker, std::nullopt, std::nullopt);
  }
}

void TorchelasticEvents::OnWorkerExited(const nlohmann::json& fields) {
  const int local_rank = fields.value("local_rank", -1);
  if (local_rank < 0 || static_cast<size_t>(local_rank) >= workers_.size()) return;
  Worker& worker = workers_[static_cast<size_t>(local_rank)];
  if (fields.value("pid", 0) > 0) worker.pid = fields.value("pid", 0);
  worker.exit_code = fields.value("exitcode", 0);
  // As torch 2.x: a worker stopped by the agent's signal (e.g. -15) after a peer failed is a
  // failure too; only one that exited 0 counts as terminated.
  if (worker.Failed()) {
    worker.raw_error = fields.contains("error_file") ? fields["error_file"].get<std::string>()
                                                     : std::string(kNoErrorFile);
  }
}

void TorchelasticEvents::OnFinished(const nlohmann::json& fields) {
  const std::string state = fields.value("state", "");
  if (state == "succeeded" || state == "failed") {
    TellWorkers(state == "succeeded");
    Tell("SUCCEEDED", "AGENT", nullptr, std::nullopt, std::nullopt);
    return;
  }
  std::string reason = fields.value("error", "");
  if (reason.empty())
    reason = "stopped (exit code " + std::to_string(fields.value("exit_code", 1)) + ")";
  Tell("FAILED", "AGENT", nullptr, reason, std::nullopt);
}

// torchrun's _get_worker_state: a failed group's workers that did not fail were terminated.
void TorchelasticEvents::TellWorkers(bool succeeded) {
  for (const Worker& worker : workers_) {
    const std::string state = succeeded ? "SUCCEEDED" : worker.Failed() ? "FAILED" : "TERMINATED";
    Tell(state, "WORKER", &worker, worker.raw_error, std::nullopt);  // set for failures only
  }
}

void TorchelasticEvents::Tell(const std::string& state, const std::string& source,
                              const Worker* worker, std::optional<std::string> raw_error,
                              std::optional<double> duration_ms) {
  nlohmann::ordered_json inner{{"group_world_size", group_world_size_},
                               {"entry_point", run_.entry_point}};
  if (worker != nullptr) {
    // One-element lists, as torch writes them (a trailing comma makes them tuples).
    inner["local_rank"] = {worker->local_rank};
    inner["role_rank"] = {worker->global_rank};  // one role per job: role ranks are global
    inner["role_world_size"] = {world_size_};
    inner["exit_code"] = {worker->Failed() ? OrNull(worker->exit_code) : nullptr};
    inner["worker_pid"] = {worker->Failed() ? OrNull(worker->pid) : nullptr};
  }
  const auto run_time = std::chrono::duration_cast<std::chrono::seconds>(clock_.Now() - started_);
  nlohmann::ordered_json metadata{
      {"run_id", run_.run_id},
      {"global_rank", worker ? nlohmann::json(worker->global_rank) : nlohmann::json(nullptr)},
      {"group_rank", OrNull(group_rank_)},
      {"worker_id", worker && worker->pid ? nlohmann::json(std::to_string(*worker->pid))
                                          : nlohmann::json(nullptr)},
      {"role", role_},
      {"hostname", host_},
      {"state", state},
      {"total_run_time", run_time.count()},
      {"rdzv_backend", run_.rdzv_backend},
      {"raw_error", OrNull(raw_error)},
      {"metadata", inner.dump()},
      {"agent_restarts", restart_count_},
      {"duration_ms", duration_ms ? nlohmann::json(*duration_ms) : nlohmann::json(nullptr)}};
  const auto now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(clock_.WallNow().time_since_epoch());
  nlohmann::ordered_json event{{"name", "torchelastic.worker.status." + state},
                               {"source", source},
                               {"timestamp", now_ms.count()},
                               {"metadata", metadata}};
  write_(event.dump());
}

}  // namespace ddprun::elastic
