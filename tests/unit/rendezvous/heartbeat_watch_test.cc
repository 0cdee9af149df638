// When a silent peer counts as lost, on the watcher's own (injected) clock; who watches whom.
#include "rendezvous/heartbeat_watch.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

using ddprun::rendezvous::HeartbeatWatch;
using ddprun::rendezvous::RingNeighbour;
using std::chrono::milliseconds;

TEST_CASE("a peer is lost once its counter stood still for the timeout", "[heartbeat]") {
  const auto t0 = HeartbeatWatch::TimePoint{} + std::chrono::hours(1);
  HeartbeatWatch watch(milliseconds{3000}, t0);
  CHECK_FALSE(watch.Observe(0, t0 + milliseconds{1000}));  // first reading starts the clock
  CHECK_FALSE(watch.Observe(1, t0 + milliseconds{2000}));  // it moved
  CHECK_FALSE(watch.Observe(1, t0 + milliseconds{4999}));
  CHECK(watch.SilentFor(t0 + milliseconds{4999}) == milliseconds{2999});
  CHECK(watch.Observe(1, t0 + milliseconds{5000}));        // still for 3 s
  CHECK_FALSE(watch.Observe(2, t0 + milliseconds{5100}));  // it came back
}

TEST_CASE("a peer that never beats is lost after the timeout from the first reading",
          "[heartbeat]") {
  const auto t0 = HeartbeatWatch::TimePoint{} + std::chrono::hours(1);
  HeartbeatWatch watch(milliseconds{1000}, t0);
  CHECK_FALSE(watch.Observe(0, t0 + milliseconds{500}));
  CHECK(watch.Observe(0, t0 + milliseconds{1500}));
}

TEST_CASE("each member watches the next one in a ring", "[heartbeat]") {
  CHECK(RingNeighbour(0, 1) == -1);
  CHECK(RingNeighbour(0, 3) == 1);
  CHECK(RingNeighbour(2, 3) == 0);
  // Everyone is watched exactly once.
  for (int world = 2; world < 10; ++world) {
    std::vector<int> watched(world, 0);
    for (int rank = 0; rank < world; ++rank) ++watched[RingNeighbour(rank, world)];
    CHECK(std::count(watched.begin(), watched.end(), 1) == world);
  }
}

TEST_CASE("heartbeat watch: the store may be silent as long as a peer", "[heartbeat]") {
  using namespace std::chrono_literals;
  CHECK(ddprun::rendezvous::StoreSilenceTimeout(1000ms, 3) == 3000ms);
  CHECK(ddprun::rendezvous::StoreSilenceTimeout(5000ms, 3) == 15000ms);
  CHECK(ddprun::rendezvous::StoreSilenceTimeout(1000ms, 0) == 1000ms);  // never under one interval
}
