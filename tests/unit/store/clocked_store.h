// An in-memory store whose waits pass on a fake clock instead of in real time. Two modes:
//   kAlone (a store one thread alone uses: nobody else could write a key it waits for): a Wait
//     for missing keys moves the clock on by its timeout and times out at once, as the real
//     store would after that long.
//   kDriven (threads share it): a Wait ends when its keys come, or times out once the test's
//     Advance() moved the clock past its end (looked at every millisecond of real time); the
//     test moves time on only where the waits it ends are the ones it means to end
//     (AdvanceUntil).
// Everything else is the in-memory store's.
#pragma once
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "store/in_memory_store.h"
#include "tests/unit/common/fake_clock.h"

namespace ddprun::store::testing {

class ClockedStore : public InMemoryStore {
 public:
  enum class Mode { kAlone, kDriven };

  explicit ClockedStore(ddprun::testing::FakeClock& clock, Mode mode = Mode::kAlone)
      : clock_(clock), mode_(mode) {}

  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    if (mode_ == Mode::kAlone) {
      if (Check(keys)) return;
      clock_.Advance(timeout);
      throw TimedOut(timeout);
    }
    const auto end = clock_.Elapsed() + timeout;
    for (;;) {
      try {
        InMemoryStore::Wait(keys, std::chrono::milliseconds{1});
        return;
      } catch (const StoreTimeout&) {
        if (clock_.Elapsed() >= end) throw TimedOut(timeout);
      }
    }
  }
  using Store::Wait;

 private:
  static StoreTimeout TimedOut(std::chrono::milliseconds timeout) {
    return StoreTimeout("wait timeout after " + std::to_string(timeout.count()) + "ms");
  }

  ddprun::testing::FakeClock& clock_;
  const Mode mode_;
};

// Moves `clock` on by `step` at a time until `done` is ready, at most `limit` of fake time (and
// of real time, a minute); true when it became ready.
template <typename T>
bool AdvanceUntil(ddprun::testing::FakeClock& clock, std::future<T>& done,
                  std::chrono::milliseconds step, std::chrono::milliseconds limit) {
  const auto real_deadline = std::chrono::steady_clock::now() + std::chrono::minutes{1};
  for (auto moved = std::chrono::milliseconds{0};
       moved <= limit && std::chrono::steady_clock::now() < real_deadline; moved += step) {
    if (done.wait_for(std::chrono::milliseconds{1}) == std::future_status::ready) return true;
    clock.Advance(step);
  }
  return done.wait_for(std::chrono::milliseconds{0}) == std::future_status::ready;
}

}  // namespace ddprun::store::testing
