// Hang detection's rule: a local rank that showed no progress (output, a pulse, file-timer
// traffic) for `timeout` is hung. Pure: the caller feeds it events and the time (the launcher's
// watchdog in launcher/process reads a steady clock; tests pass fake time points).
#pragma once
#include <chrono>
#include <optional>
#include <vector>

#include "common/clock.h"

namespace ddprun::elastic {

class ProgressWatch {
 public:
  using TimePoint = Clock::TimePoint;

  struct Silence {
    int local_rank = 0;
    TimePoint since;  // its last progress (or the start)
    std::chrono::milliseconds length{0};
  };

  // timeout > 0.
  explicit ProgressWatch(std::chrono::milliseconds timeout);

  // A new attempt of `local_world_size` ranks: every rank counts as progressing at `now`.
  void Start(int local_world_size, TimePoint now);
  // Progress of one rank (ignored for ranks out of range or not watched).
  void Note(int local_rank, TimePoint now);
  // The rank is no longer watched (it exited).
  void Forget(int local_rank);
  // The watched rank silent the longest (ties: the lowest rank), if its silence reached the
  // timeout at `now`; nullopt otherwise.
  std::optional<Silence> Hung(TimePoint now) const;
  // When Hung() can next turn true (the oldest watched rank's last progress + timeout);
  // nullopt when no rank is watched.
  std::optional<TimePoint> NextDeadline() const;
  std::chrono::milliseconds Timeout() const { return timeout_; }

 private:
  std::chrono::milliseconds timeout_;
  std::vector<std::optional<TimePoint>> last_;  // per local rank; nullopt: not watched
};

}  // namespace ddprun::elastic
