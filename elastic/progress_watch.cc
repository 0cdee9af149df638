#include "elastic/progress_watch.h"

namespace ddprun::elastic {

ProgressWatch::ProgressWatch(std::chrono::milliseconds timeout) : timeout_(timeout) {}

void ProgressWatch::Start(int local_world_size, TimePoint now) {
  last_.assign(local_world_size > 0 ? static_cast<std::size_t>(local_world_size) : 0, now);
}

void ProgressWatch::Note(int local_rank, TimePoint now) {
  if (local_rank < 0 || static_cast<std::size_t>(local_rank) >= last_.size()) return;
  auto& last = last_[static_cast<std::size_t>(local_rank)];
  if (last && now > *last) last = now;
}

void ProgressWatch::Forget(int local_rank) {
  if (local_rank < 0 || static_cast<std::size_t>(local_rank) >= last_.size()) return;
  last_[static_cast<std::size_t>(local_rank)].reset();
}

std::optional<ProgressWatch::Silence> ProgressWatch::Hung(TimePoint now) const {
  std::optional<Silence> oldest;
  for (std::size_t rank = 0; rank < last_.size(); ++rank) {
    if (!last_[rank]) continue;
    if (!oldest || *last_[rank] < oldest->since) {
      oldest = Silence{static_cast<int>(rank), *last_[rank], {}};
    }
  }
  if (!oldest) return std::nullopt;
  oldest->length = std::chrono::duration_cast<std::chrono::milliseconds>(now - oldest->since);
  if (oldest->length < timeout_) return std::nullopt;
  return oldest;
}

std::optional<ProgressWatch::TimePoint> ProgressWatch::NextDeadline() const {
  std::optional<TimePoint> oldest;
  for (const auto& last : last_) {
    if (last && (!oldest || *last < *oldest)) oldest = *last;
  }
  if (!oldest) return std::nullopt;
  return *oldest + timeout_;
}

}  // namespace ddprun::elastic
