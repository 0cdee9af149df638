#include "elastic/agent.h"

#include <csignal>

#include "common/logging.h"
#include "elastic/rank_assignment.h"

namespace ddprun::elastic {

int AgentResult::ExitCode() const {
  switch (state) {
    case State::kSucceeded:
      return 0;
    case State::kFailed:
      return failures.empty() ? 1 : failures[RootCauseIndex(failures)].status.ShellCode();
    case State::kStopped:
      return 128 + signal;
    case State::kError:
      return 1;
  }
  return 1;
}

Agent::Agent(WorkerSpec spec, AgentOptions options, rendezvous::RendezvousHandler& rendezvous,
             ProcessContext& processes)
    : spec_(std::move(spec)), options_(options), rendezvous_(rendezvous), processes_(processes) {}

void Agent::Run(DoneCallback done) {
  done_ = std::move(done);
  StartAttempt();
}

void Agent::StartAttempt() {
  rendezvous::RendezvousInfo info;
  try {
    info = rendezvous_.NextRendezvous();
  } catch (const rendezvous::RendezvousError& error) {
    Finish({AgentResult::State::kError, {}, 0, error.what(), restart_count_});
    return;
  }
  attempt_ = PlanAttempt(spec_, GroupEnv(info));
  failures_.clear();
  live_workers_ = static_cast<int>(attempt_.workers.size());
  state_ = State::kHealthy;
  spdlog::info("[{}] starting {} workers (attempt {})", spec_.role, live_workers_, restart_count_);
  processes_.Start(attempt_, [this](const WorkerExit& exit) { OnWorkerExit(exit); });
}

WorkerGroupEnv Agent::GroupEnv(const rendezvous::RendezvousInfo& info) const {
  WorkerGroupEnv group;
  group.role = spec_.role;
  group.local_world_size = spec_.local_world_size;
  group.group_rank = info.group_rank;
  group.group_world_size = info.group_world_size;
  group.ranks = AssignRanks({{spec_.role, info.group_rank, spec_.local_world_size}}).front();
  group.master_addr = info.master_addr;
  group.master_port = info.master_port;
  group.restart_count = restart_count_;
  group.max_restarts = spec_.max_restarts;
  group.run_id = rendezvous_.RunId();
  group.use_agent_store = info.use_agent_store;
  group.virtual_local_rank = spec_.virtual_local_rank;
  return group;
}

void Agent::OnWorkerExit(const WorkerExit& exit) {
  --live_workers_;
  const WorkerLaunch& worker = attempt_.workers.at(exit.local_rank);
  if (!exit.status.Success()) {
    failures_.push_back(MakeFailure(exit, worker.global_rank, worker.error_file));
    if (state_ == State::kHealthy) {
      spdlog::error("failed (exitcode: {}) local_rank: {} (pid: {}) of binary: {}",
                    exit.status.TorchrunCode(), exit.local_rank, exit.pid, worker.argv.front());
      state_ = State::kStoppingAfterFailure;
      StopGroup(SIGTERM, options_.shutdown_timeout);
    }
    return;
  }
  if (state_ == State::kHealthy && live_workers_ == 0) {
    spdlog::info("[{}] worker group successfully finished", spec_.role);
    processes_.Stop(SIGTERM, options_.shutdown_timeout, [this] {
      Finish({AgentResult::State::kSucceeded, {}, 0, "", restart_count_});
    });
  }
}

void Agent::StopGroup(int signal, std::chrono::milliseconds grace) {
  processes_.Stop(signal, grace, [this] { OnGroupStopped(); });
}

void Agent::OnGroupStopped() {
  if (state_ == State::kStoppingForSignal) {
    Finish({AgentResult::State::kStopped, {}, stop_signal_, "", restart_count_});
    return;
  }
  const int attempts_left = spec_.max_restarts - restart_count_;
  if (attempts_left > 0) {
    spdlog::warn("[{}] Worker group FAILED. {}/{} attempts left; will restart worker group",
                 spec_.role, attempts_left, spec_.max_restarts);
    ++restart_count_;
    StartAttempt();
    return;
  }
  Finish({AgentResult::State::kFailed, failures_, 0, "", restart_count_});
}

void Agent::HandleSignal(int signal) {
  switch (state_) {
    case State::kInit:
      Finish({AgentResult::State::kStopped, {}, signal, "", restart_count_});
      return;
    case State::kHealthy:
    case State::kStoppingAfterFailure:
      spdlog::warn("Received {} death signal, shutting down workers",
                   SignalName(signal).value_or(std::to_string(signal)));
      state_ = State::kStoppingForSignal;
      stop_signal_ = signal;
      StopGroup(signal, options_.shutdown_timeout);
      return;
    case State::kStoppingForSignal:
      spdlog::warn("Received {} again, killing workers now",
                   SignalName(signal).value_or(std::to_string(signal)));
      StopGroup(SIGKILL, std::chrono::milliseconds{0});
      return;
    case State::kFinished:
      return;
  }
}

void Agent::Finish(AgentResult result) {
  if (state_ == State::kFinished) return;
  state_ = State::kFinished;
  if (done_) done_(result);
}

}  // namespace ddprun::elastic
