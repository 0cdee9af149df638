// Heartbeat-counter liveness (rendezvous/member_liveness.h) over an in-memory store, on a fake
// clock: a beat moves the member's counter and stamps its wall-clock time; the neighbour counts
// as gone once its counter stood still for the timeout on the watcher's clock.
#include "rendezvous/member_liveness.h"

#include <catch2/catch.hpp>
#include <memory>

#include "store/in_memory_store.h"
#include "tests/unit/common/fake_clock.h"

namespace {

using ddprun::rendezvous::HeartbeatCounterLiveness;
using ddprun::rendezvous::LivenessScope;
using ddprun::rendezvous::RendezvousKeys;
using ddprun::testing::FakeClock;
using namespace std::chrono_literals;

constexpr int kRound = 2;

// Group rank `me` of a round of two, watching the other one, with a timeout of 3 s.
LivenessScope Scope(std::shared_ptr<ddprun::store::InMemoryStore> store, int me, FakeClock& clock) {
  return {std::move(store), RendezvousKeys{"job"}, kRound, me, 1 - me, 3000ms, &clock};
}

}  // namespace

TEST_CASE("a beat moves the member's counter and stamps its wall-clock time", "[liveness]") {
  auto store = std::make_shared<ddprun::store::InMemoryStore>();
  FakeClock clock;
  HeartbeatCounterLiveness member(Scope(store, 1, clock), clock.Now());
  const RendezvousKeys keys{"job"};
  member.Beat();
  CHECK(store->Add(keys.Heartbeat(kRound, 1), 0) == 1);
  CHECK(store->GetString(keys.HeartbeatAt(kRound, 1)) ==
        std::to_string(ddprun::WallClockMs(clock)));
  clock.Advance(1500ms);
  member.Beat();
  CHECK(store->Add(keys.Heartbeat(kRound, 1), 0) == 2);
  CHECK(store->GetString(keys.HeartbeatAt(kRound, 1)) ==
        std::to_string(ddprun::WallClockMs(clock)));
}

TEST_CASE("a beating neighbour is alive and one silent for the timeout is gone", "[liveness]") {
  auto store = std::make_shared<ddprun::store::InMemoryStore>();
  FakeClock clock;
  HeartbeatCounterLiveness watcher(Scope(store, 0, clock), clock.Now());
  HeartbeatCounterLiveness neighbour(Scope(store, 1, clock), clock.Now());
  for (int beat = 0; beat < 5; ++beat) {  // beats every 2 s, timeout 3 s: never gone
    clock.Advance(2000ms);
    neighbour.Beat();
    CHECK_FALSE(watcher.NeighbourGone(clock.Now()));
  }
  clock.Advance(2999ms);  // silent since the last look
  CHECK_FALSE(watcher.NeighbourGone(clock.Now()));
  clock.Advance(1ms);
  CHECK(watcher.NeighbourGone(clock.Now()));
  CHECK(watcher.WhyGone(clock.Now()) ==
        "heartbeats stopped 3.0 s ago (keep_alive_interval x keep_alive_max_attempt)");
  clock.Advance(1500ms);
  CHECK(watcher.WhyGone(clock.Now()) ==
        "heartbeats stopped 4.5 s ago (keep_alive_interval x keep_alive_max_attempt)");
  neighbour.Beat();  // it came back
  CHECK_FALSE(watcher.NeighbourGone(clock.Now()));
}

TEST_CASE("a neighbour that never beats is gone the timeout after the first look", "[liveness]") {
  auto store = std::make_shared<ddprun::store::InMemoryStore>();
  FakeClock clock;
  HeartbeatCounterLiveness watcher(Scope(store, 0, clock), clock.Now());
  clock.Advance(1000ms);
  CHECK_FALSE(watcher.NeighbourGone(clock.Now()));  // the first look starts its silence
  clock.Advance(2999ms);
  CHECK_FALSE(watcher.NeighbourGone(clock.Now()));
  clock.Advance(1ms);
  CHECK(watcher.NeighbourGone(clock.Now()));
}
