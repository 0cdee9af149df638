// A Clock for tests: time moves only when the test (or a pause) moves it. Now() and WallNow()
// read the manual time (the wall clock starts at a fixed epoch time and moves with it).
// Pauses, by mode:
//   kAdvance (default): a pause moves the time on by its duration and returns at once, as if
//     the wait had happened (false when cancelled: at once without moving time, or after it
//     when an action cancelled it meanwhile).
//   kUntilAdvanced: a pause blocks until the test's Advance() reaches its end, or until it is
//     cancelled (or, as a bound, 60 s of real time passed); for threads whose pace the test
//     drives.
// AwaitReads lets a test wait, with a real deadline, until code on another thread has read the
// clock again, i.e. has looked at the time the test set. At() scripts what happens at a time:
// whoever moves the time past it (Advance, a pause) runs the action first, with the time set to
// the action's (a discrete-event script: a store that comes back, a cancellation).
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <utility>

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
      return !cancellation.Cancelled();
    }
    const auto end = elapsed_ns_.load() + std::chrono::nanoseconds(duration).count();
    {
      std::lock_guard lock(mutex_);
      ++paused_;
      waiting_.insert(&cancellation);
    }
    read_.notify_all();
    const bool cancelled =
        cancellation.WaitUntil(kLongestDrivenPause, [&] { return elapsed_ns_.load() >= end; });
    std::lock_guard lock(mutex_);
    waiting_.erase(&cancellation);
    return !cancelled;
  }

  // Moves the time on by `duration`, running the actions due by then (each at its time, on this
  // thread, without the clock's lock) and waking the pauses that end by then.
  void Advance(std::chrono::nanoseconds duration) {
    std::int64_t left = duration.count();
    for (;;) {
      std::function<void()> action;
      {
        std::lock_guard lock(mutex_);
        const std::int64_t now = elapsed_ns_.load();
        if (!actions_.empty() && actions_.begin()->first <= now + left) {
          auto due = actions_.extract(actions_.begin());
          const std::int64_t step = std::max<std::int64_t>(due.key() - now, 0);
          elapsed_ns_ += step;
          left -= step;
          action = std::move(due.mapped());
        } else {
          elapsed_ns_ += left;
        }
        for (Cancellation* waiting : waiting_) waiting->Notify();
      }
      if (!action) return;
      action();
    }
  }

  // Runs `action` once the time reaches `elapsed` after the clock's start (at once, at the next
  // move, if it has already).
  void At(std::chrono::nanoseconds elapsed, std::function<void()> action) {
    std::lock_guard lock(mutex_);
    actions_.emplace(elapsed.count(), std::move(action));
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
  std::multimap<std::int64_t, std::function<void()>> actions_;  // by elapsed ns
};

}  // namespace ddprun::testing
