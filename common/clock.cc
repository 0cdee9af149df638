#include "common/clock.h"

#include <cstdint>

namespace ddprun {

void Cancellation::Cancel() {
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
  }
  changed_.notify_all();
}

bool Cancellation::Cancelled() const {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

void Cancellation::Notify() {
  { std::lock_guard lock(mutex_); }  // a waiter between its check and its wait sees the change
  changed_.notify_all();
}

namespace {

class SystemClock : public Clock {
 public:
  TimePoint Now() override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() override { return std::chrono::system_clock::now(); }
  bool Pause(std::chrono::milliseconds duration, Cancellation& cancellation) override {
    return !cancellation.WaitUntil(duration, [] { return false; });
  }
};

}  // namespace

Clock& RealClock() {
  static SystemClock clock;
  return clock;
}

std::int64_t WallClockMs(Clock& clock) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock.WallNow().time_since_epoch())
      .count();
}

}  // namespace ddprun
