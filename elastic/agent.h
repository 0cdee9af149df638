// The elastic agent: rendezvous -> start workers -> watch their exits -> on failure restart
// (up to max_restarts) or stop -> report. Policy only: processes, signals, store calls and
// other nodes come in through the seams and the calls below, all on one event loop.
//
// States and transitions:
//   kInit --Run()--> kRendezvous --round formed, ranks agreed--> kHealthy
//   kHealthy --all workers exit 0--> kExitBarrier (multi-node) --> kFinished (SUCCEEDED)
//   kHealthy --a worker fails | a remote failure | a node lost--> kStoppingAfterFailure
//        --group stopped--> kRendezvous (restart, restarts left; every node restarts together)
//                         | kFailureBarrier (multi-node) | kFinished (FAILED)
//   kExitBarrier (success) --remote failure--> as kStoppingAfterFailure with the group stopped
//   any running state --HandleSignal(s)--> kStoppingForSignal --> kFinished (STOPPED)
//        (multi-node from kHealthy: once the group stopped and the peers have the record; the
//        watch and its heartbeats go on until then, so no peer mistakes the signal for a loss)
//   kStoppingForSignal --HandleSignal--> same state, group SIGKILLed at once
// Multi-node rounds (RendezvousInfo::store set and group_world_size > 1) add: torchrun's
// role_info rank exchange, a failure record published to every peer's inbox, the PeerMonitor,
// and the exit barrier that keeps node 0 (the store host) alive until the others finish.
// Elastic handlers (RendezvousHandler::Elastic(), whatever the round's size) instead take ranks
// and the job-wide restart count from the round, announce failures through the handler, and
//   kHealthy --node lost | node waiting | node leaving--> kStoppingForChange
//        --group stopped--> kRendezvous (no restart spent)
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "elastic/attempt_plan.h"
#include "elastic/blocking_runner.h"
#include "elastic/event_sink.h"
#include "elastic/failure.h"
#include "elastic/peer_monitor.h"
#include "elastic/process_context.h"
#include "elastic/round_sync.h"
#include "rendezvous/rendezvous_handler.h"

namespace ddprun::elastic {

struct AgentResult {
  enum class State { kSucceeded, kFailed, kStopped, kError };
  State state = State::kSucceeded;
  std::vector<ProcessFailure> failures;  // kFailed: every failure of the last attempt
  int signal = 0;                        // kStopped: the signal that stopped the launcher
  std::string error;                     // kError: one line
  bool usage_error = false;              // kError from bad input (a UsageError): exit code 2
  int restart_count = 0;
  // Multi-node kFailed: where the root cause happened, and one line saying so (also set when a
  // node was lost, then with no failures).
  int root_cause_node = 0;
  std::string root_cause_host;
  std::string note;

  // 0; the root cause's exit code (128+N for a signal); 128+N when stopped by signal N; 1 (2
  // for bad input found while setting up, e.g. a store_bind that is not this machine's).
  int ExitCode() const;
};

struct AgentOptions {
  std::chrono::milliseconds shutdown_timeout{30'000};
  std::chrono::milliseconds exit_barrier_timeout{300'000};    // torchrun's exit_barrier_timeout
  std::chrono::milliseconds failure_barrier_timeout{15'000};  // node 0 outlives failing peers
  // How long workers asked for their stacks (a hang, an expired timer) get to write them.
  std::chrono::milliseconds stack_dump_window{5'000};
  Clock* clock = &RealClock();  // the time of the record a stopping agent leaves (not owned)
};

// Collaborators of multi-node runs; null members: blocking calls run inline, nobody watches.
struct AgentLinks {
  BlockingRunner* runner = nullptr;
  PeerMonitor* monitor = nullptr;
  EventSink* events = nullptr;  // --event_log; null: none
};

class Agent {
 public:
  using DoneCallback = std::function<void(const AgentResult&)>;

  Agent(WorkerSpec spec, AgentOptions options, rendezvous::RendezvousHandler& rendezvous,
        ProcessContext& processes, AgentLinks links = {});

  // Rendezvous and start the first attempt; `done` runs exactly once, from a later event.
  void Run(DoneCallback done);
  // A signal the launcher handles: forward it to the workers, then finish as kStopped.
  void HandleSignal(int signal);
  // Events of the PeerMonitor (also callable directly).
  void HandleRemoteFailure(const NodeFailure& record);
  void HandleNodeLost(int node_rank, const std::string& reason);
  // Elastic: the round must form again (a node waits to join, or a member left).
  void HandleMembershipChange(const std::string& reason);
  // The ProcessContext's: a rank hung or its file timer expired (agent_hang.cc). The live
  // workers are asked for their stacks first; then the group fails like any failure, its root
  // cause naming where each rank was.
  void HandleHang(const HangReport& report);
  // A worker that would not die after SIGKILL: the node exits once the group is stopped.
  void HandleUnkillable(const std::string& line);
  // --hang-timeout=auto: a timeout learned (or raised) on this node: logged the first time, in
  // the event log each time, kept for the next attempts and shared with the job's other nodes.
  void HandleHangTimeoutLearned(const LearnedHangTimeout& learned);

  int RestartCount() const { return restart_count_; }

 private:
  enum class State {
    kInit,
    kRendezvous,
    kHealthy,
    kStoppingAfterFailure,
    kStoppingForChange,
    kStoppingForSignal,
    kExitBarrier,
    kFailureBarrier,
    kFinished
  };
  struct Round;  // the outcome of a rendezvous, filled off the event loop

  bool MultiNode() const;
  bool Elastic() const { return rendezvous_.Elastic(); }
  void TakeRound(const rendezvous::RendezvousInfo& info, const std::vector<PeerInfo>& peers);
  void StopForChange(const std::string& reason);
  void TellStoreLost(const std::string& reason);
  void StartAttempt();
  void OnRendezvousDone(const std::shared_ptr<Round>& round, std::exception_ptr error);
  void StartWorkers();
  void Watch();
  void Unwatch();
  void OnWorkerExit(const WorkerExit& exit);
  void OnLocalFailure(const ProcessFailure& failure);
  void OnStacksDumped();
  ProcessFailure HangFailure() const;
  // The global rank of a local rank of this attempt; -1 for one outside it.
  int GlobalRankOf(int local_rank) const;
  // The stacks.log of every worker that wrote a stack dump this attempt.
  std::vector<std::string> StackFiles() const;
  void DumpStacksThenStop();
  // Counts the attempt that ended in `failure` towards --max-no-progress-hangs (a hang before
  // progress) or starts the count again (anything else).
  void CountHangsBeforeProgress(const ProcessFailure& failure);
  // Whether the job stops for --max-no-progress-hangs instead of restarting: then it has.
  bool StopForHangsBeforeProgress();
  void PublishLearnedHangTimeout();
  void OnAllSucceeded();
  void StopAfterFailure();
  void OnGroupStopped();
  void FinishFailed(const std::string& note = "");
  void StopGroup(int signal, std::chrono::milliseconds grace);
  void Publish(const NodeFailure& record, bool leaving, std::function<void()> published = {});
  void TellPeersLeaving(int signal, const std::string& signal_name);
  void FinishStoppedOnceTold();
  // A second signal or a lost peer: finish without the record (once the group stopped).
  void StopWaitingForPeers(const std::string& why);
  void RunBarrier(const std::string& name, std::chrono::milliseconds timeout,
                  std::function<void(bool completed)> then);
  AgentResult LostResult() const;
  std::string HostOf(int node_rank) const;
  AgentResult Outcome(AgentResult::State state) const;
  AgentResult Stopped(int signal) const;
  AgentResult Errored(const std::string& error) const;
  void Finish(AgentResult result);
  void Emit(const std::string& event, nlohmann::json fields = nlohmann::json::object()) const;

  WorkerSpec spec_;
  AgentOptions options_;
  rendezvous::RendezvousHandler& rendezvous_;
  ProcessContext& processes_;
  InlineRunner inline_runner_;
  BlockingRunner& runner_;
  PeerMonitor* monitor_;
  EventSink* events_;
  DoneCallback done_;

  State state_ = State::kInit;
  int restart_count_ = 0;
  int live_workers_ = 0;
  int stop_signal_ = 0;
  rendezvous::RendezvousInfo info_;
  std::vector<PeerInfo> peers_;
  RankAssignment ranks_;
  AttemptLaunch attempt_;
  std::vector<ProcessFailure> failures_;
  struct FailureOrigin {
    int node = 0;  // group rank in the round it failed in
    std::string host;
    bool local = false;
  };
  std::vector<FailureOrigin> failure_origins_;       // one per entry of failures_
  std::optional<std::pair<int, std::string>> lost_;  // node rank, reason
  // The running barrier's own store connection, interrupted to cancel it at once.
  struct Barrier {
    std::mutex mutex;
    std::shared_ptr<store::Store> store;
    bool cancelled = false;
    void Cancel();
    bool Cancelled();
    // False when the barrier was cancelled before it could start.
    bool Attach(std::shared_ptr<store::Store> own);
  };
  void CancelBarrier() { barrier_->Cancel(); }
  std::shared_ptr<Barrier> barrier_ = std::make_shared<Barrier>();
  bool watching_ = false;
  // kStoppingForSignal: the leaving record is still being written / the workers have exited.
  bool telling_peers_ = false;
  bool group_stopped_ = false;
  // Hangs: the report being acted on, the stacks the workers wrote, and whether a dump runs.
  std::optional<HangReport> hang_;
  std::vector<std::string> stack_dumps_;  // per local rank
  bool dumping_ = false;
  std::vector<std::string> unkillable_;
  // --hang-timeout=auto: the largest timeout learned here or read from the job's store.
  std::optional<std::chrono::milliseconds> learned_hang_timeout_;
  // Attempts in a row that ended in a hang before any progress past start-up.
  int hangs_before_progress_ = 0;
};

}  // namespace ddprun::elastic
