// The Agent's multi-node half: peers' events, failure records, barriers.
#include <csignal>

#include "common/duration.h"
#include "common/logging.h"
#include "elastic/agent.h"

namespace ddprun::elastic {

void Agent::Watch() {
  if (!MultiNode() || monitor_ == nullptr) return;
  watching_ = true;
  PeerMonitor::Events events;
  events.on_remote_failure = [this](const NodeFailure& record) { HandleRemoteFailure(record); };
  events.on_node_lost = [this](int node, const std::string& why) { HandleNodeLost(node, why); };
  events.on_membership_change = [this](const std::string& why) { HandleMembershipChange(why); };
  monitor_->Watch(info_, std::move(events));
}

void Agent::Unwatch() {
  if (!watching_) return;
  watching_ = false;
  monitor_->Unwatch();
}

void Agent::HandleRemoteFailure(const NodeFailure& record) {
  if (state_ != State::kHealthy && state_ != State::kExitBarrier) return;
  Emit("remote_failure", {{"node", record.node_rank},
                          {"node_host", record.host},
                          {"rank", record.failure.global_rank},
                          {"exitcode", record.failure.status.TorchrunCode()}});
  if (record.failure.hang) {  // where every rank was: the line a user needs, on every node
    spdlog::error(
        "[{}] node {} (host {}) found the group hung; stopping the workers of this "
        "node after their stacks:\n{}",
        spec_.role, record.node_rank, record.host, record.failure.message);
  } else {
    spdlog::error(
        "[{}] node {} (host {}) failed: rank {} exitcode {}; stopping the workers of "
        "this node",
        spec_.role, record.node_rank, record.host, record.failure.global_rank,
        record.failure.status.TorchrunCode());
  }
  failures_.push_back(record.failure);
  failure_origins_.push_back({record.node_rank, record.host, false});
  CountHangsBeforeProgress(record.failure);
  if (record.failure.hang) {
    DumpStacksThenStop();  // the hung group's stacks on this node too
    return;
  }
  StopAfterFailure();
}

void Agent::HandleNodeLost(int node_rank, const std::string& reason) {
  if (state_ == State::kStoppingForSignal) {
    // The record cannot be waited for: the store or a peer is gone (the watch's patience, the
    // heartbeat timeout, bounds how long a signalled agent waits for it).
    StopWaitingForPeers(reason);
    return;
  }
  if (state_ != State::kHealthy && state_ != State::kExitBarrier) return;
  // This node itself, declared lost while it could not beat (a paused process, a partition
  // that healed): its workers are stale, the others formed a round without it.
  const bool self = node_rank >= 0 && node_rank == info_.group_rank;
  if (node_rank >= 0) {
    Emit("node_lost", {{"node", node_rank}, {"reason", reason}, {"self", self}});
  } else {  // the rendezvous handler decides next round whether it is lost (store_lost)
    Emit("store_unreachable", {{"reason", reason}});
  }
  if (Elastic()) {
    const std::string what =
        self ? "this node (group rank " + std::to_string(node_rank) +
                   ") was declared lost by the others (" + reason +
                   "): it was paused or cut off past the heartbeat timeout; stopping its stale "
                   "workers and rejoining as a new member"
        : node_rank >= 0 ? "node " + std::to_string(node_rank) + " lost: " + reason
                         : reason;
    if (state_ == State::kHealthy) {
      if (node_rank < 0) TellStoreLost(reason);
      StopForChange(what);
    } else {  // this node's workers succeeded: the barrier no longer waits for the lost one
      spdlog::warn("[{}] {}; leaving the exit barrier", spec_.role, what);
      CancelBarrier();
    }
    return;
  }
  spdlog::error("[{}] node {} was lost: {}; stopping the workers of this node", spec_.role,
                node_rank, reason);
  lost_ = std::make_pair(node_rank, reason);
  if (state_ == State::kExitBarrier) {
    CancelBarrier();  // the barrier's outcome decides (see OnAllSucceeded)
    return;
  }
  StopAfterFailure();
}

void Agent::HandleMembershipChange(const std::string& reason) {
  if (state_ != State::kHealthy) return;
  Emit("membership_changed", {{"reason", reason}});
  StopForChange(reason);
}

// The round ends for this node without a word (the store does not answer): the handler says so
// at its next arrival, so that its peers' failing workers spend no restart.
void Agent::TellStoreLost(const std::string& reason) {
  rendezvous::RendezvousHandler* handler = &rendezvous_;
  runner_.Run(
      [handler, reason] {
        handler->AnnounceRoundEnd({rendezvous::RoundEnd::Kind::kStoreLost, reason});
      },
      [](std::exception_ptr) {});
}

void Agent::StopForChange(const std::string& reason) {
  spdlog::warn("[{}] {}; restarting at a new membership (no restart spent)", spec_.role, reason);
  state_ = State::kStoppingForChange;
  CancelBarrier();  // the watch goes on until the next round's (see StopAfterFailure)
  StopGroup(SIGTERM, options_.shutdown_timeout);
}

void Agent::FinishFailed(const std::string& note) {
  AgentResult result = Outcome(AgentResult::State::kFailed);
  result.failures = failures_;
  result.note = note;
  if (!MultiNode()) {
    Finish(result);
    return;
  }
  if (!failures_.empty()) {
    const FailureOrigin& origin = failure_origins_[RootCauseIndex(failures_)];
    const int node = origin.node;
    result.root_cause_node = node;
    result.root_cause_host = origin.host;
    if (!origin.local) {
      result.note = (note.empty() ? "" : note + "; ") + "the root cause is on node " +
                    std::to_string(node) + " (host " + result.root_cause_host +
                    "); stopped the workers of node " + std::to_string(info_.group_rank);
    }
  }
  state_ = State::kFailureBarrier;
  barrier_ = std::make_shared<Barrier>();
  RunBarrier("ddprun/failure_barrier", options_.failure_barrier_timeout, [this, result](bool) {
    if (state_ == State::kFailureBarrier) Finish(result);
  });
}

// `leaving`: this agent stops now and will not join the failure barrier, so count it there.
// `published` runs on the event loop once the record is written (or could not be).
void Agent::Publish(const NodeFailure& record, bool leaving, std::function<void()> published) {
  store::Store* store = info_.store;
  const int world = info_.group_world_size;
  rendezvous::RendezvousHandler* handler = Elastic() ? &rendezvous_ : nullptr;
  runner_.Run(
      [store, record, world, leaving, handler] {
        if (handler != nullptr) {  // elastic: the round ends for everyone, a leaver is gone
          using Kind = rendezvous::RoundEnd::Kind;
          handler->AnnounceRoundEnd({leaving ? Kind::kLeaving : Kind::kFailure,
                                     leaving ? record.failure.message : EncodeNodeFailure(record)});
          return;
        }
        PublishFailure(*store, record, world);
        if (leaving) LeaveBarrier(*store, "ddprun/failure_barrier", world);
      },
      [published = std::move(published)](std::exception_ptr error) {
        if (error) {
          try {
            std::rethrow_exception(error);
          } catch (const std::exception& failure) {
            spdlog::warn("could not tell the other nodes about the failure: {}", failure.what());
          }
        }
        if (published) published();
      });
}

void Agent::Barrier::Cancel() {
  std::lock_guard lock(mutex);
  cancelled = true;
  if (store) store->Interrupt();
}

bool Agent::Barrier::Cancelled() {
  std::lock_guard lock(mutex);
  return cancelled;
}

bool Agent::Barrier::Attach(std::shared_ptr<store::Store> own) {
  std::lock_guard lock(mutex);
  store = std::move(own);
  return !cancelled;
}

// With the round's own-connection opener, the barrier waits on a connection of its own that
// Cancel() interrupts: a lost node, a remote failure or a signal ends the wait at once.
// barrier_ is the one the state entered (OnAllSucceeded, FinishFailed), so a cancel that came
// before the barrier's job started still counts.
void Agent::RunBarrier(const std::string& name, std::chrono::milliseconds timeout,
                       std::function<void(bool completed)> then) {
  store::Store* shared = info_.store;
  const auto open = info_.open_round_store;
  const int world = info_.group_world_size;
  auto barrier = barrier_;
  auto completed = std::make_shared<bool>(false);
  runner_.Run(
      [shared, open, name, world, timeout, barrier, completed] {
        std::shared_ptr<store::Store> own = open ? open() : nullptr;
        // Cancelled before it started: still count in, and complete if the others already did.
        const auto wait = barrier->Attach(own) ? timeout : std::chrono::milliseconds{1};
        *completed = ExitBarrier(own ? *own : *shared, name, world, wait);
      },
      [then = std::move(then), completed, barrier, timeout](std::exception_ptr error) {
        const bool done = !error && *completed;
        if (!done && !barrier->Cancelled()) {
          spdlog::warn("Error waiting on exit barrier (timeout {}); going on",
                       DurationText(timeout));
        }
        then(done);
      });
}

AgentResult Agent::LostResult() const {
  AgentResult result = Outcome(AgentResult::State::kFailed);
  result.root_cause_node = lost_->first;
  result.root_cause_host = HostOf(lost_->first);
  result.note = "node " + std::to_string(lost_->first) + " (host " + result.root_cause_host +
                ") was lost: " + lost_->second + "; stopped the workers of node " +
                std::to_string(info_.group_rank);
  return result;
}

std::string Agent::HostOf(int node_rank) const {
  for (const auto& peer : peers_) {
    if (peer.group_rank == node_rank && !peer.host.empty()) return peer.host;
  }
  return "<unknown>";
}

}  // namespace ddprun::elastic
