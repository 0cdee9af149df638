// An in-memory store whose waits pass on a fake clock, for tests where one thread alone uses the
// store (nobody else could write a key it waits for): a Wait for missing keys moves the clock
// on by its timeout and times out at once, as the real store would after that long.
// Everything else is the in-memory store's.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "store/in_memory_store.h"
#include "tests/unit/common/fake_clock.h"

namespace ddprun::store::testing {

class ClockedStore : public InMemoryStore {
 public:
  explicit ClockedStore(ddprun::testing::FakeClock& clock) : clock_(clock) {}

  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    if (Check(keys)) return;
    clock_.Advance(timeout);
    throw StoreTimeout("wait timeout after " + std::to_string(timeout.count()) + "ms");
  }
  using Store::Wait;

 private:
  ddprun::testing::FakeClock& clock_;
};

}  // namespace ddprun::store::testing
