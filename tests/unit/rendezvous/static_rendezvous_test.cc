// The static rendezvous: nodes on threads over one in-memory store or node 0's real TCP store.
#include "rendezvous/static_rendezvous.h"

#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "elastic/round_sync.h"
#include "store/in_memory_store.h"
#include "store/store_server_thread.h"
#include "store/tcp_store_client.h"
#include "tests/unit/common/fake_clock.h"
#include "tests/unit/store/clocked_store.h"

using namespace ddprun;
using namespace ddprun::rendezvous;
namespace store = ddprun::store;
using namespace std::chrono_literals;
using ddprun::store::testing::ClockedStore;
using ddprun::testing::FakeClock;

namespace {

StaticRendezvousOptions Options(int node_rank, int num_nodes,
                                std::chrono::milliseconds timeout = 5000ms) {
  StaticRendezvousOptions options;
  options.run_id = "job";
  options.node_rank = node_rank;
  options.num_nodes = num_nodes;
  options.master_addr = "10.0.0.1";
  options.master_port = 29500;
  options.host = "host" + std::to_string(node_rank);
  options.join_timeout = timeout;
  return options;
}

StoreConnector Shared(std::shared_ptr<store::Store> store) {
  return [store](std::chrono::milliseconds) { return store; };
}

// Joins and exchanges role infos as the agent does; returns this node's assignment.
elastic::RankAssignment JoinAndAssign(StaticRendezvous& rendezvous, int local_world_size) {
  const RendezvousInfo info = rendezvous.NextRendezvous();
  elastic::PeerInfo mine{"default", info.group_rank, local_world_size, "h"};
  const auto peers = elastic::ExchangeRoleInfos(*info.store, mine, info.group_world_size);
  return elastic::AssignFromPeers(peers, info.group_rank);
}

}  // namespace

TEST_CASE("static rendezvous: two nodes join one round, group rank = node rank",
          "[rendezvous][static]") {
  auto store = std::make_shared<store::InMemoryStore>(5000ms);
  StaticRendezvous node0(Options(0, 2), Shared(store));
  StaticRendezvous node1(Options(1, 2), Shared(store));
  auto joined1 = std::async(std::launch::async, [&] { return node1.NextRendezvous(); });
  const RendezvousInfo info0 = node0.NextRendezvous();
  const RendezvousInfo info1 = joined1.get();
  CHECK(info0.group_rank == 0);
  CHECK(info1.group_rank == 1);
  CHECK(info1.group_world_size == 2);
  CHECK(info1.round == 0);
  CHECK(info1.master_addr == "10.0.0.1");
  CHECK(info1.master_port == 29500);
  CHECK(info1.use_agent_store);
  CHECK(info1.store != nullptr);
  // A second round uses fresh keys: it waits for both nodes again.
  auto again1 = std::async(std::launch::async, [&] { return node1.NextRendezvous(); });
  CHECK(node0.NextRendezvous().round == 1);
  CHECK(again1.get().round == 1);
}

TEST_CASE("static rendezvous: heterogeneous nodes get torchrun's prefix-sum ranks",
          "[rendezvous][static]") {
  auto store = std::make_shared<store::InMemoryStore>(5000ms);
  StaticRendezvous node0(Options(0, 3), Shared(store));
  StaticRendezvous node1(Options(1, 3), Shared(store));
  StaticRendezvous node2(Options(2, 3), Shared(store));
  auto r2 = std::async(std::launch::async, [&] { return JoinAndAssign(node2, 1); });
  auto r1 = std::async(std::launch::async, [&] { return JoinAndAssign(node1, 3); });
  const auto r0 = JoinAndAssign(node0, 2);
  CHECK(r0.base_global_rank == 0);
  CHECK(r1.get().base_global_rank == 2);
  const auto a2 = r2.get();
  CHECK(a2.base_global_rank == 5);
  CHECK(a2.global_world_size == 6);
  CHECK(a2.role_world_size == 6);
}

TEST_CASE("static rendezvous: a timeout names the missing nodes and join_timeout",
          "[rendezvous][static]") {
  FakeClock clock;  // the join's waits pass on it: nobody else uses the store
  auto store = std::make_shared<ClockedStore>(clock);
  std::vector<JoinProgress> reports;
  auto options = Options(0, 3, 300ms);
  options.clock = &clock;
  options.on_progress = [&](const JoinProgress& p) { reports.push_back(p); };
  StaticRendezvous node0(options, Shared(store));
  try {
    node0.NextRendezvous();
    FAIL("no timeout");
  } catch (const RendezvousTimeoutError& error) {
    const std::string text = error.what();
    CHECK(text.find("1/3 nodes joined") != std::string::npos);
    CHECK(text.find("missing node_rank 1, 2") != std::string::npos);
    CHECK(text.find("join_timeout") != std::string::npos);
  }
  REQUIRE_FALSE(reports.empty());
  CHECK(reports.back().done);
  CHECK(reports.back().joined == 1);
}

TEST_CASE("static rendezvous: an unreachable store times out naming node 0's address",
          "[rendezvous][static]") {
  int attempts = 0;
  FakeClock clock;
  auto options = Options(1, 2, 200ms);
  options.clock = &clock;
  StaticRendezvous node1(options,
                         [&](std::chrono::milliseconds timeout) -> std::shared_ptr<store::Store> {
                           ++attempts;
                           clock.Advance(timeout);  // each attempt tries for its whole timeout
                           throw store::StoreConnectionError("connect: Connection refused");
                         });
  try {
    node1.NextRendezvous();
    FAIL("no timeout");
  } catch (const RendezvousTimeoutError& error) {
    const std::string text = error.what();
    CHECK(text.find("10.0.0.1:29500") != std::string::npos);
    CHECK(text.find("Connection refused") != std::string::npos);
    CHECK(text.find("join_timeout") != std::string::npos);
  }
  CHECK(attempts >= 1);
}

TEST_CASE("static rendezvous: Shutdown from another thread ends a waiting join",
          "[rendezvous][static]") {
  auto store = std::make_shared<store::InMemoryStore>(5000ms);
  StaticRendezvous node0(Options(0, 2, 60'000ms), Shared(store));
  auto joining = std::async(std::launch::async, [&] { return node0.NextRendezvous(); });
  // Node 0 announces itself (a second connection sees it), then blocks waiting for node 1.
  store->Connect()->Wait({StaticRendezvous::RoundPrefix("job", 0) + "/ddprun/join/0"}, 5000ms);
  node0.Shutdown();
  // At once: well under the 1 s progress period that the join would otherwise wait out.
  REQUIRE(joining.wait_for(900ms) == std::future_status::ready);
  CHECK_THROWS_AS(joining.get(), RendezvousClosedError);
}

TEST_CASE("static rendezvous: two nodes over node 0's real TCP store on loopback",
          "[rendezvous][static][tcp]") {
  const bool authenticated = GENERATE(false, true);
  store::ServerOptions served;
  served.host = "127.0.0.1";
  if (authenticated)
    served.auth = std::make_shared<const store::AuthKey>("the-job-token-0123456789");
  store::StoreServerThread server(served);
  auto connect = [&](std::chrono::milliseconds timeout) -> std::shared_ptr<store::Store> {
    store::ClientOptions options;
    options.port = server.Port();
    options.connect_timeout = timeout;
    options.timeout = 5000ms;
    options.auth = served.auth;
    return std::make_shared<store::TcpStoreClient>(options);
  };
  StaticRendezvousOptions options0 = Options(0, 2);
  StaticRendezvousOptions options1 = Options(1, 2);
  int picks = 0;
  if (authenticated) {  // the workers serve their own store, at the port node 0 picks
    options0.pick_worker_port = [&picks] { return 31000 + ++picks; };
    options1.pick_worker_port = [] { return -1; };  // only node 0 picks
  }
  StaticRendezvous node0(options0, connect);
  StaticRendezvous node1(options1, connect);
  auto joined1 = std::async(std::launch::async, [&] {
    const RendezvousInfo info = node1.NextRendezvous();
    elastic::PeerInfo mine{"default", info.group_rank, 3, "h"};
    const auto peers = elastic::ExchangeRoleInfos(*info.store, mine, info.group_world_size);
    return std::make_pair(info, elastic::AssignFromPeers(peers, info.group_rank));
  });
  const RendezvousInfo info0 = node0.NextRendezvous();
  elastic::PeerInfo mine{"default", info0.group_rank, 2, "h"};
  const auto peers = elastic::ExchangeRoleInfos(*info0.store, mine, info0.group_world_size);
  const auto r0 = elastic::AssignFromPeers(peers, info0.group_rank);
  const auto [info1, r1] = joined1.get();
  CHECK(r0.global_world_size == 5);
  CHECK(r1.base_global_rank == 2);
  CHECK(info0.use_agent_store == !authenticated);
  CHECK(info1.use_agent_store == !authenticated);
  CHECK(info1.master_port == (authenticated ? 31001 : 29500));
  CHECK(info0.master_port == info1.master_port);
}
