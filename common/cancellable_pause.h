// A pause that another thread can cut short for good: Pause(d) waits d on `clock`, or returns
// false at once after Cancel() (and every later Pause too). The StoreSites' Pause and Cancel,
// the monitors' pauses, and the store clients' retry pauses.
#pragma once
#include <chrono>

#include "common/clock.h"

namespace ddprun {

class CancellablePause {
 public:
  explicit CancellablePause(Clock& clock = RealClock()) : clock_(clock) {}

  bool Pause(std::chrono::milliseconds duration) { return clock_.Pause(duration, cancellation_); }
  void Cancel() { cancellation_.Cancel(); }
  bool Cancelled() const { return cancellation_.Cancelled(); }
  Clock& clock() const { return clock_; }

 private:
  Clock& clock_;
  Cancellation cancellation_;
};

}  // namespace ddprun
