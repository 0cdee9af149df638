#include "tests/sim/training.h"

#include <algorithm>
#include <limits>

namespace ddprun::sim {
namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

std::int64_t Ns(std::chrono::milliseconds duration) {
  return std::chrono::nanoseconds(duration).count();
}

}  // namespace

Training::Training(Network& network, TrainingOptions options)
    : network_(network), simulation_(network.simulation()), options_(options) {}

std::int64_t Training::NowNs() { return simulation_.Deadline(std::chrono::milliseconds{0}); }

void Training::SetGone(Member& member, WorkersState state, std::int64_t at) {
  member.state = state;
  member.gone_at = at;
  samples_.push_back({Seconds(at), member.start.node, nlohmann::json::array()});
}

int Training::Start(const WorkersStart& start) {
  int handle = 0;
  {
    std::lock_guard lock(mutex_);
    const std::int64_t now = NowNs();
    AdvanceAll(now);
    auto& slot = groups_[start.master];
    if (!slot) {
      slot = std::make_unique<Group>();
      slot->master = start.master;
      slot->nodes = start.group_world_size;
      slot->members.assign(start.group_world_size, -1);
      slot->init_deadline = now + Ns(options_.init_timeout);
    }
    Group& group = *slot;
    handle = static_cast<int>(members_.size());
    members_.push_back(Member{&group, start, next_pid_++});
    current_[start.node] = handle;
    samples_.push_back({Seconds(now), start.node, {members_[handle].pid}});
    if (group.phase == Group::Phase::kDone || group.members.at(start.group_rank) >= 0) {
      SetGone(members_[handle], WorkersState::kFailed, now);  // its peers are gone already
    } else {
      group.members[start.group_rank] = handle;
      ++group.joined;
      if (group.joined == group.nodes) {
        group.phase = Group::Phase::kRunning;
        group.step = checkpoint_;
        group.next_step_at = now + Ns(options_.startup) + Ns(options_.step_time);
        if (group.step >= options_.target_steps) EndGroup(group, now, WorkersState::kSucceeded);
        if (!Connected(group)) {
          group.phase = Group::Phase::kStalled;
          group.stalled_at = now;
          group.left_for_step = group.next_step_at - now;
        }
      }
    }
    ++version_;
  }
  simulation_.Changed();
  return handle;
}

bool Training::Connected(const Group& group) {
  const int lead = group.members.at(0);
  if (lead < 0) return true;
  const int zero = members_[lead].start.node;
  for (int handle : group.members) {
    if (handle < 0) continue;
    const int node = members_[handle].start.node;
    if (!network_.Delivers(node, zero) || !network_.Delivers(zero, node)) return false;
  }
  return true;
}

void Training::LogSteps(Group& group, std::int64_t until) {
  const Member& lead = members_[group.members.at(0)];
  while (group.phase == Group::Phase::kRunning && group.next_step_at <= until) {
    const int step = group.step;
    steps_.push_back({{"step", step},
                      {"rank", 0},
                      {"world_size", lead.start.world_size},
                      {"restart_count", lead.start.restart_count},
                      {"group", group.master},
                      {"host", lead.start.node},
                      {"nodes", group.nodes},
                      {"pid", lead.pid},
                      {"t", Seconds(group.next_step_at)}});
    if ((step + 1) % options_.ckpt_every == 0) checkpoint_ = step + 1;
    steps_done_ = std::max(steps_done_, step + 1);
    ++group.step;
    if (group.step >= options_.target_steps) {
      EndGroup(group, group.next_step_at, WorkersState::kSucceeded);
      return;
    }
    group.next_step_at += Ns(options_.step_time);
  }
}

void Training::EndGroup(Group& group, std::int64_t at, WorkersState members_state) {
  group.phase = Group::Phase::kDone;
  for (int handle : group.members) {
    if (handle < 0) continue;
    Member& member = members_[handle];
    if (member.state == WorkersState::kRunning) SetGone(member, members_state, at);
  }
  ++version_;
}

void Training::Advance(Group& group, std::int64_t now) {
  const bool broken = group.break_at >= 0 && now >= group.break_at;
  switch (group.phase) {
    case Group::Phase::kDone:
      return;
    case Group::Phase::kInit:
      if (broken) {
        EndGroup(group, group.break_at, WorkersState::kFailed);
      } else if (now >= group.init_deadline) {
        EndGroup(group, group.init_deadline, WorkersState::kFailed);
      }
      return;
    case Group::Phase::kRunning:
      LogSteps(group, broken ? group.break_at : now);
      if (broken && group.phase != Group::Phase::kDone) {
        EndGroup(group, group.break_at, WorkersState::kFailed);
      }
      return;
    case Group::Phase::kStalled: {
      const std::int64_t timeout = group.stalled_at + Ns(options_.init_timeout);
      if (broken && group.break_at <= timeout) {
        EndGroup(group, group.break_at, WorkersState::kFailed);
      } else if (now >= timeout) {
        EndGroup(group, timeout, WorkersState::kFailed);
      }
      return;
    }
  }
}

void Training::AdvanceAll(std::int64_t now) {
  for (auto& [master, group] : groups_) Advance(*group, now);
}

std::int64_t Training::NextEvent(const Group& group) const {
  std::int64_t next = group.break_at >= 0 ? group.break_at : kNever;
  switch (group.phase) {
    case Group::Phase::kDone:
      return 0;
    case Group::Phase::kInit:
      return std::min(next, group.init_deadline);
    case Group::Phase::kRunning:
      return std::min(next, group.next_step_at +
                                Ns(options_.step_time) * (options_.target_steps - group.step - 1));
    case Group::Phase::kStalled:
      return std::min(next, group.stalled_at + Ns(options_.init_timeout));
  }
  return next;
}

WorkersState Training::StateOf(int handle) {
  std::lock_guard lock(mutex_);
  return members_.at(handle).state;
}

int Training::Pid(int handle) {
  std::lock_guard lock(mutex_);
  return members_.at(handle).pid;
}

WorkersState Training::Await(int handle, const std::function<bool()>& interrupt) {
  for (;;) {
    std::int64_t deadline = 0;
    std::int64_t seen = 0;
    {
      std::lock_guard lock(mutex_);
      Member& member = members_.at(handle);
      Advance(*member.group, NowNs());
      if (member.state != WorkersState::kRunning) return member.state;
      deadline = NextEvent(*member.group);
      seen = version_;
    }
    const bool woken = simulation_.Block(
        deadline,
        [&] {
          if (interrupt()) return true;
          std::lock_guard lock(mutex_);
          return version_ != seen;
        },
        nullptr);
    if (woken && interrupt()) return StateOf(handle);
  }
}

void Training::Stop(int handle) {
  int node = 0;
  int incarnation = 0;
  {
    std::lock_guard lock(mutex_);
    Member& member = members_.at(handle);
    const std::int64_t now = NowNs();
    Advance(*member.group, now);
    node = member.start.node;
    incarnation = member.start.incarnation;
    if (member.state == WorkersState::kRunning) {
      const std::int64_t gone = now + Ns(options_.term_time);
      SetGone(member, WorkersState::kStopped, gone);
      Group& group = *member.group;
      if (group.phase != Group::Phase::kDone) {
        group.break_at = group.break_at < 0 ? gone : std::min(group.break_at, gone);
      }
      ++version_;
    }
  }
  simulation_.Changed();
  network_.Sleep(node, incarnation, options_.term_time);
}

Training::Ended Training::EndWorkersLocked(int node, WorkersState state) {
  auto it = current_.find(node);
  if (it == current_.end() || members_[it->second].state != WorkersState::kRunning) {
    return Ended::kNotRunning;
  }
  Member& member = members_[it->second];
  const std::int64_t now = NowNs();
  Advance(*member.group, now);
  if (member.state != WorkersState::kRunning) return Ended::kEndedMeanwhile;
  SetGone(member, state, now);
  Group& group = *member.group;
  if (group.phase != Group::Phase::kDone) group.break_at = now;
  return Ended::kNow;
}

bool Training::FailWorker(int node) {
  bool failed = false;
  {
    std::lock_guard lock(mutex_);
    failed = EndWorkersLocked(node, WorkersState::kFailed) == Ended::kNow;
    if (failed) ++version_;
  }
  simulation_.Changed();
  return failed;
}

void Training::KillNode(int node) {
  {
    std::lock_guard lock(mutex_);
    if (EndWorkersLocked(node, WorkersState::kStopped) != Ended::kNotRunning) ++version_;
  }
  simulation_.Changed();
}

void Training::NetworkChanged() {
  {
    std::lock_guard lock(mutex_);
    const std::int64_t now = NowNs();
    for (auto& [master, slot] : groups_) {
      Group& group = *slot;
      Advance(group, now);
      if (group.phase == Group::Phase::kRunning && !Connected(group)) {
        group.phase = Group::Phase::kStalled;
        group.stalled_at = now;
        group.left_for_step = group.next_step_at - now;
      } else if (group.phase == Group::Phase::kStalled && Connected(group)) {
        group.phase = Group::Phase::kRunning;
        group.next_step_at = now + group.left_for_step;
      }
    }
    ++version_;
  }
  simulation_.Changed();
}

void Training::Finish() {
  std::lock_guard lock(mutex_);
  AdvanceAll(NowNs());
}

nlohmann::json Training::Steps() {
  std::lock_guard lock(mutex_);
  return steps_;
}

nlohmann::json Training::Samples() {
  std::lock_guard lock(mutex_);
  return samples_;
}

int Training::StepsDone() {
  std::lock_guard lock(mutex_);
  return steps_done_;
}

double Training::FirstFullSize(double since_s, int world_size) {
  std::lock_guard lock(mutex_);
  double first = -1;
  for (const auto& line : steps_) {
    const double t = line["t"].get<double>();
    if (t > since_s && line["world_size"].get<int>() >= world_size && (first < 0 || t < first)) {
      first = t;
    }
  }
  return first;
}

}  // namespace ddprun::sim
