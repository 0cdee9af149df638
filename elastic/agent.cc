#include "elastic/agent.h"

#include <csignal>

#include "common/errors.h"
#include "common/logging.h"
#include "elastic/learned_hang_timeout.h"
#include "elastic/rank_assignment.h"

namespace ddprun::elastic {

struct Agent::Round {
  rendezvous::RendezvousInfo info;
  std::vector<PeerInfo> peers;                                    // multi-node only
  std::optional<std::chrono::milliseconds> learned_hang_timeout;  // the job's, after the round
};

int AgentResult::ExitCode() const {
  switch (state) {
    case State::kSucceeded:
      return 0;
    case State::kFailed:
      return failures.empty() ? 1 : failures[RootCauseIndex(failures)].status.ShellCode();
    case State::kStopped:
      return 128 + signal;
    case State::kError:
      return usage_error ? 2 : 1;
  }
  return 1;
}

Agent::Agent(WorkerSpec spec, AgentOptions options, rendezvous::RendezvousHandler& rendezvous,
             ProcessContext& processes, AgentLinks links)
    : spec_(std::move(spec)),
      options_(options),
      rendezvous_(rendezvous),
      processes_(processes),
      runner_(links.runner ? *links.runner : inline_runner_),
      monitor_(links.monitor),
      events_(links.events) {}

void Agent::Emit(const std::string& event, nlohmann::json fields) const {
  if (events_ == nullptr) return;
  fields["role"] = spec_.role;
  fields["host"] = spec_.hostname;
  fields["restart_count"] = restart_count_;
  if (state_ != State::kInit) {
    fields["round"] = info_.round;
    fields["group_rank"] = info_.group_rank;
  }
  events_->Record(event, fields);
}

void Agent::Run(DoneCallback done) {
  done_ = std::move(done);
  StartAttempt();
}

// Keyed on the job's mode, not on the current world size: an elastic job that shrank to one
// node still publishes failures and watches for newcomers.
bool Agent::MultiNode() const {
  return Elastic() || (info_.store != nullptr && info_.group_world_size > 1);
}

// The rendezvous and the rank exchange block (on other nodes): they run on the runner.
void Agent::StartAttempt() {
  Emit("rendezvous_started");
  state_ = State::kRendezvous;
  auto round = std::make_shared<Round>();
  PeerInfo mine{spec_.role, 0, spec_.local_world_size, spec_.hostname};
  rendezvous::RendezvousHandler& handler = rendezvous_;
  const bool learn = spec_.hang.learn;
  round->learned_hang_timeout = learned_hang_timeout_;
  runner_.Run(
      [round, mine, &handler, learn]() mutable {
        round->info = handler.NextRendezvous();
        if (learn && round->info.job_store != nullptr) {
          round->learned_hang_timeout =
              elastic::ShareLearnedHangTimeout(*round->info.job_store, round->learned_hang_timeout);
        }
        if (round->info.store == nullptr || round->info.group_world_size <= 1) return;
        if (round->info.base_global_rank) return;  // the rendezvous assigned the ranks
        mine.group_rank = round->info.group_rank;
        round->peers = ExchangeRoleInfos(*round->info.store, mine, round->info.group_world_size);
      },
      [this, round](std::exception_ptr error) { OnRendezvousDone(round, error); });
}

void Agent::OnRendezvousDone(const std::shared_ptr<Round>& round, std::exception_ptr error) {
  if (state_ == State::kStoppingForSignal) {
    Finish(Stopped(stop_signal_));
    return;
  }
  if (state_ != State::kRendezvous) return;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const UsageError& bad_input) {
      AgentResult result = Errored(bad_input.what());
      result.usage_error = true;
      Finish(result);
    } catch (const std::exception& failure) {
      Finish(Errored(failure.what()));
    }
    return;
  }
  TakeRound(round->info, round->peers);
  if (round->learned_hang_timeout) {  // one learned meanwhile (a late event) is kept too
    learned_hang_timeout_ = std::max(*round->learned_hang_timeout,
                                     learned_hang_timeout_.value_or(std::chrono::milliseconds{0}));
  }
  if (Elastic() && restart_count_ > spec_.max_restarts) {
    // The round says a failure spent the job's last restart: every member ends here.
    spdlog::error("[{}] the job's {} restart(s) are spent; stopping", spec_.role,
                  spec_.max_restarts);
    FinishFailed();
    return;
  }
  StartWorkers();
}

void Agent::TakeRound(const rendezvous::RendezvousInfo& info, const std::vector<PeerInfo>& peers) {
  for (const auto& [event, fields] : info.events) {  // the round's own (e.g. the store moved)
    Emit(event, nlohmann::json::parse(fields, nullptr, false));
  }
  info_ = info;
  peers_ = peers;
  lost_.reset();
  if (info_.base_global_rank && info_.global_world_size) {
    // One role per job: role ranks are the global ranks.
    ranks_ = {*info_.base_global_rank, *info_.global_world_size, *info_.base_global_rank,
              *info_.global_world_size};
  } else if (info_.store != nullptr && info_.group_world_size > 1) {
    ranks_ = AssignFromPeers(peers_, info_.group_rank);
  } else {
    ranks_ = AssignRanks({{spec_.role, info_.group_rank, spec_.local_world_size}}).front();
  }
  if (info_.restart_count) restart_count_ = *info_.restart_count;
  if (Elastic()) {
    spdlog::warn(
        "[{}] round {} formed: {} node(s), world size {}; this node is group rank {} "
        "(restart count {})",
        spec_.role, info_.round, info_.group_world_size, ranks_.global_world_size, info_.group_rank,
        restart_count_);
  }
  Emit("round_formed", {{"group_world_size", info_.group_world_size},
                        {"world_size", ranks_.global_world_size},
                        {"base_global_rank", ranks_.base_global_rank},
                        {"master", info_.master_addr + ":" + std::to_string(info_.master_port)}});
}

void Agent::StartWorkers() {
  attempt_ =
      PlanAttempt(spec_, MakeGroupEnv(spec_, info_, ranks_, restart_count_, rendezvous_.RunId()));
  attempt_.learned_hang_timeout = learned_hang_timeout_;
  failures_.clear();
  failure_origins_.clear();
  live_workers_ = static_cast<int>(attempt_.workers.size());
  state_ = State::kHealthy;
  spdlog::info("[{}] starting {} workers (attempt {})", spec_.role, live_workers_, restart_count_);
  WorkerEvents events;
  events.on_exit = [this](const WorkerExit& exit) { OnWorkerExit(exit); };
  events.on_hang = [this](const HangReport& report) { HandleHang(report); };
  events.on_unkillable = [this](const std::string& line) { HandleUnkillable(line); };
  events.on_hang_timeout_learned = [this](const LearnedHangTimeout& learned) {
    HandleHangTimeoutLearned(learned);
  };
  hang_.reset();
  stack_dumps_.assign(attempt_.workers.size(), std::string());
  dumping_ = false;
  processes_.Start(attempt_, std::move(events));
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& worker : attempt_.workers) ranks.push_back(worker.global_rank);
  nlohmann::json fields{{"ranks", ranks}};
  if (const auto pids = processes_.Pids(); !pids.empty()) fields["pids"] = pids;
  // "warm" (forked from the --warm-restart pool) or "cold" (exec'd), by local rank.
  if (const auto kinds = processes_.StartKinds(); !kinds.empty()) fields["start"] = kinds;
  if (spec_.hang.On()) {  // the timeouts this attempt starts with (telemetry shows them)
    const auto hang = spec_.hang.learn ? learned_hang_timeout_ : spec_.hang.hang;
    fields["hang_timeout_s"] = hang ? nlohmann::json(hang->count() / 1000.0) : nlohmann::json();
    fields["hang_timeout_learned"] = spec_.hang.learn;
    fields["hang_startup_timeout_s"] = spec_.hang.startup.count() / 1000.0;
  }
  Emit("workers_started", fields);
  Watch();
}

void Agent::OnWorkerExit(const WorkerExit& exit) {
  --live_workers_;
  const WorkerLaunch& worker = attempt_.workers.at(exit.local_rank);
  if (!exit.stack_dump.empty()) stack_dumps_.at(exit.local_rank) = exit.stack_dump;
  nlohmann::json exited{{"local_rank", exit.local_rank},
                        {"rank", worker.global_rank},
                        {"pid", exit.pid},
                        {"exitcode", exit.status.TorchrunCode()},
                        {"expected", state_ != State::kHealthy}};
  if (exit.error_file_json) exited["error_file"] = *exit.error_file_json;
  Emit("worker_exited", exited);
  if (!exit.status.Success()) {
    failures_.push_back(MakeFailure(exit, worker.global_rank, worker.error_file));
    failure_origins_.push_back({info_.group_rank, spec_.hostname, true});
    if (state_ == State::kHealthy) {
      spdlog::error("failed (exitcode: {}) local_rank: {} (pid: {}) of binary: {}",
                    exit.status.TorchrunCode(), exit.local_rank, exit.pid, worker.argv.front());
      CountHangsBeforeProgress(failures_.back());
      OnLocalFailure(failures_.back());
    }
    return;
  }
  if (state_ == State::kHealthy && live_workers_ == 0) OnAllSucceeded();
}

void Agent::OnLocalFailure(const ProcessFailure& failure) {
  if (MultiNode()) Publish({info_.group_rank, spec_.hostname, failure}, false);
  StopAfterFailure();
}

// Elastic: the round's watch goes on until the next round's replaces it, so that a lost member
// (whose vanishing is often what failed the workers) is still declared gone and the next
// round counts a loss, not a failure.
void Agent::StopAfterFailure() {
  state_ = State::kStoppingAfterFailure;
  CancelBarrier();
  if (!Elastic()) Unwatch();
  StopGroup(SIGTERM, options_.shutdown_timeout);
}

void Agent::OnAllSucceeded() {
  spdlog::info("[{}] worker group successfully finished", spec_.role);
  if (!MultiNode()) {
    processes_.Stop(SIGTERM, options_.shutdown_timeout,
                    [this] { Finish(Outcome(AgentResult::State::kSucceeded)); });
    return;
  }
  spdlog::info("[{}] Waiting {} seconds for other agents to finish.", spec_.role,
               options_.exit_barrier_timeout.count() / 1000);
  state_ = State::kExitBarrier;
  barrier_ = std::make_shared<Barrier>();
  processes_.Stop(SIGTERM, options_.shutdown_timeout, [this] {
    RunBarrier("ddprun/exit_barrier", options_.exit_barrier_timeout, [this](bool completed) {
      if (state_ != State::kExitBarrier) return;
      Unwatch();
      // Peers leave (and node 0's store closes) once the barrier completes: only a node lost
      // before that is a failure.
      Finish(!completed && lost_ ? LostResult() : Outcome(AgentResult::State::kSucceeded));
    });
  });
}

void Agent::StopGroup(int signal, std::chrono::milliseconds grace) {
  processes_.Stop(signal, grace, [this] { OnGroupStopped(); });
}

void Agent::OnGroupStopped() {
  if (!unkillable_.empty() && state_ != State::kStoppingForSignal) {
    // A worker that will not die keeps its GPU and memory: no new attempt on this host. The
    // node exits (its peers see it lost) rather than wedging.
    AgentResult result = Outcome(AgentResult::State::kFailed);
    result.failures = failures_;
    result.note = unkillable_.front() + "; this node stops here instead of restarting";
    Finish(result);
    return;
  }
  if (state_ == State::kStoppingForSignal) {
    group_stopped_ = true;
    FinishStoppedOnceTold();
    return;
  }
  if (state_ == State::kStoppingForChange) {
    Emit("restart", {{"cause", "membership"}});
    StartAttempt();  // a membership change spends no restart
    return;
  }
  if (lost_ && !Elastic()) {
    Finish(LostResult());
    return;
  }
  if (StopForHangsBeforeProgress()) return;
  if (Elastic()) {
    // The next round decides whether the failure spends a restart (not when a node was lost)
    // and whether any is left (OnRendezvousDone).
    spdlog::warn("[{}] Worker group FAILED; rejoining the rendezvous (restart count {} of {})",
                 spec_.role, restart_count_, spec_.max_restarts);
    Emit("restart", {{"cause", "failure"}});
    StartAttempt();
    return;
  }
  const int attempts_left = spec_.max_restarts - restart_count_;
  if (attempts_left > 0) {
    spdlog::warn("[{}] Worker group FAILED. {}/{} attempts left; will restart worker group",
                 spec_.role, attempts_left, spec_.max_restarts);
    ++restart_count_;
    Emit("restart", {{"cause", "failure"}});
    StartAttempt();
    return;
  }
  FinishFailed();
}

void Agent::HandleSignal(int signal) {
  const std::string name = SignalName(signal).value_or(std::to_string(signal));
  if (state_ != State::kFinished) Emit("signal", {{"signal", name}});
  switch (state_) {
    case State::kInit:
      Finish(Stopped(signal));
      return;
    case State::kRendezvous:
      spdlog::warn("Received {} death signal while waiting for the other nodes", name);
      state_ = State::kStoppingForSignal;
      stop_signal_ = signal;
      rendezvous_.Shutdown();  // wakes the rendezvous; its completion finishes the agent
      return;
    case State::kHealthy:
    case State::kStoppingAfterFailure:
    case State::kStoppingForChange: {
      spdlog::warn("Received {} death signal, shutting down workers", name);
      const bool tell_peers = state_ == State::kHealthy && MultiNode();
      state_ = State::kStoppingForSignal;
      stop_signal_ = signal;
      if (tell_peers) {
        TellPeersLeaving(signal, name);  // the watch and its heartbeats go on until they know
      } else {
        Unwatch();
      }
      StopGroup(signal, options_.shutdown_timeout);
      return;
    }
    case State::kExitBarrier:
    case State::kFailureBarrier:
      CancelBarrier();
      Unwatch();
      Finish(Stopped(signal));
      return;
    case State::kStoppingForSignal:
      spdlog::warn("Received {} again, killing workers now", name);
      StopWaitingForPeers("received " + name + " again");
      StopGroup(SIGKILL, std::chrono::milliseconds{0});
      return;
    case State::kFinished:
      return;
  }
}

// The other nodes learn why this one stops before its heartbeats end: a peer that sees the
// heartbeats stop first reports a lost node instead of this signal. Finishing waits for the
// record (FinishStoppedOnceTold); a second signal, or a peer lost meanwhile, stops the wait.
void Agent::TellPeersLeaving(int signal, const std::string& signal_name) {
  ProcessFailure stop{
      0,
      ranks_.base_global_rank,
      0,
      ExitStatus::Signaled(signal),
      options_.clock->WallNow(),
      "<N/A>",
      "the agent of node " + std::to_string(info_.group_rank) + " received " + signal_name};
  telling_peers_ = true;
  Publish({info_.group_rank, spec_.hostname, stop}, true, [this] {
    telling_peers_ = false;
    FinishStoppedOnceTold();
  });
}

void Agent::StopWaitingForPeers(const std::string& why) {
  if (!telling_peers_) return;
  spdlog::warn("[{}] not waiting any longer for the other nodes to be told: {}", spec_.role, why);
  telling_peers_ = false;
  FinishStoppedOnceTold();
}

void Agent::FinishStoppedOnceTold() {
  if (state_ == State::kStoppingForSignal && group_stopped_ && !telling_peers_) {
    Finish(Stopped(stop_signal_));
  }
}

AgentResult Agent::Outcome(AgentResult::State state) const {
  AgentResult result;
  result.state = state;
  result.restart_count = restart_count_;
  return result;
}

AgentResult Agent::Stopped(int signal) const {
  AgentResult result = Outcome(AgentResult::State::kStopped);
  result.signal = signal;
  return result;
}

AgentResult Agent::Errored(const std::string& error) const {
  AgentResult result = Outcome(AgentResult::State::kError);
  result.error = error;
  return result;
}

void Agent::Finish(AgentResult result) {
  if (state_ == State::kFinished) return;
  Unwatch();
  static constexpr const char* kStates[] = {"succeeded", "failed", "stopped", "error"};
  nlohmann::json fields{{"state", kStates[static_cast<int>(result.state)]},
                        {"exit_code", result.ExitCode()}};
  if (!result.error.empty()) fields["error"] = result.error;
  if (!result.note.empty()) fields["note"] = result.note;
  Emit("finished", fields);
  state_ = State::kFinished;
  if (done_) done_(result);
}

}  // namespace ddprun::elastic
