// The clock seam: the real clock's cancellable pause, and the fake clock the policy tests use.
#include "common/clock.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "common/cancellable_pause.h"
#include "tests/unit/common/fake_clock.h"

using namespace std::chrono_literals;
using ddprun::CancellablePause;
using ddprun::Cancellation;
using ddprun::RealClock;
using ddprun::testing::FakeClock;

TEST_CASE("the real clock's pause waits its duration unless cancelled", "[clock]") {
  CancellablePause pause;
  const auto start = RealClock().Now();
  CHECK(pause.Pause(20ms));
  CHECK(RealClock().Now() - start >= 20ms);
  auto blocked = std::async(std::launch::async, [&] { return pause.Pause(60s); });
  pause.Cancel();
  REQUIRE(blocked.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(blocked.get());
  CHECK_FALSE(pause.Pause(60s));  // for good: every later pause returns at once
}

TEST_CASE("a fake clock moves only when advanced and its pauses advance it", "[clock]") {
  FakeClock clock;
  const auto start = clock.Now();
  const auto wall = clock.WallNow();
  CHECK(clock.Now() == start);
  clock.Advance(1500ms);
  CHECK(clock.Now() - start == 1500ms);
  CHECK(clock.WallNow() - wall == 1500ms);
  CancellablePause pause(clock);
  CHECK(pause.Pause(10min));
  CHECK(clock.Now() - start == 1500ms + 10min);
  pause.Cancel();
  CHECK_FALSE(pause.Pause(1s));
  CHECK(clock.Now() - start == 1500ms + 10min);  // a cancelled pause takes no time
  CHECK(ddprun::WallClockMs(clock) == 1'700'000'000'000 + 1500 + 600'000);
}

TEST_CASE("a driven fake clock's pause ends when the test advances past it", "[clock]") {
  FakeClock clock(FakeClock::PauseMode::kUntilAdvanced);
  CancellablePause pause(clock);
  auto paused = std::async(std::launch::async, [&] { return pause.Pause(100ms); });
  REQUIRE(clock.AwaitPauses(1));
  clock.Advance(99ms);
  CHECK(paused.wait_for(100ms) == std::future_status::timeout);  // a bound for a negative
  clock.Advance(1ms);
  REQUIRE(paused.wait_for(10s) == std::future_status::ready);
  CHECK(paused.get());

  auto cancelled = std::async(std::launch::async, [&] { return pause.Pause(100ms); });
  REQUIRE(clock.AwaitPauses(2));
  pause.Cancel();
  REQUIRE(cancelled.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(cancelled.get());
}

TEST_CASE("a fake clock tells a test when another thread has read it", "[clock]") {
  FakeClock clock;
  CHECK_FALSE(clock.AwaitReads(1, 1ms));  // nobody reads
  std::atomic<bool> stop{false};
  auto reader = std::async(std::launch::async, [&] {
    while (!stop) clock.Now();
  });
  CHECK(clock.AwaitReads(3, 10s));
  stop = true;
  reader.get();
}
