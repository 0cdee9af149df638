// What the handler does when the store's side of a job stops, or a round's rank 0 never tells
// where the workers' store is (docs/elastic.md, "Quorum" and "The agent's transitions"): found by
// ddprun-sim (tests/sim), here on a simulated site and clock (tests/unit/rendezvous/
// simulated_site.h), so that the simulated seconds below cost no real time.
#include <catch2/catch.hpp>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "rendezvous/elastic_rendezvous_handler.h"
#include "tests/unit/rendezvous/simulated_site.h"

namespace {

using namespace ddprun::rendezvous;
using namespace ddprun::rendezvous::testing;

constexpr milliseconds kReadTimeout{10'000};
constexpr milliseconds kWindow{3'000};  // the heartbeat timeout

const std::string kOriginal = At("10.0.0.10");  // host 0's store
const std::string kServedHere = "127.0.0.1:" + std::to_string(kPort);

// Host `id`'s agent; the endpoints name every host (docs/elastic.md's advice).
ElasticHandlerOptions AgentOf(Simulation& simulation, int id) {
  ElasticHandlerOptions options;
  options.rendezvous = NodeOptions(simulation, id);
  options.advertised_addr = "10.0.0.1" + std::to_string(id);
  options.read_timeout = kReadTimeout;
  options.endpoints = {{"10.0.0.10", kPort}, {"10.0.0.11", kPort}, {"10.0.0.12", kPort}};
  options.failover.run_id = "job";
  options.failover.port = kPort;
  options.failover.window = kWindow;
  return options;
}

// A node driven by its DynamicRendezvous alone; as rank 0 it publishes the workers' store
// unless `silent_rank0` (it died right after the seal).
FormedRound JoinAs(DynamicRendezvous& node, SimulatedStore& store,
                   const std::optional<FormedRound>& previous, bool silent_rank0 = false) {
  const FormedRound formed = node.Join(previous);
  if (formed.group_rank == 0 && !silent_rank0) {
    store.SetString(kKeys.Round(formed.round, "master"), "10.0.0.1:4000");
  }
  return formed;
}

void Wait(Simulation& simulation, milliseconds duration) {
  ddprun::Cancellation never;
  simulation.Pause(duration, never);
}

// Round 0 of hosts 0 (it serves the store), 1 (the handler) and 2, in that order of arrival.
struct ThreeHosts {
  explicit ThreeHosts(Simulation& simulation, bool silent_rank0 = false)
      : original(std::make_shared<SimulatedStore>(simulation, seconds(30))),
        host0(HostZeroOptions(simulation), original),
        host2(NodeOptions(simulation, 2), original),
        handler(AgentOf(simulation, 1), site(simulation), workers) {
    site_->Put(kOriginal, original);
    auto zero = simulation.Spawn(
        [&, silent_rank0] { return JoinAs(host0, *original, std::nullopt, silent_rank0); });
    Wait(simulation, milliseconds(100));
    auto one = simulation.Spawn([&] { return handler.NextRendezvous(); });
    Wait(simulation, milliseconds(100));
    auto two = simulation.Spawn([&] { return JoinAs(host2, *original, std::nullopt); });
    round0[0] = simulation.Ready(zero, seconds(10));
    round0[2] = simulation.Ready(two, seconds(10));
    if (silent_rank0) {
      first = std::move(one);
      return;
    }
    const RendezvousInfo info = simulation.Ready(one, seconds(10));
    REQUIRE(info.group_rank == 1);
  }
  static DynamicRendezvousOptions HostZeroOptions(Simulation& simulation) {
    DynamicRendezvousOptions options = NodeOptions(simulation, 0);
    options.node.serves_store = true;
    return options;
  }
  SimSite& site(Simulation& simulation) {
    site_.emplace(simulation);
    return *site_;
  }

  std::optional<SimSite> site_;
  FakeWorkerStore workers;
  std::shared_ptr<SimulatedStore> original;
  DynamicRendezvous host0;
  DynamicRendezvous host2;
  ElasticRendezvousHandler handler;
  FormedRound round0[3];
  std::future<RendezvousInfo> first;  // the handler's first round, when rank 0 is silent
};

std::optional<nlohmann::json> EventOf(const RendezvousInfo& info, const std::string& name) {
  for (const auto& [event, fields] : info.events) {
    if (event == name) return nlohmann::json::parse(fields);
  }
  return std::nullopt;
}

// Found by ddprun-sim (seed 2, schedule 1, 64 nodes: the store host's incoming traffic cut for
// 10.9 s). Every other member's request waited out read_timeout; the store host, alone, swept
// them as silent, sealed the next round without a quorum and closed the rendezvous; after the
// heal the majority came back, found it closed, and the whole job ended.
TEST_CASE("members counted out of a round that lost its quorum move the store and go on",
          "[rendezvous][quorum]") {
  Simulation simulation;
  ThreeHosts hosts(simulation);

  // Hosts 1 and 2 went silent 10 s ago (to host 0); host 0 comes back alone and stops.
  for (int rank : {1, 2}) {
    hosts.original->SetString(kKeys.HeartbeatAt(0, rank),
                              std::to_string(ddprun::WallClockMs(simulation) - 10'000));
  }
  auto alone = simulation.Spawn([&] {
    try {
      JoinAs(hosts.host0, *hosts.original, hosts.round0[0]);
    } catch (const RendezvousQuorumError& error) {
      return std::string(error.what());
    }
    return std::string("formed");
  });
  CHECK_THAT(simulation.Ready(alone, seconds(30)), Catch::StartsWith("lost quorum: only 1 of"));
  // Host 0 took its ticket in round 1: it was counted. A node that did not, was not.
  CHECK_FALSE(hosts.host0.QuorumLostWithout(1));
  CHECK(DynamicRendezvous(NodeOptions(simulation, 2), hosts.original).QuorumLostWithout(1));

  // Host 1 (the handler, first successor candidate) moves the store; host 2 follows it there.
  const auto start = simulation.Now();
  auto again = simulation.Spawn([&] { return hosts.handler.NextRendezvous(); });
  auto follower = simulation.Spawn([&] {
    std::shared_ptr<SimulatedStore> moved;
    for (int look = 0; look < 300; ++look) {  // 30 s
      moved = hosts.site_->StoreOf(kServedHere);
      if (moved && moved->Check({kKeys.MovedStore()}) &&
          nlohmann::json::parse(moved->GetString(kKeys.MovedStore())).value("ready", false)) {
        break;
      }
      moved.reset();
      Wait(simulation, milliseconds(100));
    }
    if (!moved) throw std::runtime_error("no store was moved");
    DynamicRendezvous host2(NodeOptions(simulation, 2), moved);
    return JoinAs(host2, *moved, hosts.round0[2]);
  });
  const bool formed = simulation.Finishes(again, seconds(60));
  REQUIRE(formed);
  const RendezvousInfo info = again.get();
  const FormedRound host2 = simulation.Ready(follower, seconds(10));
  CHECK(info.group_world_size == 2);
  CHECK(host2.group_world_size == 2);
  CHECK(hosts.handler.StoreAddress().ToString() == kServedHere);
  // No wait for a window: the store answered, it just stopped.
  CHECK(simulation.Now() - start < kWindow);
  const auto lost = EventOf(info, "store_lost");
  REQUIRE(lost);
  CHECK_THAT(lost->at("reason").get<std::string>(),
             Catch::StartsWith("its side stopped without this node: the rendezvous 'job' is "
                               "closed: lost quorum"));
  const auto moved = EventOf(info, "store_moved");
  REQUIRE(moved);
  CHECK(moved->at("epoch") == 1);
  CHECK(moved->at("serving") == true);
}

// Found by ddprun-sim (seed 6, schedule 3, 64 nodes): the new round's rank 0 was killed right
// after the seal, before it wrote the workers' store address; every other node waited
// read_timeout for it and exited on the store's "wait timeout".
TEST_CASE("a rank 0 that never publishes the workers' store is lost, and the others go on",
          "[rendezvous][quorum]") {
  Simulation simulation;
  const auto start = simulation.Now();
  ThreeHosts hosts(simulation, /*silent_rank0=*/true);
  auto host2 =
      simulation.Spawn([&] { return JoinAs(hosts.host2, *hosts.original, hosts.round0[2]); });
  std::optional<RendezvousInfo> joined;
  if (simulation.Finishes(hosts.first, seconds(60))) {
    try {
      joined = hosts.first.get();
    } catch (const std::exception& error) {
      FAIL_CHECK(error.what());
    }
  }
  if (!joined) {  // host 2 still waits for round 0 to end: end its wait
    hosts.original->Interrupt();
    simulation.Finishes(host2, seconds(120));
    FAIL("the handler formed no round");
  }
  const RendezvousInfo info = *joined;
  CHECK(simulation.Ready(host2, seconds(10)).group_world_size == 2);
  CHECK(info.round == 1);
  CHECK(info.group_world_size == 2);
  CHECK(simulation.Now() - start >= kReadTimeout);
  CHECK(simulation.Now() - start < kReadTimeout + kWindow);
  const auto lost = EventOf(info, "node_lost");
  REQUIRE(lost);
  CHECK(lost->at("node") == 0);
  CHECK(lost->at("node_host") == "host0");
  CHECK_THAT(lost->at("reason").get<std::string>(),
             Catch::StartsWith("it did not publish the workers' store address"));
  // A loss, not a failure: no restart spent.
  CHECK(info.restart_count.value_or(-1) == 0);
}

}  // namespace
