// The elastic agent: rendezvous -> start workers -> watch their exits -> on failure restart
// (up to max_restarts) or stop -> report. Policy only: processes, signals and time come in
// through the ProcessContext and the calls below, all on one event loop.
//
// States and transitions:
//   kInit --Run()--> kHealthy                     (rendezvous done, workers started)
//   kHealthy --all workers exit 0--> kFinished    (SUCCEEDED)
//   kHealthy --a worker fails--> kStoppingAfterFailure --group stopped-->
//        kHealthy (restart, restarts left)  |  kFinished (FAILED)
//   kHealthy/kStoppingAfterFailure --HandleSignal(s)--> kStoppingForSignal --> kFinished (STOPPED)
//   kStoppingForSignal --HandleSignal--> same state, group SIGKILLed at once
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "elastic/attempt_plan.h"
#include "elastic/failure.h"
#include "elastic/process_context.h"
#include "rendezvous/rendezvous_handler.h"

namespace ddprun::elastic {

struct AgentResult {
  enum class State { kSucceeded, kFailed, kStopped, kError };
  State state = State::kSucceeded;
  std::vector<ProcessFailure> failures;  // kFailed: every failure of the last attempt
  int signal = 0;                        // kStopped: the signal that stopped the launcher
  std::string error;                     // kError: one line
  int restart_count = 0;

  // 0; the root cause's exit code (128+N for a signal); 128+N when stopped by signal N; 1.
  int ExitCode() const;
};

struct AgentOptions {
  std::chrono::milliseconds shutdown_timeout{30'000};
};

class Agent {
 public:
  using DoneCallback = std::function<void(const AgentResult&)>;

  Agent(WorkerSpec spec, AgentOptions options, rendezvous::RendezvousHandler& rendezvous,
        ProcessContext& processes);

  // Rendezvous and start the first attempt; `done` runs exactly once, from a later event.
  void Run(DoneCallback done);
  // A signal the launcher handles: forward it to the workers, then finish as kStopped.
  void HandleSignal(int signal);

  int RestartCount() const { return restart_count_; }

 private:
  enum class State { kInit, kHealthy, kStoppingAfterFailure, kStoppingForSignal, kFinished };

  void StartAttempt();
  WorkerGroupEnv GroupEnv(const rendezvous::RendezvousInfo& info) const;
  void OnWorkerExit(const WorkerExit& exit);
  void OnGroupStopped();
  void StopGroup(int signal, std::chrono::milliseconds grace);
  void Finish(AgentResult result);

  WorkerSpec spec_;
  AgentOptions options_;
  rendezvous::RendezvousHandler& rendezvous_;
  ProcessContext& processes_;
  DoneCallback done_;

  State state_ = State::kInit;
  int restart_count_ = 0;
  int live_workers_ = 0;
  int stop_signal_ = 0;
  AttemptLaunch attempt_;
  std::vector<ProcessFailure> failures_;
};

}  // namespace ddprun::elastic
