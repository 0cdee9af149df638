#include "elastic/session_sweep.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "common/integer.h"

namespace ddprun::elastic {
namespace {

// Longer than any line: what exceeds it is garbage, skipped up to the next newline.
constexpr std::size_t kMaxLine = 32;

// `line` without `suffix`, when it ends with it.
std::optional<std::string_view> WithoutSuffix(std::string_view line, std::string_view suffix) {
  if (line.size() < suffix.size() || line.substr(line.size() - suffix.size()) != suffix) {
    return std::nullopt;
  }
  return line.substr(0, line.size() - suffix.size());
}

}  // namespace

void SessionSweep::Feed(std::string_view bytes) {
  for (const char c : bytes) {
    if (c != '\n') {
      partial_.push_back(c);
      continue;
    }
    if (partial_.size() <= kMaxLine) FeedLine(partial_);
    partial_.clear();
  }
  // Bounded memory whatever arrives: an over-long line can never parse, so keep only enough of
  // it to stay over the limit.
  if (partial_.size() > kMaxLine) partial_.resize(kMaxLine + 1);
}

void SessionSweep::FeedLine(std::string_view line) {
  const auto joined = WithoutSuffix(line, kInCgroupFlag);
  const auto session = ParseInt(joined.value_or(line));
  if (session && std::in_range<int>(*session))
    Guard(static_cast<int>(*session), joined.has_value());
}

void SessionSweep::Guard(int session, bool in_cgroup) {
  if (session <= 1) return;
  sessions_.insert(session);
  // A session id seen again is a new worker's (the old session was forgotten): its word counts.
  if (in_cgroup) {
    outside_cgroup_.erase(session);
  } else {
    outside_cgroup_.insert(session);
  }
}

namespace {

// The sessions of `processes`.
std::set<int> SessionsOf(const std::vector<ProcessInfo>& processes) {
  std::set<int> sessions;
  for (const auto& process : processes) sessions.insert(process.session);
  return sessions;
}

}  // namespace

void SessionSweep::Prune(ProcessTable& table) {
  std::set<int> live = SessionsOf(Targets(table.Snapshot(sessions_)));
  if (live.size() == sessions_.size()) return;
  live.merge(SessionsOf(Targets(table.Snapshot(sessions_))));
  sessions_ = std::move(live);
  std::erase_if(outside_cgroup_, [this](int session) { return !sessions_.count(session); });
}

std::vector<ProcessInfo> SessionSweep::Targets(const std::vector<ProcessInfo>& table) const {
  std::vector<ProcessInfo> targets;
  for (const auto& process : table) {
    if (!process.dead && sessions_.count(process.session)) targets.push_back(process);
  }
  return targets;
}

// A killed process may still show as alive for a moment, and one that forked between the
// snapshot and its kill leaves a child the snapshot did not have: hence the passes; and a
// snapshot can miss a child forked while it was taken (Prune): hence two empty ones to end.
SweepReport SessionSweep::Sweep(ProcessTable& table, const SweepLimits& limits) const {
  SweepReport report;
  std::set<int> signalled;
  const auto start = table.Now();
  std::chrono::milliseconds pause{1};
  int empty_in_a_row = 0;
  for (;;) {
    const std::vector<ProcessInfo> targets = Targets(table.Snapshot(sessions_));
    ++report.passes;
    if (targets.empty()) {
      if (++empty_in_a_row == 2) break;
      continue;
    }
    empty_in_a_row = 0;
    if (report.passes >= limits.max_passes || table.Now() - start >= limits.max_time) {
      for (const auto& process : targets) report.survivors.push_back(process.pid);
      break;
    }
    for (const auto& process : targets) {
      table.Kill(process);
      signalled.insert(process.pid);
    }
    table.Pause(pause);
    pause = std::min(pause * 2, limits.max_pause);
  }
  report.killed = static_cast<int>(signalled.size());
  return report;
}

}  // namespace ddprun::elastic
