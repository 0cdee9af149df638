// Hang detection's rule. A local rank is hung when the start-up timeout passes before its first
// sign of progress (output, a pulse, file-timer traffic), or the hang timeout passes between two
// of them. With --hang-timeout=auto the hang timeout is learned from the intervals between signs
// of progress (HangLearning); until it is, the start-up timeout bounds every silence. Pure: the
// caller feeds it events and the time (the launcher's watchdog in launcher/process reads a steady
// clock; tests pass fake time points).
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "elastic/hang_timeouts.h"

namespace ddprun::elastic {

// What a sign of progress was, for the hang's line ("after its last output at 12:03:04").
enum class ProgressKind { kOutput, kPulse, kTimerRequest };

class ProgressWatch {
 public:
  using TimePoint = Clock::TimePoint;
  using Ms = std::chrono::milliseconds;

  // Progress a rank shows within this long of its first sign belongs to that sign (a banner or a
  // warning written in pieces): it is not progress past start-up (ProgressedPastStartup).
  static constexpr Ms kFirstSignWindow{1000};

  struct Silence {
    int local_rank = 0;
    TimePoint since;  // its last progress, or its start
    Ms length{0};
    Ms timeout{0};                     // the timeout that ran out
    bool startup = false;              // no first progress yet: the start-up timeout ran out
    bool learning = false;             // past its first progress, the timeout still being learned
    std::optional<ProgressKind> last;  // the kind of its last progress; none in start-up
  };

  // timeouts.On(). `learned`: a timeout learned earlier (a previous attempt, another node),
  // applied at once and only ever raised.
  explicit ProgressWatch(HangTimeouts timeouts, std::optional<Ms> learned = std::nullopt);

  // A new attempt of `local_world_size` ranks, started at `now`: each in start-up again.
  void Start(int local_world_size, TimePoint now);
  // Progress of one rank (ignored for ranks out of range or not watched).
  void Note(int local_rank, TimePoint now, ProgressKind kind = ProgressKind::kOutput);
  // The rank is no longer watched (it exited).
  void Forget(int local_rank);
  // The watched rank whose timeout ran out first (ties: the lowest rank), if one did at `now`.
  std::optional<Silence> Hung(TimePoint now) const;
  // When Hung() can next turn true; nullopt when no rank is watched.
  std::optional<TimePoint> NextDeadline() const;

  // The timeout between signs of progress: the fixed one, or the learned one (none while it is
  // being learned).
  std::optional<Ms> HangTimeout() const;
  Ms StartupTimeout() const { return timeouts_.startup; }
  const HangTimeouts& Timeouts() const { return timeouts_; }
  // The longest interval between two signs of progress of one rank seen since construction.
  Ms LongestInterval() const { return longest_; }
  // Whether a rank of this attempt showed progress after its first sign (and its window).
  bool ProgressedPastStartup() const;
  // The hang's line for `silence`, its last progress at wall time `last_wall`:
  // "no first progress within the start-up timeout of 600 s (...)" or
  // "no progress for 3.0 s after its last output at 12:03:04 (the hang timeout is 3 s)".
  std::string Cause(const Silence& silence, std::chrono::system_clock::time_point last_wall) const;

 private:
  struct Rank {
    bool watched = false;
    TimePoint start;
    std::optional<TimePoint> first;  // its first sign of progress
    TimePoint last;                  // its last sign (its start before the first)
    ProgressKind last_kind = ProgressKind::kOutput;
    int intervals = 0;
  };
  std::optional<TimePoint> Deadline(const Rank& rank) const;
  void Learn(const Rank& rank, Ms interval);

  HangTimeouts timeouts_;
  std::optional<Ms> learned_;
  Ms longest_{0};
  std::vector<Rank> ranks_;
  bool progressed_ = false;  // a rank this attempt (also one since forgotten) got past start-up
};

}  // namespace ddprun::elastic
