#include "elastic/progress_watch.h"

#include <algorithm>
#include <sstream>

#include "common/duration.h"
#include "common/local_time.h"

namespace ddprun::elastic {
namespace {

const char* KindText(ProgressKind kind) {
  switch (kind) {
    case ProgressKind::kOutput:
      return "output";
    case ProgressKind::kPulse:
      return "pulse";
    case ProgressKind::kTimerRequest:
      return "file timer request";
  }
  return "progress";
}

}  // namespace

ProgressWatch::ProgressWatch(HangTimeouts timeouts, std::optional<Ms> learned)
    : timeouts_(timeouts), learned_(timeouts.learn ? learned : std::nullopt) {}

void ProgressWatch::Start(int local_world_size, TimePoint now) {
  Rank fresh;
  fresh.watched = true;
  fresh.start = now;
  fresh.last = now;
  ranks_.assign(local_world_size > 0 ? static_cast<std::size_t>(local_world_size) : 0, fresh);
  progressed_ = false;
}

void ProgressWatch::Note(int local_rank, TimePoint now, ProgressKind kind) {
  if (local_rank < 0 || static_cast<std::size_t>(local_rank) >= ranks_.size()) return;
  Rank& rank = ranks_[static_cast<std::size_t>(local_rank)];
  if (!rank.watched || now < rank.last) return;
  if (!rank.first) {
    rank.first = now;
  } else {
    ++rank.intervals;
    Learn(rank, std::chrono::duration_cast<Ms>(now - rank.last));
    if (now - *rank.first > kFirstSignWindow) progressed_ = true;
  }
  rank.last = now;
  rank.last_kind = kind;
}

// The longest interval on any rank; the timeout once one rank finished its warm-up (or one was
// learned before), raised and never lowered.
void ProgressWatch::Learn(const Rank& rank, Ms interval) {
  longest_ = std::max(longest_, interval);
  if (!timeouts_.learn) return;
  if (!learned_ && rank.intervals < timeouts_.learning.warmup_intervals) return;
  learned_ = std::max(learned_.value_or(Ms{0}), LearnedTimeout(timeouts_.learning, longest_));
}

void ProgressWatch::Forget(int local_rank) {
  if (local_rank < 0 || static_cast<std::size_t>(local_rank) >= ranks_.size()) return;
  ranks_[static_cast<std::size_t>(local_rank)].watched = false;
}

std::optional<ProgressWatch::Ms> ProgressWatch::HangTimeout() const {
  if (!timeouts_.learn) return timeouts_.hang;
  return learned_;
}

bool ProgressWatch::ProgressedPastStartup() const { return progressed_; }

std::optional<ProgressWatch::TimePoint> ProgressWatch::Deadline(const Rank& rank) const {
  if (!rank.watched) return std::nullopt;
  if (!rank.first) return rank.start + timeouts_.startup;
  return rank.last + HangTimeout().value_or(timeouts_.startup);
}

std::optional<ProgressWatch::Silence> ProgressWatch::Hung(TimePoint now) const {
  std::optional<std::size_t> first;
  std::optional<TimePoint> earliest;
  for (std::size_t index = 0; index < ranks_.size(); ++index) {
    const auto deadline = Deadline(ranks_[index]);
    if (deadline && (!earliest || *deadline < *earliest)) {
      earliest = deadline;
      first = index;
    }
  }
  if (!first || now < *earliest) return std::nullopt;
  const Rank& rank = ranks_[*first];
  Silence silence;
  silence.local_rank = static_cast<int>(*first);
  silence.since = rank.last;
  silence.length = std::chrono::duration_cast<Ms>(now - rank.last);
  silence.startup = !rank.first;
  silence.learning = rank.first && !HangTimeout();
  silence.timeout = silence.startup || silence.learning ? timeouts_.startup : *HangTimeout();
  if (rank.first) silence.last = rank.last_kind;
  return silence;
}

std::optional<ProgressWatch::TimePoint> ProgressWatch::NextDeadline() const {
  std::optional<TimePoint> earliest;
  for (const Rank& rank : ranks_) {
    const auto deadline = Deadline(rank);
    if (deadline && (!earliest || *deadline < *earliest)) earliest = deadline;
  }
  return earliest;
}

std::string ProgressWatch::Cause(const Silence& silence,
                                 std::chrono::system_clock::time_point last_wall) const {
  if (silence.startup) {
    return "no first progress within the start-up timeout of " + DurationText(timeouts_.startup) +
           " (no output, no pulse, no file timer request since it started; "
           "--hang-startup-timeout)";
  }
  std::ostringstream text;
  text << "no progress for " << DurationText(silence.length, 1) << " after its last "
       << KindText(silence.last.value_or(ProgressKind::kOutput)) << " at "
       << LocalTimeText(last_wall, "%H:%M:%S") << " (";
  if (silence.learning) {
    text << "the hang timeout is still being learned; until then the start-up timeout of "
         << DurationText(timeouts_.startup) << " applies)";
  } else if (timeouts_.learn) {
    text << "the hang timeout is " << DurationText(silence.timeout)
         << ", learned: " << timeouts_.learning.factor
         << " x the longest interval between signs of progress, "
         << "at least " << DurationText(timeouts_.learning.floor) << ")";
  } else {
    text << "the hang timeout is " << DurationText(silence.timeout) << ")";
  }
  return text.str();
}

}  // namespace ddprun::elastic
