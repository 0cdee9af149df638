// Node liveness on etcd leases (launcher/backend/etcd_liveness.h) against a real etcd started by
// the test: a member that keeps its lease alive is never seen gone, one that stops is seen gone
// once etcd expired its lease, and a neighbour that never showed up counts as gone after the
// timeout on the watcher's (injected) clock. The rules alone:
// tests/unit/rendezvous/lease_liveness_rules_test.cc.
#include "launcher/backend/etcd_liveness.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "tests/unit/common/fake_clock.h"
#include "tests/unit/store/etcd/etcd_server.h"

namespace ddprun::launcher::backend {
namespace {

using namespace std::chrono_literals;
using RealTime = std::chrono::steady_clock;  // etcd expires leases in real time
using store::etcd::testing::EtcdServer;

constexpr std::chrono::milliseconds kTimeout = 2s;  // the lease's TTL: 2 s

store::etcd::EtcdStoreOptions Options(const EtcdServer& server) {
  return {{{server.Endpoint()}, 5s}, "/job/"};
}

// Group rank `me` of a round of two, watching the other one.
rendezvous::LivenessScope Scope(const EtcdServer& server, int me) {
  return {std::make_shared<store::etcd::EtcdStore>(Options(server)),
          rendezvous::RendezvousKeys{"lease-job"},
          3,
          me,
          1 - me,
          kTimeout};
}

}  // namespace

TEST_CASE("etcd liveness: a member alive while it keeps its lease, gone once it expires",
          "[etcd]") {
  EtcdServer server;
  const auto start = RealTime::now();
  LeaseLiveness watcher(Scope(server, 0), Options(server), start);
  auto watched = std::make_unique<LeaseLiveness>(Scope(server, 1), Options(server), start);
  // Kept alive every 0.5 s for twice the TTL: never gone.
  const auto kept_until = RealTime::now() + 2 * kTimeout;
  while (RealTime::now() < kept_until) {
    watched->Beat();
    CHECK_FALSE(watcher.NeighbourGone(RealTime::now()));
    std::this_thread::sleep_for(500ms);  // the beat's cadence, not a synchronisation
  }
  // It stops (its process died): etcd expires the lease within its TTL plus etcd's check
  // (every 0.5 s), and the key goes with it.
  const auto stopped = RealTime::now();
  watched.reset();
  bool gone = false;
  while (!gone && RealTime::now() < stopped + kTimeout + 3s) {
    gone = watcher.NeighbourGone(RealTime::now());
    if (!gone) std::this_thread::sleep_for(100ms);  // bounded: at most 50 looks
  }
  CHECK(gone);
  CHECK(watcher.WhyGone(RealTime::now()) ==
        "its etcd lease (TTL 2 s) expired: it stopped keeping it alive");
}

TEST_CASE("etcd liveness: the lease stays alive while the watch is stuck in a slow read",
          "[etcd]") {
  EtcdServer server;
  const auto start = RealTime::now();
  LeaseLiveness watcher(Scope(server, 0), Options(server), start);
  LeaseLiveness watched(Scope(server, 1), Options(server), start);
  watched.Beat();
  // Its watch loop does not come back to Beat() for twice the TTL (reads over a slow link).
  std::this_thread::sleep_for(2 * kTimeout);  // the stuck read's length, not a synchronisation
  CHECK_FALSE(watcher.NeighbourGone(RealTime::now()));
  CHECK_NOTHROW(watched.Beat());
}

TEST_CASE("etcd liveness: a lease revoked under the keeper is reported by the next beat",
          "[etcd]") {
  EtcdServer server;
  LeaseLiveness watched(Scope(server, 1), Options(server), RealTime::now());
  store::etcd::EtcdClient other(Options(server).client);
  const auto id = other.Call("/v3/lease/leases", nlohmann::json::object())["leases"][0]["ID"];
  other.Call("/v3/lease/revoke", {{"ID", id}});
  // The keeper renews every TTL/3 (0.67 s): within a few of them it finds the lease gone.
  bool reported = false;
  const auto deadline = RealTime::now() + 3 * kTimeout;
  while (!reported && RealTime::now() < deadline) {
    try {
      watched.Beat();
      std::this_thread::sleep_for(100ms);  // the watch's cadence: bounded, at most 60 looks
    } catch (const store::StoreConnectionError& error) {
      CHECK_THAT(error.what(), Catch::Contains("this node's etcd lease expired"));
      reported = true;
    }
  }
  CHECK(reported);
}

TEST_CASE("etcd liveness: a member cut off from etcd is told by its keeper, with no beat",
          "[etcd]") {
  EtcdServer server;
  // The keeper's time is the test's: its renewals wait until the clock reaches them.
  ddprun::testing::FakeClock clock(ddprun::testing::FakeClock::PauseMode::kUntilAdvanced);
  std::promise<std::string> told;
  auto lost = told.get_future();
  std::atomic<int> calls{0};
  rendezvous::LivenessScope scope = Scope(server, 1);
  scope.clock = &clock;
  scope.on_lost = [&](const std::string& why) {
    if (calls++ == 0) told.set_value(why);
  };
  store::etcd::EtcdStoreOptions options = Options(server);
  options.client.timeout = 300ms;  // a renewal that hangs ends soon (in real time)
  LeaseLiveness watched(scope, options, clock.Now());
  REQUIRE(clock.AwaitPauses(2));  // renewed at once, then waits for the next (TTL/3 later)
  // etcd freezes (to this member, as if its host could not send): every renewal hangs, and its
  // watch, blocked in a read too, would not beat.
  server.Stop(0);
  clock.Advance(kTimeout);  // the renewals due at 0.67 s (hung: the next at once) and 1.33 s
  REQUIRE(clock.AwaitPauses(4));
  CHECK(calls == 0);            // silent for the TTL, not longer: not lost yet
  clock.Advance(kTimeout / 3);  // the next renewal hangs too: silent for longer than the TTL
  REQUIRE(lost.wait_for(10s) == std::future_status::ready);
  CHECK(lost.get() ==
        "this node's etcd lease expired: no etcd member renewed it for 2.7 s, "
        "longer than its TTL (2 s)");
  server.Continue(0);
  CHECK_THROWS_WITH(watched.Beat(), Catch::Contains("this node's etcd lease expired"));
  CHECK(calls == 1);
}

TEST_CASE("etcd liveness: a neighbour never seen counts as gone after the timeout", "[etcd]") {
  EtcdServer server;
  const auto start = RealTime::now();
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

namespace ddprun::launcher::backend {

TEST_CASE("etcd liveness: a frozen etcd leader expires no lease renewed through a follower",
          "[etcd]") {
  store::etcd::testing::EtcdCluster cluster(3);
  int leader = -1;
  for (int member = 0; member < 3 && leader < 0; ++member) {
    store::etcd::EtcdClientOptions one = cluster.Options(2s);
    one.endpoints = {cluster.Endpoint(member)};
    const auto status =
        store::etcd::EtcdClient(one).Call("/v3/maintenance/status", nlohmann::json::object());
    if (status["leader"] == status["header"]["member_id"]) leader = member;
  }
  REQUIRE(leader >= 0);
  store::etcd::EtcdStoreOptions options{cluster.Options(1500ms), "/job/"};  // as the launcher's
  options.client.patience = 5s;
  std::swap(options.client.endpoints[leader], options.client.endpoints[2]);  // a follower first
  const auto scope = [&](int me) {
    return rendezvous::LivenessScope{std::make_shared<store::etcd::EtcdStore>(options),
                                     rendezvous::RendezvousKeys{"lease-job"},
                                     3,
                                     me,
                                     1 - me,
                                     3s};
  };
  LeaseLiveness watcher(scope(0), options, RealTime::now());
  LeaseLiveness watched(scope(1), options, RealTime::now());
  const auto kept = RealTime::now();  // its keeper's renewals start now, one per second (TTL/3)
  // The leader freezes past the TTL (a stopped VM) just before the next renewal, which hangs
  // in the followers until the client's timeout (1.5 s); they elect another within ~2 s.
  // (Renewals paused a second after each one that hung, in step on every member, renewed
  // nothing for 3.5 s: the seed s2 9 run of 2026-11-27.)
  std::this_thread::sleep_until(kept + 950ms);  // the freeze's phase, not a synchronisation
  cluster.Stop(leader);
  std::this_thread::sleep_until(kept + 3300ms);  // past the TTL since the last renewal before it
  CHECK_NOTHROW(watched.Beat());
  std::this_thread::sleep_until(kept + 950ms + 4100ms);  // the freeze's length, nearly
  CHECK_NOTHROW(watched.Beat());
  CHECK_FALSE(watcher.NeighbourGone(RealTime::now()));
  // Checked before the leader resumes: etcd 3.4.23 lets a leader frozen past the TTL revoke, as
  // it resumes, the leases that expired in its stale view (etcd-io/etcd#12528, docs/etcd.md).
  cluster.Continue(leader);
}

}  // namespace ddprun::launcher::backend
