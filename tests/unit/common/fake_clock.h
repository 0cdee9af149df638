// A Clock for tests: time moves only when the test (or a pause) moves it. Now() and WallNow()
// read the manual time (the wall clock starts at a fixed epoch time and moves with it).
// Pauses, by mode:
//   kAdvance (default): a pause moves the time on by its duration and returns at once, as if
//     the wait had happened (false, without moving time, when cancelled).
//   kUntilAdvanced: a pause blocks until the test's Advance() reaches its end, or until it is
//     cancelled (or, as a bound, 60 s of real time passed); for threads whose pace the test
//     drives.
// AwaitReads lets a test wait, with a real deadline, until code on another thread has read the
// clock again, i.e. has looked at the time the test set.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>

#include "common/clock.h"

namespace ddprun::testing {

class FakeClock : public Clock {
 public:
  enum class PauseMode { kAdvance, kUntilAdvanced };

  explicit FakeClock(PauseMode mode = PauseMode::kAdvance) : mode_(mode) {}

  TimePoint Now() override {
    const TimePoint now = TimePoint{} + kStart + Elapsed();
    {
      std::lock_guard lock(mutex_);
      ++reads_;
    }
    read_.notify_all();
    return now;
  }

  WallTime WallNow() override {
    return WallTime{} + std::chrono::duration_cast<WallTime::duration>(kWallStart + Elapsed());
  }

  bool Pause(std::chrono::milliseconds duration, Cancellation& cancellation) override {
    if (cancellation.Cancelled()) return false;
    if (mode_ == PauseMode::kAdvance) {
      Advance(duration);
      return true;
    }
    const auto end = elapsed_ns_.load() + std::chrono::nanoseconds(duration).count();
    {
      std::lock_guard lock(mutex_);
      ++paused_;
      waiting_.insert(&cancellation);
    }
    read_.notify_all();
    const bool cancelled = cancellation.WaitUntil(
        kLongestDrivenPause, [&] { return elapsed_ns_.load() >= end; });
    std::lock_guard lock(mutex_);
    waiting_.erase(&cancellation);
    return !cancelled;
  }

  // Moves the time on by `duration`, waking the pauses that end by then.
  void Advance(std::chrono::nanoseconds duration) {
    std::lock_guard lock(mutex_);
    elapsed_ns_ += duration.count();
    for (Cancellation* waiting : waiting_) waiting->Notify();
  }

  // Waits (at most `real_timeout`) until Now() was called `count` more times after this call
  // started; false on timeout.
  bool AwaitReads(int count, std::chrono::milliseconds real_timeout = std::chrono::seconds{10}) {
    std::unique_lock lock(mutex_);
    const std::int64_t target = reads_ + count;
    return read_.wait_for(lock, real_timeout, [&] { return reads_ >= target; });
  }

  // Waits (at most `real_timeout`) until `count` pauses in all have started (kUntilAdvanced).
  bool AwaitPauses(std::int64_t count,
                   std::chrono::milliseconds real_timeout = std::chrono::seconds{10}) {
    std::unique_lock lock(mutex_);
    return read_.wait_for(lock, real_timeout, [&] { return paused_ >= count; });
  }

  std::chrono::nanoseconds Elapsed() const { return std::chrono::nanoseconds(elapsed_ns_.load()); }

 private:
  // Far from zero, as a real steady clock is (a deadline minus a timeout stays positive).
  static constexpr std::chrono::hours kStart{1000};
  static constexpr std::chrono::milliseconds kWallStart{1'700'000'000'000};  // Nov 2023
  // A driven pause the test never ends returns after this much real time (a failing test
  // ends instead of hanging).
  static constexpr std::chrono::seconds kLongestDrivenPause{60};

  const PauseMode mode_;
  std::atomic<std::int64_t> elapsed_ns_{0};
  std::mutex mutex_;
  std::condition_variable read_;
  std::int64_t reads_ = 0;
  std::int64_t paused_ = 0;
  std::set<Cancellation*> waiting_;
};

}  // namespace ddprun::testing
