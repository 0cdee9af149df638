// The rules of liveness on leases (rendezvous/lease_liveness_rules.h) on a fake clock, and the
// alive key read from an in-memory store as launcher/backend/etcd_liveness.cc reads it from
// etcd: the TTL and renewal period, the renewals' schedule, when this member's own lease counts
// as lost, and when its ring neighbour counts as gone. No etcd, no thread, no real time.
#include "rendezvous/lease_liveness_rules.h"

#include <catch2/catch.hpp>

#include "rendezvous/dynamic_rendezvous.h"
#include "store/in_memory_store.h"
#include "tests/unit/common/fake_clock.h"

namespace {

using namespace ddprun::rendezvous;
using ddprun::testing::FakeClock;
using namespace std::chrono_literals;

}  // namespace

TEST_CASE("lease TTL: the heartbeat timeout in whole seconds, at least 2", "[liveness]") {
  CHECK(LeaseTtl(15'000ms) == 15s);
  CHECK(LeaseTtl(2'500ms) == 3s);
  CHECK(LeaseTtl(500ms) == 2s);
}

TEST_CASE("lease renewals: every TTL/3 (at least 100 ms), staggered over the members",
          "[liveness]") {
  CHECK(LeaseRenewalPeriod(15s) == 5'000ms);
  CHECK(LeaseRenewalPeriod(2s) == 666ms);
  FakeClock clock;
  const auto start = clock.Now();
  CHECK(FirstRenewal(start, 900ms, 0, 3) == start);
  CHECK(FirstRenewal(start, 900ms, 1, 3) == start + 300ms);
  CHECK(FirstRenewal(start, 900ms, 2, 3) == start + 600ms);
  // On time: the next one period after the previous one's time, not after when it came back.
  CHECK(NextRenewal(start, 900ms, start + 50ms) == start + 900ms);
  // One that hung past its successor's time: the next at once.
  CHECK(NextRenewal(start, 900ms, start + 1'500ms) == start + 1'500ms);
}

TEST_CASE("own lease: lost once no renewal came back for its TTL", "[liveness]") {
  FakeClock clock;
  LeaseRenewals renewals(2s, clock.Now());
  clock.Advance(2s);
  CHECK(renewals.Lost(clock.Now()).empty());  // silent for the TTL, not longer
  renewals.Renewed(clock.Now());
  clock.Advance(2s);
  CHECK(renewals.Lost(clock.Now()).empty());
  renewals.Renewed(clock.Now() - 3s);  // one older than the last, back late: moves nothing
  clock.Advance(500ms);
  CHECK(renewals.Lost(clock.Now()) ==
        "this node's etcd lease expired: no etcd member renewed it for 2.5 s, longer than its "
        "TTL (2 s)");
}

TEST_CASE("own lease: lost at once when etcd said it expired, for the first reason", "[liveness]") {
  FakeClock clock;
  LeaseRenewals renewals(2s, clock.Now());
  renewals.Expired("this node's etcd lease expired: it was cut off");
  renewals.Expired("a later reason");
  renewals.Renewed(clock.Now());  // another member's renewal in flight changes nothing
  CHECK(renewals.Lost(clock.Now()) == "this node's etcd lease expired: it was cut off");
}

TEST_CASE("neighbour: alive while its key is there, gone once it is deleted", "[liveness]") {
  ddprun::store::InMemoryStore store;
  const RendezvousKeys keys{"job"};
  FakeClock clock;
  AliveKeyWatch watch(3s, clock.Now());
  const auto look = [&] { return watch.Observe(store.Check({keys.Alive(2, 1)}), clock.Now()); };
  CHECK_FALSE(look());                     // not there yet, within the timeout
  store.SetString(keys.Alive(2, 1), "7");  // what its lease carries
  clock.Advance(1s);
  CHECK_FALSE(look());
  store.DeleteKey(keys.Alive(2, 1));  // etcd expired its lease: gone, before any timeout
  CHECK(look());
  CHECK(watch.WhyGone(clock.Now(), 3s) ==
        "its etcd lease (TTL 3 s) expired: it stopped keeping it alive");
}

TEST_CASE("neighbour: alive while its key is there, however long", "[liveness]") {
  FakeClock clock;
  AliveKeyWatch watch(3s, clock.Now());
  clock.Advance(1h);
  CHECK_FALSE(watch.Observe(true, clock.Now()));
}

TEST_CASE("neighbour: gone when its key never appeared within the timeout", "[liveness]") {
  FakeClock clock;
  const auto start = clock.Now();
  AliveKeyWatch watch(2s, start);
  CHECK_FALSE(watch.Observe(false, start + 2s - 1ms));
  CHECK(watch.Observe(false, start + 2s));
  CHECK(watch.WhyGone(start + 2s, 2s) == "it did not show itself alive in 2.0 s");
}

TEST_CASE("the liveness keys: one name each, under the round", "[liveness]") {
  const RendezvousKeys keys{"job"};
  CHECK(keys.Heartbeat(2, 1) == "ddprun/rdzv/job/r2/hb/1");
  CHECK(keys.HeartbeatAt(2, 1) == "ddprun/rdzv/job/r2/hb_at/1");
  CHECK(keys.FormingHeartbeatAt(2, 3) == "ddprun/rdzv/job/r2/fhb_at/3");
  CHECK(keys.Alive(2, 1) == "ddprun/rdzv/job/r2/alive/1");
  CHECK(keys.Gone(2, 1) == "ddprun/rdzv/job/r2/gone/1");
  CHECK(keys.GoneCount(3) == "ddprun/rdzv/job/r3/gone");
}
