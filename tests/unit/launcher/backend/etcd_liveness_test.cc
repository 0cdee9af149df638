// Node liveness on etcd leases (launcher/backend/etcd_liveness.h) against a real etcd started by the
// test: a member that keeps its lease alive is never seen gone, one that stops is seen gone once
// etcd expired its lease, and a neighbour that never showed up counts as gone after the timeout
// on the watcher's (injected) clock.
#include <catch2/catch.hpp>

#include <thread>

#include "tests/unit/store/etcd/etcd_server.h"
#include "launcher/backend/etcd_liveness.h"

namespace ddprun::launcher::backend {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using store::etcd::testing::EtcdServer;

constexpr std::chrono::milliseconds kTimeout = 2s;  // the lease's TTL: 2 s

store::etcd::EtcdStoreOptions Options(const EtcdServer& server) { return {{{server.Endpoint()}, 5s}, "/job/"}; }

// Group rank `me` of a round of two, watching the other one.
rendezvous::LivenessScope Scope(const EtcdServer& server, int me) {
  return {std::make_shared<store::etcd::EtcdStore>(Options(server)), rendezvous::RendezvousKeys{"lease-job"}, 3, me,
          1 - me, kTimeout};
}

}  // namespace

TEST_CASE("etcd lease TTL: the heartbeat timeout in whole seconds, at least 2", "[etcd]") {
  CHECK(LeaseTtl(15'000ms) == 15s);
  CHECK(LeaseTtl(2'500ms) == 3s);
  CHECK(LeaseTtl(500ms) == 2s);
}

TEST_CASE("etcd liveness: a member alive while it keeps its lease, gone once it expires",
          "[etcd]") {
  EtcdServer server;
  const auto start = Clock::now();
  LeaseLiveness watcher(Scope(server, 0), Options(server), start);
  auto watched = std::make_unique<LeaseLiveness>(Scope(server, 1), Options(server), start);
  // Kept alive every 0.5 s for twice the TTL: never gone.
  const auto kept_until = Clock::now() + 2 * kTimeout;
  while (Clock::now() < kept_until) {
    watched->Beat();
    CHECK_FALSE(watcher.NeighbourGone(Clock::now()));
    std::this_thread::sleep_for(500ms);  // the beat's cadence, not a synchronisation
  }
  // It stops (its process died): etcd expires the lease within its TTL plus etcd's check
  // (every 0.5 s), and the key goes with it.
  const auto stopped = Clock::now();
  watched.reset();
  bool gone = false;
  while (!gone && Clock::now() < stopped + kTimeout + 3s) {
    gone = watcher.NeighbourGone(Clock::now());
    if (!gone) std::this_thread::sleep_for(100ms);  // bounded: at most 50 looks
  }
  CHECK(gone);
  CHECK(watcher.WhyGone(Clock::now()) == "its etcd lease (TTL 2 s) expired: it stopped keeping it alive");
}

TEST_CASE("etcd liveness: a neighbour never seen counts as gone after the timeout", "[etcd]") {
  EtcdServer server;
  const auto start = Clock::now();
  LeaseLiveness watcher(Scope(server, 0), Options(server), start);
  CHECK_FALSE(watcher.NeighbourGone(start + kTimeout - 1ms));
  CHECK(watcher.NeighbourGone(start + kTimeout));
  CHECK(watcher.WhyGone(start + kTimeout) == "it did not show itself alive in 2.0 s");
}

TEST_CASE("etcd liveness: a lease that expired cannot be kept alive", "[etcd]") {
  EtcdServer server;
  EtcdLease lease(Options(server).client, 2s);
  store::etcd::ParseLease(store::etcd::EtcdClient(Options(server).client)
                 .Call("/v3/lease/revoke", store::etcd::LeaseRevokeBody(lease.Id())));
  CHECK_THROWS_WITH(lease.KeepAlive(), Catch::Contains("this node's etcd lease expired"));
}

}  // namespace ddprun::launcher::backend
