// The store-host failover policy (rendezvous/store_failover.*, docs/elastic.md "Surviving the
// loss of the store host") over a fake StoreSite (fake_store_site.h): stores are in-memory
// stores keyed by "host:port", each address answers, refuses or stays silent as scripted over a
// fake clock, and nothing sleeps: a silent probe and a pause only move the fake clock on, so
// every test runs in milliseconds while spending (fake) heartbeat timeouts.
#include "rendezvous/store_failover.h"

#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "store/in_memory_store.h"
#include "tests/unit/rendezvous/fake_store_site.h"

namespace {

using ddprun::HostPort;
using ddprun::rendezvous::FailoverBasis;
using ddprun::rendezvous::FailoverOptions;
using ddprun::rendezvous::FormedRound;
using ddprun::rendezvous::MovedStoreMarker;
using ddprun::rendezvous::Reach;
using ddprun::rendezvous::ReadMovedStoreMarker;
using ddprun::rendezvous::RendezvousClosedError;
using ddprun::rendezvous::RendezvousConnectionError;
using ddprun::rendezvous::RendezvousKeys;
using ddprun::rendezvous::RoundMember;
using ddprun::rendezvous::StoreAt;
using ddprun::rendezvous::StoreFailover;
using ddprun::rendezvous::StoreSite;
using ddprun::rendezvous::SuccessorOrder;
using ddprun::rendezvous::testing::FakeSite;
using ddprun::store::InMemoryStore;
using ddprun::store::Store;
using ddprun::store::StoreAuthError;
using ddprun::store::StoreConnectionError;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kRunId[] = "job7";
constexpr int kPort = 29400;
constexpr milliseconds kWindow{15'000};
constexpr milliseconds kRetry{100};
constexpr milliseconds kProbeTimeout{1'000};
// The most one wait for one address may overshoot its window: the probe and the pause that
// straddle the deadline.
constexpr milliseconds kSlack = kProbeTimeout + kRetry;

FailoverOptions Options() {
  FailoverOptions options;
  options.run_id = kRunId;
  options.port = kPort;
  options.window = kWindow;
  options.retry = kRetry;
  options.probe_timeout = kProbeTimeout;
  return options;
}

RendezvousKeys Keys(const std::string& run_id = kRunId) { return RendezvousKeys{run_id}; }

std::string MarkerJson(const MovedStoreMarker& marker) {
  return "{\"epoch\":" + std::to_string(marker.epoch) + ",\"addr\":\"" + marker.addr +
         "\",\"basis\":" + std::to_string(marker.basis) + "}";
}

// A store with this job's state: the round hint, and the takeover marker when `marker` is set.
std::shared_ptr<InMemoryStore> JobStore(std::optional<MovedStoreMarker> marker = std::nullopt,
                                        const std::string& run_id = kRunId) {
  auto store = std::make_shared<InMemoryStore>(seconds(5));
  store->SetString(Keys(run_id).Hint(), "5");
  if (marker) store->SetString(Keys(run_id).MovedStore(), MarkerJson(*marker));
  return store;
}

std::shared_ptr<InMemoryStore> BareStore() { return std::make_shared<InMemoryStore>(seconds(5)); }

std::string At(const std::string& host, int port = kPort) {
  return host + ":" + std::to_string(port);
}

HostPort Hp(const std::string& host, int port = kPort) { return HostPort{host, port}; }

RoundMember Member(int group_rank, const std::string& addr, bool serves_store = false) {
  RoundMember member;
  member.group_rank = group_rank;
  member.node.host = "host" + std::to_string(group_rank);
  member.node.addr = addr;
  member.node.pid = 1000 + group_rank;
  member.node.local_world_size = 2;
  member.node.serves_store = serves_store;
  return member;
}

// Round 4 of 4 nodes, epoch `epoch`: group rank 0 (10.0.0.0) served the lost store; the
// successor candidates are ranks 1, 2, 3 at 10.0.0.1..3.
FailoverBasis Basis(int epoch = 0) {
  FailoverBasis basis;
  basis.round.round = 4;
  basis.round.group_rank = 0;
  basis.round.group_world_size = 4;
  basis.round.global_world_size = 8;
  basis.round.restart_count = 1;
  basis.epoch = epoch;
  for (int rank = 0; rank < 4; ++rank) {
    basis.candidates.push_back(Member(rank, "10.0.0." + std::to_string(rank), rank == 0));
  }
  return basis;
}

// A seed callback that records what it got and writes what SeedMovedStore writes first and
// last (the hint, the marker).
struct SeedRecorder {
  int calls = 0;
  MovedStoreMarker marker;
  StoreFailover::Seed Callback() {
    return [this](Store& store, const MovedStoreMarker& given) {
      ++calls;
      marker = given;
      store.SetString(Keys().Hint(), std::to_string(given.basis + 1));
      store.SetString(Keys().MovedStore(), MarkerJson(given));
    };
  }
};

std::vector<int> Ranks(const std::vector<RoundMember>& members) {
  std::vector<int> ranks;
  for (const RoundMember& member : members) ranks.push_back(member.group_rank);
  return ranks;
}

// ---------------------------------------------------------------------------------------------
// SuccessorOrder

TEST_CASE("SuccessorOrder: group-rank order, the store host left out", "[failover]") {
  FailoverBasis basis = Basis();
  CHECK(Ranks(SuccessorOrder(basis)) == std::vector<int>{1, 2, 3});

  SECTION("the store host need not be rank 0, and the input order does not matter") {
    basis.candidates = {Member(3, "10.0.0.3"), Member(0, "10.0.0.0"), Member(2, "10.0.0.2", true),
                        Member(1, "10.0.0.1")};
    const auto order = SuccessorOrder(basis);
    CHECK(Ranks(order) == std::vector<int>{0, 1, 3});
    CHECK(order[0].node.addr == "10.0.0.0");
    CHECK(order[2].node.addr == "10.0.0.3");
  }
  SECTION("no member served the store (it ran apart): all of them") {
    basis.candidates = {Member(1, "a"), Member(0, "b")};
    CHECK(Ranks(SuccessorOrder(basis)) == std::vector<int>{0, 1});
  }
  SECTION("only the store host: no candidate") {
    basis.candidates = {Member(0, "a", true)};
    CHECK(SuccessorOrder(basis).empty());
  }
}

// ---------------------------------------------------------------------------------------------
// Reconnect

TEST_CASE("Reconnect: refused means gone at once", "[failover]") {
  FakeSite site;
  site.SetReach(At("10.0.0.0"), Reach::kRefused);
  StoreFailover failover(Options(), site);
  CHECK_FALSE(failover.Reconnect(Hp("10.0.0.0"), 0).has_value());
  CHECK(site.Probes(At("10.0.0.0")) == 1);
  CHECK(site.Elapsed() <= kProbeTimeout);
  CHECK(site.Elapsed() == milliseconds(0));
}

TEST_CASE("Reconnect: silent is gone only after the window", "[failover]") {
  FakeSite site;
  site.SetReach(At("10.0.0.0"), Reach::kSilent);
  StoreFailover failover(Options(), site);
  CHECK_FALSE(failover.Reconnect(Hp("10.0.0.0"), 0).has_value());
  CHECK(site.Elapsed() >= kWindow);
  CHECK(site.Elapsed() <= kWindow + kSlack);
  CHECK(site.Probes(At("10.0.0.0")) >= 2);  // retried, not given up after one probe
}

TEST_CASE("Reconnect: silent, then answering with the job's store within the window",
          "[failover]") {
  FakeSite site;
  auto store = JobStore();
  site.AnswersFrom(At("10.0.0.0"), milliseconds(4'000), store, Reach::kSilent);
  StoreFailover failover(Options(), site);
  auto found = failover.Reconnect(Hp("10.0.0.0"), 0);
  REQUIRE(found.has_value());
  CHECK(found->epoch == 0);
  CHECK(site.Elapsed() >= milliseconds(4'000));
  CHECK(site.Elapsed() <= milliseconds(4'000) + kSlack);
}

TEST_CASE("Reconnect: the job's store answering is given back, same epoch", "[failover]") {
  FakeSite site;
  StoreFailover failover(Options(), site);

  SECTION("the original store (epoch 0, no marker)") {
    auto store = JobStore();
    site.Put(At("10.0.0.0"), store);
    auto found = failover.Reconnect(Hp("10.0.0.0"), 0);
    REQUIRE(found.has_value());
    CHECK(found->address.ToString() == At("10.0.0.0"));
    CHECK(found->epoch == 0);
    CHECK_FALSE(found->serving);
    REQUIRE(found->store != nullptr);
    found->store->SetString("probe/key", "v");  // the same key space
    CHECK(store->GetString("probe/key") == "v");
  }
  SECTION("a moved store of epoch 2") {
    site.Put(At("10.0.0.1"), JobStore(MovedStoreMarker{2, At("10.0.0.1"), 4}));
    auto found = failover.Reconnect(Hp("10.0.0.1"), 2);
    REQUIRE(found.has_value());
    CHECK(found->epoch == 2);
    CHECK(found->address.ToString() == At("10.0.0.1"));
    CHECK_FALSE(found->serving);
  }
  CHECK(site.Elapsed() == milliseconds(0));
  CHECK(site.TotalProbes() == 1);
  CHECK(site.ServeCalls().empty());
}

TEST_CASE("Reconnect: a store without the job's state is gone", "[failover]") {
  FakeSite site;
  StoreFailover failover(Options(), site);

  SECTION("a fresh store at the same address") { site.Put(At("10.0.0.0"), BareStore()); }
  SECTION("another job's store at the same address") {
    site.Put(At("10.0.0.0"), JobStore(std::nullopt, "other-job"));
  }
  CHECK_FALSE(failover.Reconnect(Hp("10.0.0.0"), 0).has_value());
  CHECK(site.Probes(At("10.0.0.0")) == 1);  // at once, not after the window
  CHECK(site.Elapsed() == milliseconds(0));
}

TEST_CASE("Reconnect: a store that lacks this node's round is gone (a restarted store host's)",
          "[failover][relocate]") {
  FakeSite site;
  StoreFailover failover(Options(), site);
  auto store = JobStore();  // the hint: the restarted host arrived at round 0 of its fresh store
  site.Put(At("10.0.0.0"), store);
  CHECK_FALSE(failover.Reconnect(Hp("10.0.0.0"), 0, 5).has_value());
  CHECK(site.Elapsed() == milliseconds(0));
  store->SetString(Keys().Round(5, "sealed"), "{}");  // the store round 5 formed in
  CHECK(failover.Reconnect(Hp("10.0.0.0"), 0, 5).has_value());
}

TEST_CASE("Reconnect: a newer-epoch store at the same address is returned with its epoch",
          "[failover]") {
  FakeSite site;
  site.Put(At("10.0.0.1"), JobStore(MovedStoreMarker{3, At("10.0.0.1"), 6}));
  StoreFailover failover(Options(), site);
  auto found = failover.Reconnect(Hp("10.0.0.1"), 1);
  REQUIRE(found.has_value());
  CHECK(found->epoch == 3);
  CHECK(found->address.ToString() == At("10.0.0.1"));
  CHECK_FALSE(found->serving);
}

TEST_CASE("Reconnect: an older-epoch store at the address is not this round's store",
          "[failover]") {
  FakeSite site;
  site.Put(At("10.0.0.1"), JobStore(MovedStoreMarker{1, At("10.0.0.1"), 2}));
  StoreFailover failover(Options(), site);
  CHECK_FALSE(failover.Reconnect(Hp("10.0.0.1"), 2).has_value());
  CHECK(site.Elapsed() == milliseconds(0));
}

TEST_CASE("Reconnect: cancelled throws RendezvousClosedError", "[failover]") {
  FakeSite site;
  site.SetReach(At("10.0.0.0"), Reach::kSilent);
  StoreFailover failover(Options(), site);

  SECTION("before the call") {
    site.Cancel();
    CHECK_THROWS_AS(failover.Reconnect(Hp("10.0.0.0"), 0), RendezvousClosedError);
    CHECK(site.Elapsed() == milliseconds(0));
  }
  SECTION("while it waits: promptly") {
    site.At(milliseconds(3'000), [&site] { site.Cancel(); });
    CHECK_THROWS_WITH(failover.Reconnect(Hp("10.0.0.0"), 0),
                      Catch::Contains(kRunId) && Catch::Contains("shut down"));
    CHECK(site.Elapsed() >= milliseconds(3'000));
    CHECK(site.Elapsed() <= milliseconds(3'000) + kSlack);
  }
}

// ---------------------------------------------------------------------------------------------
// Succeed

TEST_CASE("Succeed: the first candidate serves and seeds the next epoch", "[failover]") {
  FakeSite site;
  SeedRecorder seed;
  StoreFailover failover(Options(), site);
  const StoreAt at = failover.Succeed(Basis(2), /*my_group_rank=*/1, seed.Callback());

  CHECK(at.serving);
  CHECK(at.epoch == 3);
  CHECK(at.address.ToString() == At("127.0.0.1"));
  CHECK(site.ServeCalls() == std::vector<int>{kPort});
  REQUIRE(seed.calls == 1);
  CHECK(seed.marker.epoch == 3);
  CHECK(seed.marker.addr == "10.0.0.1:29400");
  CHECK(seed.marker.basis == 4);
  // Nobody before it to wait for: one look at the two others (none serves) before it serves.
  CHECK(site.TotalProbes() == 2);
  CHECK(site.Elapsed() == milliseconds(0));
  // The seed wrote into the served store, and the returned store is a connection to it.
  auto served = site.StoreOf(At("127.0.0.1"));
  REQUIRE(served != nullptr);
  CHECK(ReadMovedStoreMarker(*served, Keys()).epoch == 3);
  REQUIRE(at.store != nullptr);
  CHECK(ReadMovedStoreMarker(*at.store, Keys()).addr == "10.0.0.1:29400");
}

TEST_CASE("Succeed: an earlier candidate serving a newer epoch is joined", "[failover]") {
  FakeSite site;
  auto moved = JobStore(MovedStoreMarker{1, At("10.0.0.1"), 4});
  site.Put(At("10.0.0.1"), moved);
  SeedRecorder seed;
  StoreFailover failover(Options(), site);
  const StoreAt at = failover.Succeed(Basis(0), /*my_group_rank=*/3, seed.Callback());

  CHECK_FALSE(at.serving);
  CHECK(at.epoch == 1);
  CHECK(at.address.ToString() == At("10.0.0.1"));
  CHECK(site.ServeCalls().empty());
  CHECK(seed.calls == 0);
  CHECK(site.Elapsed() == milliseconds(0));
  CHECK(site.Probes(At("10.0.0.2")) == 0);  // the first live one ends the walk
  REQUIRE(at.store != nullptr);
  at.store->SetString("x", "1");
  CHECK(moved->GetString("x") == "1");
}

TEST_CASE("Succeed: an earlier candidate silent for the window is skipped, then this node serves",
          "[failover]") {
  FakeSite site;
  site.SetReach(At("10.0.0.1"), Reach::kSilent);
  SeedRecorder seed;
  StoreFailover failover(Options(), site);
  const StoreAt at = failover.Succeed(Basis(0), /*my_group_rank=*/2, seed.Callback());

  CHECK(at.serving);
  CHECK(at.epoch == 1);
  CHECK(site.ServeCalls() == std::vector<int>{kPort});
  REQUIRE(seed.calls == 1);
  CHECK(seed.marker.epoch == 1);
  CHECK(seed.marker.addr == "10.0.0.2:29400");
  CHECK(seed.marker.basis == 4);
  CHECK(site.Elapsed() >= kWindow);
  // The look at the others before serving waits out a silent one's probe.
  CHECK(site.Elapsed() <= kWindow + kSlack + kProbeTimeout);
  CHECK(site.Probes(At("10.0.0.2")) == 0);  // its own address is not probed
}

TEST_CASE("Succeed: two earlier candidates gone cost a window each", "[failover]") {
  FakeSite site;
  site.SetReach(At("10.0.0.1"), Reach::kSilent);
  site.SetReach(At("10.0.0.2"), Reach::kRefused);
  SeedRecorder seed;
  StoreFailover failover(Options(), site);
  const StoreAt at = failover.Succeed(Basis(0), /*my_group_rank=*/3, seed.Callback());
  CHECK(at.serving);
  CHECK(seed.marker.addr == "10.0.0.3:29400");
  CHECK(site.Elapsed() >= 2 * kWindow);
  // A glance (kRetry) after each window, and the look before serving (kProbeTimeout).
  CHECK(site.Elapsed() <= 2 * (kWindow + kSlack) + kRetry + kProbeTimeout);
}

TEST_CASE("Succeed: an earlier candidate with a stale marker is not joined", "[failover]") {
  FakeSite site;
  SeedRecorder seed;
  StoreFailover failover(Options(), site);
  int basis_epoch = 0;

  SECTION("a marker of the basis epoch") {
    basis_epoch = 2;
    site.Put(At("10.0.0.1"), JobStore(MovedStoreMarker{2, At("10.0.0.1"), 3}));
  }
  SECTION("a marker older than the basis epoch") {
    basis_epoch = 2;
    site.Put(At("10.0.0.1"), JobStore(MovedStoreMarker{1, At("10.0.0.1"), 1}));
  }
  SECTION("the job's state but no marker (epoch 0)") {
    basis_epoch = 0;
    site.Put(At("10.0.0.1"), JobStore());
  }
  SECTION("another job's newer marker") {
    basis_epoch = 0;
    site.Put(At("10.0.0.1"), JobStore(MovedStoreMarker{5, At("10.0.0.1"), 4}, "other-job"));
  }
  const StoreAt at = failover.Succeed(Basis(basis_epoch), /*my_group_rank=*/2, seed.Callback());
  CHECK(at.serving);
  CHECK(at.epoch == basis_epoch + 1);
  CHECK(seed.marker.epoch == basis_epoch + 1);
  CHECK(seed.marker.addr == "10.0.0.2:29400");
  CHECK(site.ServeCalls() == std::vector<int>{kPort});
  // It waited the window for the marker, not less.
  CHECK(site.Elapsed() >= kWindow);
  CHECK(site.Elapsed() <= kWindow + kSlack);
  CHECK(site.Probes(At("10.0.0.1")) >= 2);
}

TEST_CASE("Succeed: an earlier candidate that starts serving within the window is joined",
          "[failover]") {
  FakeSite site;
  SeedRecorder seed;
  StoreFailover failover(Options(), site);
  milliseconds ready{0};

  SECTION("refused, then serving from +2 s") {
    ready = milliseconds(2'000);
    site.AnswersFrom(At("10.0.0.1"), ready, JobStore(MovedStoreMarker{1, At("10.0.0.1"), 4}));
  }
  SECTION("silent, then serving from +9 s") {
    ready = milliseconds(9'000);
    site.AnswersFrom(At("10.0.0.1"), ready, JobStore(MovedStoreMarker{1, At("10.0.0.1"), 4}),
                     Reach::kSilent);
  }
  SECTION("answering while it seeds, the marker written at +14 s") {
    ready = milliseconds(14'000);
    auto store = JobStore();
    site.Put(At("10.0.0.1"), store);
    site.At(ready, [store] {
      store->SetString(Keys().MovedStore(), MarkerJson(MovedStoreMarker{1, At("10.0.0.1"), 4}));
    });
  }
  const StoreAt at = failover.Succeed(Basis(0), /*my_group_rank=*/2, seed.Callback());
  CHECK_FALSE(at.serving);
  CHECK(at.epoch == 1);
  CHECK(at.address.ToString() == At("10.0.0.1"));
  CHECK(site.ServeCalls().empty());
  CHECK(seed.calls == 0);
  CHECK(site.Elapsed() >= ready);
  CHECK(site.Elapsed() <= ready + kSlack);
}

TEST_CASE(
    "Succeed: a candidate over a slow link (a connection longer than the probe timeout) "
    "is joined within the window",
    "[failover]") {
  FakeSite site;
  site.AnswersFrom(At("10.0.0.1"), milliseconds(2'000),
                   JobStore(MovedStoreMarker{1, At("10.0.0.1"), 4}));
  site.SetConnectLatency(At("10.0.0.1"), kProbeTimeout * 3 / 2);
  SeedRecorder seed;
  StoreFailover failover(Options(), site);
  const StoreAt at = failover.Succeed(Basis(0), /*my_group_rank=*/2, seed.Callback());
  CHECK_FALSE(at.serving);  // not a second successor beside it (no quorum for either)
  CHECK(at.address.ToString() == At("10.0.0.1"));
  CHECK(site.ServeCalls().empty());
  CHECK(site.Elapsed() <= milliseconds(2'000) + kProbeTimeout * 3 / 2 + kSlack);
}

TEST_CASE("Reconnect: the store over a slow link is kept", "[failover]") {
  FakeSite site;
  site.Put(At("10.0.0.0"), JobStore());
  site.SetConnectLatency(At("10.0.0.0"), kProbeTimeout * 2);
  StoreFailover failover(Options(), site);
  const auto found = failover.Reconnect(Hp("10.0.0.0"), 0);
  REQUIRE(found.has_value());
  CHECK(found->address.ToString() == At("10.0.0.0"));
  CHECK(site.Elapsed() == kProbeTimeout * 2);
}

TEST_CASE("Succeed: a candidate that starts serving after the window is passed over",
          "[failover]") {
  FakeSite site;
  site.AnswersFrom(At("10.0.0.1"), kWindow + milliseconds(5'000),
                   JobStore(MovedStoreMarker{1, At("10.0.0.1"), 4}));
  SeedRecorder seed;
  StoreFailover failover(Options(), site);
  const StoreAt at = failover.Succeed(Basis(0), /*my_group_rank=*/2, seed.Callback());
  CHECK(at.serving);
  CHECK(seed.marker.addr == "10.0.0.2:29400");
}

TEST_CASE("Succeed: no live candidate and this node not among them fails the job", "[failover]") {
  FakeSite site;
  site.SetReach(At("10.0.0.1"), Reach::kRefused);
  site.SetReach(At("10.0.0.2"), Reach::kSilent);
  site.Put(At("10.0.0.3"), BareStore());  // answers, but never with this job's store
  SeedRecorder seed;
  StoreFailover failover(Options(), site);
  try {
    failover.Succeed(Basis(0), /*my_group_rank=*/9, seed.Callback());
    FAIL("Succeed returned");
  } catch (const RendezvousConnectionError& error) {
    const std::string message = error.what();
    CHECK_THAT(message, Catch::Contains("round 4"));
    CHECK_THAT(message, Catch::Contains("the job cannot go on"));
    CHECK_THAT(message, Catch::Contains("3 successor candidates"));
    CHECK_THAT(message, Catch::Contains("15.0 s"));
    CHECK(message.find('\n') == std::string::npos);  // one line
  }
  CHECK(site.ServeCalls().empty());
  CHECK(seed.calls == 0);
  CHECK(site.Elapsed() >= 3 * kWindow);
  CHECK(site.Elapsed() <= 3 * (kWindow + kSlack));
}

TEST_CASE("Succeed: this node's port taken, it probes its own address like any candidate",
          "[failover]") {
  FakeSite site;
  site.TakePort(kPort);
  SeedRecorder seed;
  StoreFailover failover(Options(), site);

  SECTION("another agent of this machine serves the moved store: joined") {
    site.Put(At("10.0.0.1"), JobStore(MovedStoreMarker{1, At("10.0.0.1"), 4}));
    const StoreAt at = failover.Succeed(Basis(0), /*my_group_rank=*/1, seed.Callback());
    CHECK_FALSE(at.serving);
    CHECK(at.epoch == 1);
    CHECK(at.address.ToString() == At("10.0.0.1"));
    CHECK(site.Probes(At("10.0.0.1")) == 1);
    CHECK(site.Elapsed() == milliseconds(0));
  }
  SECTION("nothing of this job there: after the window, the next candidate") {
    site.Put(At("10.0.0.1"), BareStore());
    site.AnswersFrom(At("10.0.0.2"), milliseconds(5'000),
                     JobStore(MovedStoreMarker{1, At("10.0.0.2"), 4}));
    const StoreAt at = failover.Succeed(Basis(0), /*my_group_rank=*/1, seed.Callback());
    CHECK_FALSE(at.serving);
    CHECK(at.address.ToString() == At("10.0.0.2"));
    CHECK(site.Elapsed() >= kWindow);
    CHECK(site.Elapsed() <= kWindow + kSlack);
  }
  CHECK(site.ServeCalls() == std::vector<int>{kPort});
  CHECK(seed.calls == 0);
}

// Found by ddprun-sim (seed 13 schedule 2 and seed 15 schedule 19, 64 nodes): the survivors that
// noticed the loss first passed over a candidate that was away (its own request waited out
// read_timeout) and moved the store to a later one; the candidate came back and served a second
// successor beside it, so that neither had a quorum.
TEST_CASE("Succeed: a candidate that a later one passed over joins it instead of serving",
          "[failover]") {
  FakeSite site;
  site.Put(At("10.0.0.2"), JobStore(MovedStoreMarker{1, At("10.0.0.2"), 4}));
  SeedRecorder seed;
  StoreFailover failover(Options(), site);
  const StoreAt at = failover.Succeed(Basis(0), /*my_group_rank=*/1, seed.Callback());
  CHECK_FALSE(at.serving);
  CHECK(at.address.ToString() == At("10.0.0.2"));
  CHECK(site.ServeCalls().empty());
  CHECK(seed.calls == 0);
  CHECK(site.Elapsed() == milliseconds(0));
}

// Found by ddprun-sim (seed 5 schedule 17, 64 nodes): a candidate began to serve after the
// walkers had passed it; they waited a window on each later candidate, reached the moved store
// after its first round had sealed without them, and that round had no quorum.
TEST_CASE("Succeed: a candidate that begins to serve after it was passed is joined a window later",
          "[failover]") {
  FakeSite site;
  site.AnswersFrom(At("10.0.0.1"), kWindow + milliseconds(2'000),
                   JobStore(MovedStoreMarker{1, At("10.0.0.1"), 4}), Reach::kSilent);
  site.SetReach(At("10.0.0.2"), Reach::kSilent);
  site.SetReach(At("10.0.0.3"), Reach::kSilent);
  SeedRecorder seed;
  StoreFailover failover(Options(), site);
  const StoreAt at = failover.Succeed(Basis(0), /*my_group_rank=*/9, seed.Callback());
  CHECK_FALSE(at.serving);
  CHECK(at.address.ToString() == At("10.0.0.1"));
  // 10.0.0.1's window, then 10.0.0.2's, then the glance: not 10.0.0.3's window too.
  CHECK(site.Elapsed() >= 2 * kWindow);
  CHECK(site.Elapsed() <= 2 * (kWindow + kSlack) + 2 * kRetry);
}

TEST_CASE("Succeed: cancelled while waiting for a candidate throws RendezvousClosedError",
          "[failover]") {
  FakeSite site;
  site.SetReach(At("10.0.0.1"), Reach::kSilent);
  site.At(milliseconds(5'000), [&site] { site.Cancel(); });
  SeedRecorder seed;
  StoreFailover failover(Options(), site);
  CHECK_THROWS_AS(failover.Succeed(Basis(0), 2, seed.Callback()), RendezvousClosedError);
  CHECK(site.Elapsed() <= milliseconds(5'000) + kSlack);
  CHECK(site.ServeCalls().empty());
}

// ---------------------------------------------------------------------------------------------
// Locate

const std::vector<HostPort> kEndpoints = {Hp("10.0.0.10"), Hp("10.0.0.11"), Hp("10.0.0.12")};

TEST_CASE("Locate: the first endpoint is taken as is", "[failover]") {
  FakeSite site;
  auto store = BareStore();  // no hint, no marker: a store just started by the first node
  site.Put(At("10.0.0.10"), store);
  site.Put(At("10.0.0.11"), JobStore(MovedStoreMarker{1, At("10.0.0.11"), 4}));
  StoreFailover failover(Options(), site);
  const StoreAt at = failover.Locate(kEndpoints, false, site.clock().Now() + seconds(60));
  CHECK(at.address.ToString() == At("10.0.0.10"));
  CHECK(at.epoch == 0);
  CHECK_FALSE(at.serving);
  CHECK(site.ServeCalls().empty());
  CHECK(site.Elapsed() == milliseconds(0));
  REQUIRE(at.store != nullptr);
  at.store->SetString("k", "v");
  CHECK(store->GetString("k") == "v");
}

TEST_CASE("Locate: a later endpoint only with a moved store of this job", "[failover]") {
  FakeSite site;
  site.SetReach(At("10.0.0.10"), Reach::kRefused);
  site.Put(At("10.0.0.11"), BareStore());             // a bare store: skipped
  site.Put(At("10.0.0.12"), JobStore(std::nullopt));  // this job's, epoch 0: skipped too
  StoreFailover failover(Options(), site);

  SECTION("the moved store at endpoint 3") {
    site.Put(At("10.0.0.12"), JobStore(MovedStoreMarker{2, At("10.0.0.12"), 4}));
    const StoreAt at = failover.Locate(kEndpoints, false, site.clock().Now() + seconds(60));
    CHECK(at.address.ToString() == At("10.0.0.12"));
    CHECK(at.epoch == 2);
    CHECK_FALSE(at.serving);
    CHECK(site.Elapsed() == milliseconds(0));
  }
  SECTION("the moved store appears at endpoint 2 at +7 s") {
    site.At(milliseconds(7'000), [&site] {
      site.Put(At("10.0.0.11"), JobStore(MovedStoreMarker{1, At("10.0.0.11"), 4}));
    });
    const StoreAt at = failover.Locate(kEndpoints, false, site.clock().Now() + seconds(60));
    CHECK(at.address.ToString() == At("10.0.0.11"));
    CHECK(at.epoch == 1);
    CHECK(site.Elapsed() >= milliseconds(7'000));
    CHECK(site.Elapsed() <= milliseconds(7'000) + kRetry);
  }
  SECTION("none: only bare or unmarked stores until the deadline") {
    CHECK_THROWS_AS(failover.Locate(kEndpoints, false, site.clock().Now() + seconds(20)),
                    RendezvousConnectionError);
    CHECK(site.Elapsed() >= seconds(20));
    CHECK(site.Elapsed() <= seconds(20) + kRetry);
  }
  CHECK(site.ServeCalls().empty());
}

TEST_CASE("Locate: the first endpoint refusing the token is final, another one's is skipped",
          "[failover][auth]") {
  FakeSite site;
  StoreFailover failover(Options(), site);
  SECTION("the job's own endpoint") {
    site.RefuseToken(At("10.0.0.10"));
    site.Put(At("10.0.0.12"), JobStore(MovedStoreMarker{2, At("10.0.0.12"), 4}));
    CHECK_THROWS_WITH(failover.Locate(kEndpoints, false, site.clock().Now() + seconds(60)),
                      Catch::Contains("refused this node's token"));
    CHECK(site.Elapsed() == milliseconds(0));  // at once, not at join_timeout
  }
  SECTION("a later endpoint: another job's store") {
    site.SetReach(At("10.0.0.10"), Reach::kRefused);
    site.RefuseToken(At("10.0.0.11"));
    site.Put(At("10.0.0.12"), JobStore(MovedStoreMarker{2, At("10.0.0.12"), 4}));
    const StoreAt at = failover.Locate(kEndpoints, false, site.clock().Now() + seconds(60));
    CHECK(at.address.ToString() == At("10.0.0.12"));
  }
}

TEST_CASE("Locate: serve_first joins a moved store at another endpoint", "[failover]") {
  FakeSite site;
  site.SetReach(At("10.0.0.11"), Reach::kSilent);
  site.Put(At("10.0.0.12"), JobStore(MovedStoreMarker{3, At("10.0.0.12"), 8}));
  StoreFailover failover(Options(), site);
  const StoreAt at = failover.Locate(kEndpoints, true, site.clock().Now() + seconds(60));
  CHECK_FALSE(at.serving);
  CHECK(at.epoch == 3);
  CHECK(at.address.ToString() == At("10.0.0.12"));
  CHECK(site.ServeCalls().empty());
  CHECK(site.Probes(At("10.0.0.10")) == 0);  // its own endpoint is not probed first
}

TEST_CASE("Locate: serve_first with no moved store serves the first endpoint's port",
          "[failover]") {
  FakeSite site;
  site.Put(At("10.0.0.11"), BareStore());  // a bare store is no moved store
  StoreFailover failover(Options(), site);

  SECTION("the endpoint's own port") {
    const std::vector<HostPort> endpoints = {Hp("10.0.0.10", 29555), Hp("10.0.0.11")};
    const StoreAt at = failover.Locate(endpoints, true, site.clock().Now() + seconds(60));
    CHECK(at.serving);
    CHECK(at.epoch == 0);
    CHECK(at.address.ToString() == At("127.0.0.1", 29555));
    CHECK(site.ServeCalls() == std::vector<int>{29555});
    REQUIRE(at.store != nullptr);
    at.store->SetString("k", "v");
    CHECK(site.StoreOf(At("127.0.0.1", 29555))->GetString("k") == "v");
  }
  SECTION("an endpoint without a port: the default port") {
    const std::vector<HostPort> endpoints = {HostPort{"10.0.0.10", std::nullopt}, Hp("10.0.0.11")};
    const StoreAt at = failover.Locate(endpoints, true, site.clock().Now() + seconds(60));
    CHECK(at.serving);
    CHECK(site.ServeCalls() == std::vector<int>{kPort});
  }
  SECTION("a single endpoint") {
    const StoreAt at = failover.Locate({Hp("10.0.0.10")}, true, site.clock().Now() + seconds(60));
    CHECK(at.serving);
    CHECK(site.TotalProbes() == 0);
  }
  CHECK(site.Elapsed() == milliseconds(0));
}

TEST_CASE("FindMoved: one look at the endpoints after the first for a moved store of this job",
          "[failover][relocate]") {
  FakeSite site;
  site.Put(At("10.0.0.10"), JobStore(MovedStoreMarker{5, At("10.0.0.10"), 4}));  // never looked at
  StoreFailover failover(Options(), site);

  SECTION("none yet: bare, unmarked and still-seeding stores are no moved store") {
    site.Put(At("10.0.0.11"), BareStore());
    auto seeding = JobStore(std::nullopt);
    seeding->SetString(Keys().MovedStore(), "{\"epoch\":1,\"addr\":\"" + At("10.0.0.12") +
                                                "\",\"basis\":4,\"ready\":false}");
    site.Put(At("10.0.0.12"), seeding);
    CHECK_FALSE(failover.FindMoved(kEndpoints, 0, milliseconds(500)));
  }
  SECTION("the survivors' moved store, any epoch") {
    site.SetReach(At("10.0.0.11"), Reach::kRefused);
    site.Put(At("10.0.0.12"), JobStore(MovedStoreMarker{1, At("10.0.0.12"), 4}));
    const auto found = failover.FindMoved(kEndpoints, 0, milliseconds(500));
    REQUIRE(found);
    CHECK(found->address.ToString() == At("10.0.0.12"));
    CHECK(found->epoch == 1);
    CHECK_FALSE(found->serving);
  }
  SECTION("a silent endpoint costs the given probe timeout, not the options' one") {
    site.SetReach(At("10.0.0.11"), Reach::kSilent);
    site.SetReach(At("10.0.0.12"), Reach::kRefused);
    CHECK_FALSE(failover.FindMoved(kEndpoints, 0, milliseconds(500)));
    CHECK(site.Elapsed() == milliseconds(500));
  }
  CHECK(site.Probes(At("10.0.0.10")) == 0);
  CHECK(site.ServeCalls().empty());
}

TEST_CASE("Locate: serve_first with the port taken looks for the store like any node",
          "[failover]") {
  FakeSite site;
  site.TakePort(kPort);
  site.Put(At("10.0.0.10"), BareStore());  // another agent of this machine serves it
  StoreFailover failover(Options(), site);
  const StoreAt at = failover.Locate(kEndpoints, true, site.clock().Now() + seconds(60));
  CHECK_FALSE(at.serving);
  CHECK(at.address.ToString() == At("10.0.0.10"));
  CHECK(site.ServeCalls() == std::vector<int>{kPort});
}

TEST_CASE("Locate: nothing answers until the deadline", "[failover]") {
  FakeSite site;
  site.SetReach(At("10.0.0.10"), Reach::kRefused);
  site.SetReach(At("10.0.0.11"), Reach::kSilent);
  site.SetReach(At("10.0.0.12"), Reach::kRefused);
  StoreFailover failover(Options(), site);
  const auto deadline = site.clock().Now() + seconds(30);
  try {
    failover.Locate(kEndpoints, false, deadline);
    FAIL("Locate returned");
  } catch (const RendezvousConnectionError& error) {
    CHECK_THAT(std::string(error.what()),
               Catch::Contains("10.0.0.10:29400,10.0.0.11:29400,10.0.0.12:29400"));
    CHECK_THAT(std::string(error.what()), Catch::Contains("join_timeout"));
  }
  CHECK(site.clock().Now() >= deadline);
  CHECK(site.clock().Now() <= deadline + kSlack);
  CHECK(site.Probes(At("10.0.0.12")) >= 2);  // every endpoint, in every pass
  CHECK(site.ServeCalls().empty());
}

TEST_CASE("Locate: a store answering at the first endpoint later is taken", "[failover]") {
  FakeSite site;
  site.AnswersFrom(At("10.0.0.10"), milliseconds(12'000), BareStore(), Reach::kSilent);
  StoreFailover failover(Options(), site);
  const StoreAt at = failover.Locate({Hp("10.0.0.10")}, false, site.clock().Now() + seconds(60));
  CHECK(at.address.ToString() == At("10.0.0.10"));
  CHECK(site.Elapsed() >= milliseconds(12'000));
  CHECK(site.Elapsed() <= milliseconds(12'000) + kSlack);
}

TEST_CASE("Locate: cancelled throws RendezvousClosedError", "[failover]") {
  FakeSite site;
  site.At(milliseconds(2'000), [&site] { site.Cancel(); });
  StoreFailover failover(Options(), site);
  CHECK_THROWS_AS(failover.Locate(kEndpoints, false, site.clock().Now() + seconds(60)),
                  RendezvousClosedError);
  CHECK(site.Elapsed() <= milliseconds(2'000) + kSlack);
}

}  // namespace
