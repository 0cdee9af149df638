// --event-log-handler=console: the agent's events retold as torchelastic's own
// (torch/distributed/elastic/events and agent/server/api.py of torch 2.x), one JSON object per
// line, so that tooling that parses torchrun's "torchelastic.worker.status.*" lines reads
// ddprun's too:
//   {"name": "torchelastic.worker.status.<STATE>", "source": "AGENT"|"WORKER",
//    "timestamp": <epoch ms (torch leaves 0)>, "metadata": {run_id, global_rank, group_rank,
//    worker_id, role, hostname, state, total_run_time, rdzv_backend, raw_error, metadata,
//    agent_restarts, duration_ms}}
// What is told, and when (as torchrun):
// - RENDEZVOUS (AGENT, with duration_ms) each time a round forms (no ASSIGN_WORKER_RANKS: the
//   round's ranks come with it);
// - START (WORKER) for each worker started, its pid as worker_id;
// - when the run ends with a result (its workers succeeded, or failed for good): one event per
//   worker of the last attempt, SUCCEEDED, FAILED (any non-zero exit, the agent's own stop
//   signal included, as torch 2.x: the error file as raw_error, the exit code and pid in
//   "metadata") or TERMINATED (a failed group's worker that exited 0), then the agent's
//   SUCCEEDED ("the agent's run returned", as torchrun records it even when workers failed);
// - when the run ends by a signal or an error: the agent's FAILED, the reason as raw_error.
// Pure: the lines go to a writer, the time comes from a Clock.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "elastic/event_sink.h"

namespace ddprun::elastic {

// What torchrun's events say that the agent's own events do not carry.
struct TorchelasticRun {
  std::string run_id;
  std::string rdzv_backend;  // static, c10d, etcd or etcd-v2, as torchrun's get_backend()
  std::string entry_point;   // the workers' program's base name: the interpreter, or the script
};

class TorchelasticEvents : public EventSink {
 public:
  using LineWriter = std::function<void(const std::string& line)>;
  TorchelasticEvents(TorchelasticRun run, LineWriter write, Clock& clock = RealClock());

  void Record(const std::string& event, const nlohmann::json& fields) override;

 private:
  struct Worker {
    int local_rank = 0;
    int global_rank = 0;
    std::optional<int> pid;
    std::optional<int> exit_code;  // set once it exited
    std::optional<std::string> raw_error;
    bool Failed() const { return exit_code && *exit_code != 0; }
  };

  void OnRoundFormed(const nlohmann::json& fields);
  void OnWorkersStarted(const nlohmann::json& fields);
  void OnWorkerExited(const nlohmann::json& fields);
  void OnFinished(const nlohmann::json& fields);
  void Tell(const std::string& state, const std::string& source, const Worker* worker,
            std::optional<std::string> raw_error, std::optional<double> duration_ms);
  void TellWorkers(bool succeeded);

  TorchelasticRun run_;
  LineWriter write_;
  Clock& clock_;
  Clock::TimePoint started_;
  std::optional<Clock::TimePoint> rendezvous_started_;
  // The context of the agent's last event.
  std::string role_;
  std::string host_;
  int restart_count_ = 0;
  std::optional<int> group_rank_;
  int group_world_size_ = 0;
  int world_size_ = 0;
  std::vector<Worker> workers_;  // the current attempt's, by local rank
};

}  // namespace ddprun::elastic
