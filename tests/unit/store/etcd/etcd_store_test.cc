// The Store over etcd (store/etcd/etcd_store.h) against a real etcd started by the test: the
// TCPStore semantics the dynamic rendezvous relies on (ADD under contention, COMPARE_SET's
// missing-key rule, waits woken by a put and bounded by their timeout, Interrupt), and prefix
// isolation between jobs.
#include "store/etcd/etcd_store.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <future>
#include <thread>
#include <vector>

#include "etcd_server.h"
#include "rendezvous/dynamic_rendezvous.h"

namespace ddprun::store::etcd {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::EtcdCluster;
using testing::EtcdServer;

EtcdStoreOptions Options(const EtcdServer& server, const std::string& prefix = "/job-a/") {
  return {{{server.Endpoint()}, 5s}, prefix};
}

store::Bytes B(const std::string& text) { return store::Bytes(text.begin(), text.end()); }

}  // namespace

TEST_CASE("etcd store: set, get, check, delete, num_keys per prefix", "[etcd][store]") {
  EtcdServer server;
  EtcdStore a(Options(server, "/job-a/"));
  EtcdStore b(Options(server, "/job-b/"));
  a.SetString("x", "1");
  a.SetString("y", "2");
  b.SetString("x", "other job");
  CHECK(a.GetString("x") == "1");
  CHECK(b.GetString("x") == "other job");
  CHECK(a.Check({"x", "y"}));
  CHECK_FALSE(a.Check({"x", "z"}));
  CHECK(a.NumKeys() == 2);
  CHECK(b.NumKeys() == 1);
  CHECK(a.DeleteKey("x"));
  CHECK_FALSE(a.DeleteKey("x"));
  CHECK(a.NumKeys() == 1);
  const store::Bytes binary{0, 255, 10, 13};
  a.Set("bin", binary);
  CHECK(a.Get("bin") == binary);
}

TEST_CASE("etcd store: ADD from 4 threads loses no increment", "[etcd][store]") {
  EtcdServer server;
  constexpr int kThreads = 4;
  constexpr int kEach = 25;
  std::vector<std::future<void>> adders;
  for (int t = 0; t < kThreads; ++t) {
    adders.push_back(std::async(std::launch::async, [&server] {
      EtcdStore store(Options(server));
      for (int i = 0; i < kEach; ++i) store.Add("counter", 1);
    }));
  }
  for (auto& adder : adders) adder.get();
  EtcdStore store(Options(server));
  CHECK(store.Add("counter", 0) == kThreads * kEach);
  CHECK(store.Add("fresh", -3) == -3);
  store.SetString("text", "abc");
  CHECK_THROWS_AS(store.Add("text", 1), std::invalid_argument);
}

TEST_CASE("etcd store: counters as TCPStore's, over delta keys", "[etcd][store]") {
  EtcdServer server;
  EtcdStore store(Options(server, "/job-c/"));
  CHECK(store.Add("n", 0) == 0);  // ADD 0 creates a missing counter, as TCPStore's does
  CHECK(store.Check({"n"}));
  CHECK(store.Add("fresh", 3) == 3);
  CHECK(store.Check({"fresh"}));  // created by its first ADD: waits and CHECK see it
  CHECK(store.Add("fresh", -1) == 2);
  CHECK(store.GetString("fresh") == "2");
  CHECK(store.NumKeys() == 2);   // the deltas live outside the prefix
  store.SetString("hint", "5");  // SET then ADD: the set value is the base
  CHECK(store.Add("hint", 0) == 5);
  CHECK(store.Add("hint", 2) == 7);
  store.SetString("hint", "1");  // SET resets a counter
  CHECK(store.Add("hint", 0) == 1);
  CHECK(store.GetString("hint") == "1");
  CHECK(store.CompareSet("fresh", B("2"), B("10")) == B("10"));  // compares the sum; drops deltas
  CHECK(store.Add("fresh", 1) == 11);
  CHECK(store.DeleteKey("fresh"));
  CHECK_FALSE(store.Check({"fresh"}));
  CHECK(store.Add("fresh", 1) == 1);  // deleted with its deltas
  store.SetString("text", "abc");
  CHECK_THROWS_AS(store.Add("text", 1), std::invalid_argument);
  CHECK(store.GetString("text") == "abc");  // a failed ADD leaves the key as it was
}

TEST_CASE("etcd store: COMPARE_SET as TCPStore's", "[etcd][store]") {
  EtcdServer server;
  EtcdStore store(Options(server));
  CHECK(store.CompareSet("k", B("x"), B("y")) == B("x"));  // missing, expected non-empty
  CHECK_FALSE(store.Check({"k"}));
  CHECK(store.CompareSet("k", {}, B("first")) == B("first"));  // missing, expected empty
  CHECK(store.CompareSet("k", B("wrong"), B("second")) == B("first"));
  CHECK(store.CompareSet("k", B("first"), B("second")) == B("second"));
  CHECK(store.GetString("k") == "second");
}

TEST_CASE("etcd store: a wait is woken by the put, bounded, and interruptible", "[etcd][store]") {
  EtcdServer server;
  EtcdStore waiter(Options(server));
  EtcdStore writer(Options(server));

  auto waiting = std::async(std::launch::async, [&waiter] { waiter.Wait({"a", "b"}, 30s); });
  writer.SetString("a", "1");
  REQUIRE(waiting.wait_for(300ms) == std::future_status::timeout);  // "b" still missing
  const auto put_at = Clock::now();
  writer.SetString("b", "2");
  REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
  waiting.get();
  CHECK(Clock::now() - put_at < 2s);

  waiter.SetTimeout(30s);
  auto getting = std::async(std::launch::async, [&waiter] { return waiter.GetString("later"); });
  writer.SetString("later", "value");
  REQUIRE(getting.wait_for(5s) == std::future_status::ready);
  CHECK(getting.get() == "value");

  const auto start = Clock::now();
  CHECK_THROWS_AS(waiter.Wait({"never"}, 300ms), store::StoreTimeout);
  CHECK(Clock::now() - start < 3s);

  auto blocked = std::async(std::launch::async, [&waiter] { waiter.Wait({"never"}, 60s); });
  REQUIRE(blocked.wait_for(200ms) == std::future_status::timeout);
  waiter.Interrupt();
  REQUIRE(blocked.wait_for(5s) == std::future_status::ready);
  CHECK_THROWS_AS(blocked.get(), store::StoreConnectionError);
  CHECK_THROWS_AS(waiter.GetString("a"), store::StoreConnectionError);  // and every later call
}

}  // namespace ddprun::store::etcd

namespace ddprun::store::etcd {
using rendezvous::DynamicRendezvous;
using rendezvous::DynamicRendezvousOptions;
using rendezvous::FormedRound;

// The c10d backend's rendezvous algorithm, unchanged, over etcd: three agents, each with its own
// connection, form one round.
TEST_CASE("etcd store: the dynamic rendezvous forms a round over etcd", "[etcd][store]") {
  EtcdServer server;
  std::vector<std::future<FormedRound>> joins;
  for (int id = 0; id < 3; ++id) {
    joins.push_back(std::async(std::launch::async, [&server, id] {
      DynamicRendezvousOptions options;
      options.run_id = "etcd-job";
      options.min_nodes = 3;
      options.max_nodes = 3;
      options.node = {"host" + std::to_string(id), "10.0.0." + std::to_string(id), 1000 + id, 2};
      options.join_timeout = 20s;
      options.last_call_timeout = 100ms;
      auto store = std::make_shared<EtcdStore>(Options(server));
      store->SetTimeout(20s);
      return DynamicRendezvous(options, store).Join(std::nullopt);
    }));
  }
  std::vector<int> ranks;
  for (auto& join : joins) {
    REQUIRE(join.wait_for(30s) == std::future_status::ready);
    const FormedRound round = join.get();
    CHECK(round.group_world_size == 3);
    CHECK(round.global_world_size == 6);
    ranks.push_back(round.group_rank);
  }
  std::sort(ranks.begin(), ranks.end());
  CHECK(ranks == std::vector<int>{0, 1, 2});
}

}  // namespace ddprun::store::etcd

namespace ddprun::store::etcd {

// Losing the member a wait watches on is not the store's loss: the wait goes on through another.
TEST_CASE("etcd store: a wait survives the loss of its member", "[etcd][store]") {
  EtcdCluster cluster(3);
  // The killed member may be the leader: both wait the election out (patience), as the
  // launcher's stores do; the waiter's read after its watch's loss needs a leader too.
  EtcdStore waiter({{cluster.Endpoints(), 2s, std::nullopt, 10s}, "/job/"});
  EtcdStore writer({{{cluster.Endpoint(1), cluster.Endpoint(2)}, 2s, std::nullopt, 10s}, "/job/"});
  auto waiting = std::async(std::launch::async, [&waiter] { waiter.Wait({"k"}, 30s); });
  REQUIRE(waiting.wait_for(300ms) == std::future_status::timeout);  // watching on member 0
  cluster.Kill(0);
  writer.SetString("k", "after the loss");
  REQUIRE(waiting.wait_for(10s) == std::future_status::ready);
  waiting.get();  // no StoreConnectionError
  CHECK(waiter.GetString("k") == "after the loss");
}

}  // namespace ddprun::store::etcd
