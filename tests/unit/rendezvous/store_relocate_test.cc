// A node that serves a fresh store at the first endpoint because it found no moved store of its
// job (StoreFailover::Locate with serve_first) keeps looking for one while it waits alone in its
// first round, and joins it once it appears (docs/elastic.md, "Later arrivals and restarted
// hosts"): the restarted store host whose survivors moved the store only after it started. The
// handler and the other nodes run in a simulation (tests/unit/store/simulated_store.h): the
// stores, the rendezvous clock and the site's clock and pauses are the simulation's, so the
// (simulated) seconds below cost no real time.
#include <catch2/catch.hpp>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "rendezvous/elastic_rendezvous_handler.h"
#include "tests/unit/rendezvous/simulated_site.h"
#include "tests/unit/store/simulated_store.h"

namespace {

using ddprun::HostPort;
using namespace ddprun::rendezvous;
using namespace ddprun::rendezvous::testing;
namespace store = ddprun::store;

constexpr milliseconds kCheck{1'000};  // relocate_check (the chaos harness's keep-alive)

// Host 0's agent: the first endpoint is its machine's; it looks for moved stores every
// `relocate_check` (0: never).
ElasticHandlerOptions HostZero(Simulation& simulation, milliseconds relocate_check) {
  ElasticHandlerOptions options;
  options.rendezvous = NodeOptions(simulation, 0);
  options.advertised_addr = "10.0.0.10";
  options.read_timeout = seconds(10);
  options.endpoints = {{"10.0.0.10", kPort}, {"10.0.0.11", kPort}, {"10.0.0.12", kPort}};
  options.serve_first = true;
  options.failover.run_id = "job";
  options.failover.port = kPort;
  options.failover.window = seconds(3);
  options.failover.relocate_check = relocate_check;
  return options;
}

milliseconds Since(Simulation& simulation, ddprun::Clock::TimePoint start) {
  return std::chrono::duration_cast<milliseconds>(simulation.Now() - start);
}

// A survivor that waits in the moved store for the round it forms with host 0.
std::future<FormedRound> SurvivorIn(Simulation& simulation, std::shared_ptr<SimulatedStore> moved) {
  return simulation.Spawn([&simulation, moved] {
    DynamicRendezvous node(NodeOptions(simulation, 1), moved);
    const FormedRound formed = node.Join(std::nullopt);
    moved->SetString(kKeys.Round(formed.round, "master"), "10.0.0.11:4000");
    return formed;
  });
}

TEST_CASE("a restarted first-endpoint node joins a store moved after it started serving",
          "[rendezvous][relocate]") {
  Simulation simulation;
  SimSite site(simulation);
  FakeWorkerStore workers;
  const auto start = simulation.Now();
  ElasticRendezvousHandler handler(HostZero(simulation, kCheck), site, workers);
  auto joined = simulation.Spawn([&] { return handler.NextRendezvous(); });

  // No moved store yet: it serves a fresh one at its port and waits there alone for MIN.
  ddprun::Cancellation never;
  simulation.Pause(milliseconds(2'500), never);
  REQUIRE(site.StoreOf(At("127.0.0.1")) != nullptr);
  CHECK(SeqValue{site.StoreOf(At("127.0.0.1"))->Add(kKeys.Round(0, "seq"), 0)}.Arrivals() == 1);
  CHECK(site.stops == 0);

  // The survivors' reconnect found that fresh store without the job's state: they moved the
  // store to host 1, and one of them waits there.
  const auto moved_at = simulation.Now();
  auto moved = MovedStore(simulation);
  site.Put(At("10.0.0.11"), moved);
  auto survivor = SurvivorIn(simulation, moved);

  const bool formed = simulation.Finishes(joined, seconds(10));
  CHECK(formed);
  if (!formed) {  // still alone at its own store: end it before the handler goes
    handler.Shutdown();
    simulation.Finishes(joined, seconds(120));
    simulation.Finishes(survivor, seconds(120));
    return;
  }
  const RendezvousInfo info = joined.get();
  REQUIRE(simulation.Ready(survivor, seconds(1)).group_world_size == 2);
  // Within one check interval of the moved store's appearance it left its own and joined it.
  REQUIRE(site.stopped_at);
  CHECK(*site.stopped_at - moved_at <= kCheck);
  CHECK(site.stops == 1);
  CHECK(site.StoreOf(At("127.0.0.1")) == nullptr);  // no longer served
  CHECK(handler.StoreAddress().ToString() == At("10.0.0.11"));
  CHECK(info.round == 0);
  CHECK(info.group_rank == 1);
  CHECK(info.group_world_size == 2);
  CHECK(info.master_addr == "10.0.0.11");
  // The switch, then the round's last call (1 s).
  CHECK(Since(simulation, start) <= milliseconds(2'500) + kCheck + seconds(1));
  bool event = false;
  for (const auto& [name, fields] : info.events) {
    if (name != "store_moved") continue;
    const auto json = nlohmann::json::parse(fields);
    CHECK(json.at("epoch") == 1);
    CHECK(json.at("address") == At("10.0.0.11"));
    CHECK(json.at("serving") == false);
    CHECK(json.at("basis") == 0);
    event = true;
  }
  CHECK(event);
  // This node's record in the moved store does not claim the store (a newcomer there).
  const auto record = NodeRecord::Decode(moved->GetString(kKeys.Node(0, 2)));
  CHECK(record.node.host == "host0");
  CHECK_FALSE(record.node.serves_store);
}

// Found by ddprun-sim (seed 40, schedule 8, 64 nodes: the store host, then a hot spare behind a
// full round at its own store, was cut off for 7 s): the others moved the store and trained;
// nobody came back to tell it, and it waited out its join timeout. A node serving the store it
// waits at as a spare looks for a moved store as it does alone in its first round.
TEST_CASE("the store host waiting as a hot spare at its own store joins the moved store",
          "[rendezvous][relocate]") {
  Simulation simulation;
  SimSite site(simulation);
  FakeWorkerStore workers;
  auto full = [&](int id) {  // MAX 2
    DynamicRendezvousOptions options = NodeOptions(simulation, id);
    options.max_nodes = 2;
    return options;
  };
  ElasticHandlerOptions options = HostZero(simulation, kCheck);
  options.rendezvous.max_nodes = 2;
  ElasticRendezvousHandler handler(options, site, workers);
  auto first = simulation.Spawn([&] { return handler.NextRendezvous(); });
  ddprun::Cancellation never;
  simulation.Pause(milliseconds(500), never);
  auto own = site.StoreOf(At("127.0.0.1"));
  REQUIRE(own != nullptr);
  auto host1 = simulation.Spawn([&] { return DynamicRendezvous(full(1), own).Join(std::nullopt); });
  const RendezvousInfo round0 = simulation.Ready(first, seconds(10));
  const FormedRound one = simulation.Ready(host1, seconds(1));
  REQUIRE(round0.group_world_size == 2);

  // Host 1 leaves; hosts 2 and 3 fill round 1 before host 0 comes back to it: host 0 waits
  // behind round 1 as a spare, at its own store.
  DynamicRendezvous(full(1), own)
      .DeclareGone(0, one.group_rank,
                   {RoundChange::Kind::kNodeLeaving, one.group_rank, "host1", ""});
  std::vector<std::future<FormedRound>> fillers;
  for (int id : {2, 3}) {
    fillers.push_back(simulation.Spawn([&, id] {
      DynamicRendezvous node(full(id), own);
      const FormedRound formed = node.Join(std::nullopt);
      if (formed.group_rank == 0)
        own->SetString(kKeys.Round(formed.round, "master"), "10.0.0.12:1");
      return formed;
    }));
  }
  for (auto& filler : fillers) REQUIRE(simulation.Ready(filler, seconds(10)).round == 1);
  auto again = simulation.Spawn([&] { return handler.NextRendezvous(); });
  simulation.Pause(milliseconds(2'000), never);
  CHECK(SeqValue{own->Add(kKeys.Round(2, "seq"), 0)}.Arrivals() == 1);  // host 0, a spare

  // Hosts 2 and 3 moved the job to host 1's machine (epoch 1) while host 0 was cut off.
  const auto moved_at = simulation.Now();
  auto moved = MovedStore(simulation);
  site.Put(At("10.0.0.11"), moved);
  auto survivor = SurvivorIn(simulation, moved);
  const bool formed = simulation.Finishes(again, seconds(30));
  CHECK(formed);
  if (!formed) {
    handler.Shutdown();
    simulation.Finishes(again, seconds(120));
    moved->Interrupt();
    simulation.Finishes(survivor, seconds(120));
    return;
  }
  const RendezvousInfo info = again.get();
  CHECK(simulation.Ready(survivor, seconds(1)).group_world_size == 2);
  CHECK(handler.StoreAddress().ToString() == At("10.0.0.11"));
  CHECK(info.group_world_size == 2);
  REQUIRE(site.stopped_at);
  CHECK(*site.stopped_at - moved_at <= kCheck);  // within one look-out interval
  CHECK(site.stops == 1);
}

// Found by the chaos harness (seed s2, schedule 17: the store host's agent paused 8 s): the
// other two moved the store and trained; the store host woke, came back to its own store as a
// member, lost its quorum there (1 of 3) and ended, although the job went on without it.
TEST_CASE("a node that lost its quorum joins the majority's moved store as a new member",
          "[rendezvous][relocate]") {
  Simulation simulation;
  SimSite site(simulation);
  FakeWorkerStore workers;
  ElasticRendezvousHandler handler(HostZero(simulation, milliseconds(0)), site, workers);
  auto first = simulation.Spawn([&] { return handler.NextRendezvous(); });
  ddprun::Cancellation never;
  simulation.Pause(milliseconds(500), never);
  auto own = site.StoreOf(At("127.0.0.1"));
  REQUIRE(own != nullptr);
  std::vector<std::future<FormedRound>> members;
  for (int id : {1, 2}) {
    members.push_back(simulation.Spawn([&, id] {
      return DynamicRendezvous(NodeOptions(simulation, id), own).Join(std::nullopt);
    }));
  }
  const RendezvousInfo round0 = simulation.Ready(first, seconds(10));
  REQUIRE(round0.group_world_size == 3);
  for (auto& member : members) simulation.Ready(member, seconds(1));

  // The other two beat last 10 s ago (they went silent), moved the store to host 1 (epoch 1)
  // and wait there; host 0 comes back to its own store as a member of round 0, alone: it sweeps
  // them as lost, and has no quorum there.
  for (int rank : {0, 1, 2}) {
    if (rank == round0.group_rank) continue;
    own->SetString(kKeys.HeartbeatAt(0, rank),
                   std::to_string(ddprun::WallClockMs(simulation) - 10'000));
  }
  auto moved = MovedStore(simulation);
  site.Put(At("10.0.0.11"), moved);
  auto survivor = SurvivorIn(simulation, moved);
  auto again = simulation.Spawn([&] { return handler.NextRendezvous(); });
  const bool formed = simulation.Finishes(again, seconds(120));
  REQUIRE(formed);
  const RendezvousInfo info = again.get();
  CHECK(simulation.Ready(survivor, seconds(1)).group_world_size == 2);
  CHECK(handler.StoreAddress().ToString() == At("10.0.0.11"));
  CHECK(info.group_world_size == 2);
  CHECK(site.stops == 1);  // its own store is no longer served
  bool event = false;
  for (const auto& [name, fields] : info.events) {
    if (name != "store_moved") continue;
    const auto json = nlohmann::json::parse(fields);
    CHECK(json.at("reason") == "lost quorum");
    CHECK(json.at("epoch") == 1);
    event = true;
  }
  CHECK(event);
}

// Found by ddprun-sim (seed 1, schedule 7, 64 nodes: the store host and three members killed
// while four hot spares waited behind the full round): a spare never formed a round, so it knew
// no successor, and with one --rdzv_endpoint (the lost host) it waited out its join timeout while
// the job went on below MAX. Now a spare learns the successor candidates of the round it waits
// behind and follows the store they move.
TEST_CASE("a hot spare follows the store its round's survivors moved (one endpoint)",
          "[rendezvous][relocate]") {
  Simulation simulation;
  SimSite site(simulation);
  FakeWorkerStore workers;
  auto full = [&](int id) {
    DynamicRendezvousOptions options = NodeOptions(simulation, id);
    options.max_nodes = 2;
    return options;
  };
  auto original = std::make_shared<SimulatedStore>(simulation, seconds(30));
  site.Put(At("10.0.0.10"), original);
  std::vector<std::future<FormedRound>> members;
  for (int id : {1, 2}) {
    members.push_back(simulation.Spawn(
        [&, id] { return DynamicRendezvous(full(id), original).Join(std::nullopt); }));
  }
  for (auto& member : members) REQUIRE(simulation.Ready(member, seconds(10)).round == 0);

  ElasticHandlerOptions options;
  options.rendezvous = full(3);
  options.advertised_addr = "10.0.0.13";
  options.read_timeout = seconds(10);
  options.endpoints = {{"10.0.0.10", kPort}};  // torchrun's one endpoint: the original host
  options.failover.run_id = "job";
  options.failover.port = kPort;
  options.failover.window = seconds(3);
  ElasticRendezvousHandler spare(options, site, workers);
  auto joined = simulation.Spawn([&] { return spare.NextRendezvous(); });
  ddprun::Cancellation never;
  simulation.Pause(milliseconds(2'000), never);  // it waits behind round 0 as a spare
  CHECK(SeqValue{original->Add(kKeys.Round(1, "seq"), 0)}.Arrivals() == 1);

  // The store host is lost (its connections break, its port refuses); the survivors moved the
  // store to round 0's first member, host1 (10.0.0.11), where one of them waits.
  site.Remove(At("10.0.0.10"));
  original->Interrupt();
  auto moved = MovedStore(simulation);
  site.Put(At("10.0.0.11"), moved);
  auto survivor = simulation.Spawn([&] {
    const FormedRound formed = DynamicRendezvous(full(1), moved).Join(std::nullopt);
    moved->SetString(kKeys.Round(formed.round, "master"), "10.0.0.11:4000");
    return formed;
  });
  const bool formed = simulation.Finishes(joined, seconds(30));
  CHECK(formed);
  if (!formed) {
    spare.Shutdown();
    simulation.Finishes(joined, seconds(120));
    moved->Interrupt();
    simulation.Finishes(survivor, seconds(120));
    return;
  }
  const RendezvousInfo info = joined.get();
  CHECK(simulation.Ready(survivor, seconds(1)).group_world_size == 2);
  CHECK(spare.StoreAddress().ToString() == At("10.0.0.11"));
  CHECK(info.group_world_size == 2);
  bool event = false;
  for (const auto& [name, fields] : info.events) {
    if (name != "store_moved") continue;
    const auto json = nlohmann::json::parse(fields);
    CHECK(json.at("spare") == true);
    CHECK(json.at("basis") == 0);
    CHECK(json.at("epoch") == 1);
    event = true;
  }
  CHECK(event);
}

// A cold start: nobody moved any store; host 1 joins host 0's store at +2.5 s. Returns when the
// round formed (simulated ms after start) and checks host 0 kept its own store.
milliseconds ColdStart(milliseconds relocate_check, int* probes) {
  Simulation simulation;
  SimSite site(simulation);
  FakeWorkerStore workers;
  const auto start = simulation.Now();
  ElasticRendezvousHandler handler(HostZero(simulation, relocate_check), site, workers);
  auto joined = simulation.Spawn([&] { return handler.NextRendezvous(); });
  ddprun::Cancellation never;
  simulation.Pause(milliseconds(2'500), never);
  auto own = site.StoreOf(At("127.0.0.1"));
  REQUIRE(own != nullptr);
  auto other = simulation.Spawn(
      [&] { return DynamicRendezvous(NodeOptions(simulation, 1), own).Join(std::nullopt); });
  const RendezvousInfo info = simulation.Ready(joined, seconds(10));
  const milliseconds formed = Since(simulation, start);
  CHECK(simulation.Ready(other, seconds(1)).group_world_size == 2);
  CHECK(info.group_rank == 0);
  CHECK(info.group_world_size == 2);
  CHECK(handler.StoreAddress().ToString() == At("127.0.0.1"));
  CHECK(site.stops == 0);
  for (const auto& event : info.events) CHECK(event.first != "store_moved");
  *probes = site.Probes(At("10.0.0.11"));
  return formed;
}

TEST_CASE("a cold start keeps its own store and forms no later than without the look-out",
          "[rendezvous][relocate]") {
  int probes_on = 0;
  int probes_off = 0;
  const milliseconds with_check = ColdStart(kCheck, &probes_on);
  const milliseconds without = ColdStart(milliseconds(0), &probes_off);
  CHECK(with_check == without);
  CHECK(with_check == milliseconds(3'500));  // host 1 at +2.5 s, then the last call (1 s)
  // Locate's one look, then one per check while alone (+1 s, +2 s), none once host 1 came.
  CHECK(probes_off == 1);
  CHECK(probes_on == 3);
}

}  // namespace
