// The clock seam of policy code: what time it is (steady, for timeouts; wall, for timestamps
// other nodes read) and a pause that another thread can cut short. Code that decides by time
// takes a Clock (an option defaulting to RealClock()), so that its tests run on a fake clock
// (tests/unit/common/fake_clock.h) instead of waiting out real timeouts.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace ddprun {

// Set once from any thread; every pause waiting on it returns at once, and so does every later
// one. The waits of a pause go through it, so that a clock can wake them (Notify).
class Cancellation {
 public:
  void Cancel();
  bool Cancelled() const;
  // Waits until cancelled, `done()` holds, or `real_timeout` of real time passed; true when
  // cancelled. `done` is evaluated under this object's lock, again after every Notify().
  template <typename Done>
  bool WaitUntil(std::chrono::milliseconds real_timeout, Done done) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, real_timeout, [&] { return cancelled_ || done(); });
    return cancelled_;
  }
  // Wakes the waits to evaluate `done` again.
  void Notify();

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool cancelled_ = false;
};

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using WallTime = std::chrono::system_clock::time_point;

  virtual ~Clock() = default;
  // Monotonic time, for deadlines and silences.
  virtual TimePoint Now() = 0;
  // Wall-clock time, for timestamps written where other nodes (on their own clocks) read them.
  virtual WallTime WallNow() = 0;
  // Waits `duration`; false, at once, when `cancellation` is (or gets) cancelled.
  virtual bool Pause(std::chrono::milliseconds duration, Cancellation& cancellation) = 0;
};

// The process's steady and system clocks; pauses wait in real time.
Clock& RealClock();

// Epoch milliseconds of `clock`'s wall time, as beats and node records carry it.
std::int64_t WallClockMs(Clock& clock);

}  // namespace ddprun
