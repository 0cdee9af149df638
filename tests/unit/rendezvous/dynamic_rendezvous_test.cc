// The dynamic rendezvous protocol with simulated nodes: each a thread with its own
// DynamicRendezvous over one shared in-memory store (the TCP store's exact key semantics).
// Waits are bounded by generous deadlines; a test that needed a timeout it was promised to skip
// fails instead of hanging.
#include "rendezvous/dynamic_rendezvous.h"

#include <catch2/catch.hpp>
#include <future>
#include <set>
#include <thread>

#include "store/in_memory_store.h"
#include "tests/unit/common/fake_clock.h"
#include "tests/unit/rendezvous/dynamic_rendezvous_job.h"
#include "tests/unit/store/clocked_store.h"

namespace {

using ddprun::rendezvous::DynamicRendezvous;
using ddprun::rendezvous::DynamicRendezvousOptions;
using ddprun::rendezvous::FormedRound;
using ddprun::rendezvous::RendezvousClosedError;
using ddprun::rendezvous::RendezvousTimeoutError;
using ddprun::rendezvous::RoundChange;
using ddprun::rendezvous::SeqValue;
using ddprun::store::InMemoryStore;
using ddprun::store::StoreConnectionError;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Kind = RoundChange::Kind;
using ddprun::rendezvous::testing::Job;
using ddprun::rendezvous::testing::JoinAll;
using ddprun::rendezvous::testing::JoinAsync;
using ddprun::rendezvous::testing::kPromptly;
using ddprun::rendezvous::testing::Ready;
using ddprun::rendezvous::testing::WorkersFailed;
using ddprun::store::testing::ClockedStore;
using ddprun::store::testing::Simulation;
using ddprun::testing::FakeClock;

// Every member's view of one round agrees, ranks are a permutation, bases are prefix sums.
void CheckConsistent(const std::vector<FormedRound>& views, const std::vector<int>& nprocs) {
  std::set<int> ranks;
  std::vector<int> base_by_rank(views.size(), -1);
  for (std::size_t i = 0; i < views.size(); ++i) {
    CHECK(views[i].round == views.front().round);
    CHECK(views[i].group_world_size == static_cast<int>(views.size()));
    CHECK(views[i].restart_count == views.front().restart_count);
    ranks.insert(views[i].group_rank);
    base_by_rank.at(views[i].group_rank) = views[i].base_global_rank;
  }
  CHECK(ranks.size() == views.size());
  int total = 0;
  for (int nproc : nprocs) total += nproc;
  for (const auto& view : views) CHECK(view.global_world_size == total);
  CHECK(base_by_rank.front() == 0);
}

// Every member of `first` (node i's view at element i) joins the next round: their views of it.
std::vector<FormedRound> RejoinAll(const Job& job, const std::vector<FormedRound>& first) {
  std::vector<std::future<FormedRound>> joins;
  for (std::size_t id = 0; id < first.size(); ++id) {
    joins.push_back(JoinAsync(job, static_cast<int>(id), first[id]));
  }
  std::vector<FormedRound> views;
  for (auto& join : joins) views.push_back(Ready(join));
  return views;
}

}  // namespace

TEST_CASE("seq packs arrivals, workers and seals in one counter", "[dynamic_rendezvous]") {
  const SeqValue one{SeqValue::kArrival + 8 * SeqValue::kWorker};
  CHECK(one.Arrivals() == 1);
  CHECK(one.Workers() == 8);
  CHECK(one.Seals() == 0);
  const SeqValue sealed{one.raw * 4000 + SeqValue::kSeal * 2};
  CHECK(sealed.Arrivals() == 4000);
  CHECK(sealed.Workers() == 32000);
  CHECK(sealed.Seals() == 2);
}

TEST_CASE("a round closes at once when MAX nodes arrive", "[dynamic_rendezvous]") {
  Job job;
  job.min_nodes = 2;
  job.max_nodes = 3;
  job.last_call = milliseconds{60'000};  // never reached: MAX closes the round
  std::vector<std::future<FormedRound>> joins;
  const std::vector<int> nprocs{1, 2, 3};
  for (int id = 0; id < 3; ++id) joins.push_back(JoinAsync(job, id, std::nullopt, nprocs[id]));
  std::vector<FormedRound> views;
  for (auto& join : joins) views.push_back(Ready(join));
  CheckConsistent(views, nprocs);
  CHECK(views.front().round == 0);
  CHECK(views.front().restart_count == 0);
}

TEST_CASE("with MIN nodes the round closes after the last call", "[dynamic_rendezvous]") {
  Job job;
  Simulation sim;  // time passes on it, only while every node and the test wait
  job.Simulate(sim);
  job.min_nodes = 2;
  job.max_nodes = 8;
  auto a = JoinAsync(job, 0);
  auto b = JoinAsync(job, 1);
  std::vector<FormedRound> views{Ready(a), Ready(b)};
  CheckConsistent(views, {2, 2});
}

TEST_CASE("fewer than MIN nodes for join_timeout is a clear timeout", "[dynamic_rendezvous]") {
  Job job;
  FakeClock clock;  // a node alone: its waits pass on the fake clock
  job.clock = &clock;
  job.store = std::make_shared<ClockedStore>(clock);
  job.min_nodes = 3;
  job.join_timeout = milliseconds{300};
  DynamicRendezvous node = job.Node(0);
  CHECK_THROWS_MATCHES(
      node.Join(std::nullopt), RendezvousTimeoutError,
      Catch::Matchers::Message("only 1 of the minimum 3 nodes joined round 0 within "
                               "join_timeout=0.3 s; start the missing nodes or lower the minimum "
                               "of --nnodes"));
}

TEST_CASE("a late node waits for the next round and is seen waiting", "[dynamic_rendezvous]") {
  Job job;
  Simulation sim;  // time passes on it, only while every node and the test wait
  job.Simulate(sim);
  job.min_nodes = 2;
  job.max_nodes = 3;
  job.last_call = milliseconds{50};
  auto a = JoinAsync(job, 0);
  auto b = JoinAsync(job, 1);
  const FormedRound first_a = Ready(a);
  const FormedRound first_b = Ready(b);
  REQUIRE(first_a.group_world_size == 2);

  job.last_call = milliseconds{60'000};  // the members' rejoin must not need it
  auto late = JoinAsync(job, 2);
  DynamicRendezvous observer = job.Node(0);
  const std::string change_key = observer.RoundKey(0, "change");
  job.store->Wait({change_key}, kPromptly);
  const RoundChange change = RoundChange::Decode(job.store->GetString(change_key));
  CHECK(change.kind == Kind::kNodeWaiting);
  CHECK(change.host == "host2");
  CHECK(observer.NodesWaiting(0) == 1);

  auto again_a = JoinAsync(job, 0, first_a);
  auto again_b = JoinAsync(job, 1, first_b);
  std::vector<FormedRound> views{Ready(again_a), Ready(again_b), Ready(late)};
  CheckConsistent(views, {2, 2, 2});
  CHECK(views.front().round == 1);
  CHECK(views.front().restart_count == 0);
  CHECK(views[2].group_rank == 0);  // arrival order: the waiting node came first
}

TEST_CASE("a full round is not disturbed by a late node", "[dynamic_rendezvous]") {
  Job job;
  FakeClock clock;  // one node at a time: their waits pass on the fake clock
  job.clock = &clock;
  job.store = std::make_shared<ClockedStore>(clock);
  job.min_nodes = 1;
  job.max_nodes = 1;
  DynamicRendezvous member = job.Node(0);
  const FormedRound formed = member.Join(std::nullopt);
  CHECK(formed.group_world_size == 1);
  job.join_timeout = milliseconds{200};
  DynamicRendezvous late = job.Node(1);
  CHECK_THROWS_MATCHES(late.Join(std::nullopt), RendezvousTimeoutError,
                       Catch::Matchers::Message(
                           "round 0 is full (the maximum of 1 nodes) and none of its nodes left "
                           "within join_timeout=0.2 s; raise the maximum of --nnodes"));
  CHECK_FALSE(job.store->Check({member.RoundKey(0, "change")}));
  CHECK(member.NodesWaiting(0) == 1);
  CHECK_FALSE(job.store->Check({member.RoundKey(1, "sealed")}));  // no second group
}

TEST_CASE("a node waiting for a full round learns at once that the job finished",
          "[dynamic_rendezvous]") {
  Job job;
  job.min_nodes = 1;
  job.max_nodes = 1;
  DynamicRendezvous member = job.Node(0);
  member.Join(std::nullopt);
  auto late = JoinAsync(job, 1);
  job.store->Wait({member.RoundKey(1, "node/1")}, kPromptly);
  member.Close(0);
  REQUIRE(late.wait_for(kPromptly) == std::future_status::ready);
  CHECK_THROWS_AS(late.get(), RendezvousClosedError);
}

TEST_CASE("survivors of a lost node form the next round without a last call",
          "[dynamic_rendezvous]") {
  Job job;
  job.min_nodes = 2;
  job.max_nodes = 3;
  job.last_call = milliseconds{60'000};
  std::vector<std::future<FormedRound>> joins;
  for (int id = 0; id < 3; ++id) joins.push_back(JoinAsync(job, id));
  std::vector<FormedRound> first;
  for (auto& join : joins) first.push_back(Ready(join));
  const int lost = 2;

  DynamicRendezvous watcher = job.Node(0);
  watcher.DeclareGone(0, first[lost].group_rank,
                      {Kind::kNodeLost, first[lost].group_rank, "host2", "heartbeats stopped"});
  watcher.DeclareGone(0, first[lost].group_rank,  // a second declaration counts once
                      {Kind::kNodeLost, first[lost].group_rank, "host2", "again"});
  const RoundChange change =
      RoundChange::Decode(job.store->GetString(watcher.RoundKey(0, "change")));
  CHECK(change.kind == Kind::kNodeLost);
  CHECK(change.detail == "heartbeats stopped");

  auto a = JoinAsync(job, 0, first[0]);
  auto b = JoinAsync(job, 1, first[1]);
  std::vector<FormedRound> views{Ready(a), Ready(b)};
  CheckConsistent(views, {2, 2});
  CHECK(views.front().round == 1);
  CHECK(views.front().restart_count == 0);  // a lost node spends no restart
}

TEST_CASE("a worker failure moves the restart count on for everyone", "[dynamic_rendezvous]") {
  Job job;
  job.min_nodes = 2;
  job.max_nodes = 2;
  auto a = JoinAsync(job, 0);
  auto b = JoinAsync(job, 1);
  const FormedRound first_a = Ready(a);
  const FormedRound first_b = Ready(b);
  DynamicRendezvous failing = job.Node(1);
  failing.CountFailure(0);
  const RoundChange in_force =
      failing.Announce(0, {Kind::kFailure, first_b.group_rank, "host1", "{\"rank\": 3}"});
  CHECK(in_force.kind == Kind::kFailure);
  // A later reason does not replace the first one.
  CHECK(failing.Announce(0, {Kind::kNodeWaiting, -1, "x", ""}).kind == Kind::kFailure);
  auto again_a = JoinAsync(job, 0, first_a);
  auto again_b = JoinAsync(job, 1, first_b);
  std::vector<FormedRound> views{Ready(again_a), Ready(again_b)};
  CheckConsistent(views, {2, 2});
  CHECK(views.front().restart_count == 1);
}

TEST_CASE("a worker failure after the round ended for a node waiting spends no restart",
          "[dynamic_rendezvous]") {
  Job job;
  job.min_nodes = 2;
  job.max_nodes = 3;
  const std::vector<FormedRound> first = JoinAll(job, 2);
  // A node waits to join (at round 1, and says so to round 0); node 0 stops its workers for it,
  // and node 1's, whose collective that broke, fail before its agent heard of the change
  // (chaos seed g 4, under 2 % loss).
  auto newcomer = JoinAsync(job, 2);
  const DynamicRendezvous observer = job.Node(9);
  job.store->Wait({observer.RoundKey(0, "change")}, kPromptly);
  CHECK(WorkersFailed(job, 1, first[1]).kind == Kind::kNodeWaiting);
  std::vector<FormedRound> views = RejoinAll(job, first);
  views.push_back(Ready(newcomer));
  CheckConsistent(views, {2, 2, 2});
  CHECK(views.front().restart_count == 0);
}

TEST_CASE("a worker failure that ends the round spends one restart, reported as the agent does",
          "[dynamic_rendezvous]") {
  Job job;
  job.min_nodes = 2;
  job.max_nodes = 2;
  const std::vector<FormedRound> first = JoinAll(job, 2);
  CHECK(WorkersFailed(job, 1, first[1]).kind == Kind::kFailure);
  // The other member's workers fail too (their peer is gone): still one restart.
  CHECK(WorkersFailed(job, 0, first[0]).kind == Kind::kFailure);
  const std::vector<FormedRound> views = RejoinAll(job, first);
  CheckConsistent(views, {2, 2});
  CHECK(views.front().restart_count == 1);
}

TEST_CASE("a closed rendezvous refuses joins", "[dynamic_rendezvous]") {
  Job job;
  DynamicRendezvous node = job.Node(0);
  CHECK_FALSE(node.IsClosed());
  node.Close(0);
  CHECK(node.IsClosed());
  auto join = JoinAsync(job, 1);  // at once, not after the join timeout
  REQUIRE(join.wait_for(milliseconds{900}) == std::future_status::ready);
  CHECK_THROWS_AS(join.get(), RendezvousClosedError);
}

TEST_CASE("Interrupt cancels a blocked join at once", "[dynamic_rendezvous]") {
  Job job;
  job.min_nodes = 2;
  job.join_timeout = milliseconds{60'000};
  auto blocked = std::async(std::launch::async, [&job] {
    DynamicRendezvous node = job.Node(0);
    node.Join(std::nullopt);
  });
  DynamicRendezvous observer = job.Node(9);
  job.store->Wait({observer.RoundKey(0, "node/1")}, kPromptly);  // it has arrived and waits
  job.store->Interrupt();
  REQUIRE(blocked.wait_for(kPromptly) == std::future_status::ready);
  CHECK_THROWS_AS(blocked.get(), StoreConnectionError);
}

TEST_CASE("many nodes form one consistent round", "[dynamic_rendezvous]") {
  Job job;
  job.min_nodes = 64;
  job.max_nodes = 64;
  std::vector<std::future<FormedRound>> joins;
  std::vector<int> nprocs;
  for (int id = 0; id < 64; ++id) {
    nprocs.push_back(1 + id % 3);
    joins.push_back(JoinAsync(job, id, std::nullopt, nprocs.back()));
  }
  std::vector<FormedRound> views;
  for (auto& join : joins) views.push_back(Ready(join));
  CheckConsistent(views, nprocs);
  // Bases are prefix sums in group-rank order.
  std::vector<std::pair<int, int>> by_rank;  // rank -> (base, nproc)
  for (std::size_t i = 0; i < views.size(); ++i) {
    by_rank.emplace_back(views[i].group_rank, static_cast<int>(i));
  }
  std::sort(by_rank.begin(), by_rank.end());
  int expected_base = 0;
  for (const auto& [rank, index] : by_rank) {
    CHECK(views[index].base_global_rank == expected_base);
    expected_base += nprocs[index];
  }
}

TEST_CASE("failures that come with a lost member spend no restart", "[dynamic_rendezvous]") {
  // The survivors' workers fail when a peer's node dies (their collective breaks): the round
  // after counts the loss, not a failure, even when its last call is shorter than the time it
  // takes to notice the loss (member_timeout).
  Job job;
  Simulation sim;  // time passes on it, only while every node and the test wait
  job.Simulate(sim);
  job.min_nodes = 2;
  job.max_nodes = 3;
  job.last_call = milliseconds{100};
  job.member_timeout = milliseconds{60'000};
  std::vector<std::future<FormedRound>> joins;
  for (int id = 0; id < 3; ++id) joins.push_back(JoinAsync(job, id));
  std::vector<FormedRound> first;
  for (auto& join : joins) first.push_back(Ready(join));
  DynamicRendezvous survivor = job.Node(0);
  survivor.CountFailure(0);
  survivor.Announce(0, {Kind::kFailure, first[0].group_rank, "host0", "{}"});
  auto a = JoinAsync(job, 0, first[0]);
  auto b = JoinAsync(job, 1, first[1]);
  REQUIRE_FALSE(sim.Finishes(a, milliseconds{300}));  // waits for node 2
  survivor.DeclareGone(0, first[2].group_rank, {Kind::kNodeLost, first[2].group_rank, "h2", ""});
  std::vector<FormedRound> views{Ready(a), Ready(b)};
  CheckConsistent(views, {2, 2});
  CHECK(views.front().restart_count == 0);
}

TEST_CASE("a node that dies while the round forms is dropped from it", "[dynamic_rendezvous]") {
  Job job;
  Simulation sim;  // time passes on it, only while every node and the test wait
  job.Simulate(sim);
  job.min_nodes = 2;
  job.max_nodes = 4;
  job.last_call = milliseconds{600};
  job.keep_alive_interval = milliseconds{100};  // silent for 300 ms: dead
  // Node 1 arrives second and "dies": its ADD and record are there, it never beats again.
  auto first = JoinAsync(job, 0, std::nullopt, 1);
  DynamicRendezvous observer = job.Node(9);
  job.store->Wait({observer.RoundKey(0, "node/1")}, kPromptly);
  {
    DynamicRendezvousOptions dead;
    dead.run_id = "job";
    dead.node = {"host1", "10.0.0.1", 1001, 5};
    DynamicRendezvous corpse(dead, job.store);
    job.store->Add(corpse.RoundKey(0, "seq"), SeqValue::kArrival + 5 * SeqValue::kWorker);
    job.store->SetString(corpse.RoundKey(0, "node/2"),
                         R"({"host":"host1","addr":"a","pid":1001,"nproc":5,"at":0})");
  }
  auto third = JoinAsync(job, 2, std::nullopt, 3);
  std::vector<FormedRound> views{Ready(first), Ready(third)};
  for (const auto& view : views) {
    CHECK(view.group_world_size == 2);
    CHECK(view.global_world_size == 4);  // 1 + 3: the dead node's 5 workers are not counted
  }
  CHECK(views[0].group_rank == 0);
  CHECK(views[0].base_global_rank == 0);
  CHECK(views[1].group_rank == 1);  // ticket 3, one dropped before it
  CHECK(views[1].base_global_rank == 1);
  const auto sealed = job.store->GetString(observer.RoundKey(0, "sealed"));
  CHECK_THAT(sealed, Catch::Contains(R"("dropped":[[2,5]])"));
}

TEST_CASE("a node dropped as dead that was only slow makes the round it missed restart",
          "[dynamic_rendezvous]") {
  Job job;
  Simulation sim;  // time passes on it, only while every node and the test wait
  job.Simulate(sim);
  job.min_nodes = 2;
  job.max_nodes = 4;
  job.last_call = milliseconds{600};
  job.keep_alive_interval = milliseconds{100};  // silent for 300 ms: dead
  // Node 2 took the first ticket, then stalled (its store calls hung: etcd between leaders) and
  // wrote no beat: the other two seal the round without it.
  const DynamicRendezvous observer = job.Node(9);
  const std::int64_t ticket =
      job.store->Add(observer.RoundKey(0, "seq"), SeqValue::kArrival + 2 * SeqValue::kWorker);
  job.store->SetString(observer.RoundKey(0, "node/1"),
                       R"({"host":"host2","addr":"10.0.0.2","pid":1002,"nproc":2,"at":)" +
                           std::to_string(ddprun::rendezvous::testing::NowMs(job) - 10'000) + "}");
  const std::vector<FormedRound> first = JoinAll(job, 2);
  CHECK(first[0].group_world_size == 2);  // of 4 at most: room for node 2
  // Node 2's calls come back: its ticket was dropped, so it waits at round 1 and tells round 0,
  // whose members restart to take it in (as a hot spare it would wait for a change that
  // nothing else brings, until join_timeout: chaos seed g 4).
  auto slow = sim.Spawn([&job, ticket] {
    return job.Node(2).Join(std::nullopt, ddprun::rendezvous::Arrival{0, ticket});
  });
  job.store->Wait({observer.RoundKey(0, "change")}, kPromptly);
  CHECK(RoundChange::Decode(job.store->GetString(observer.RoundKey(0, "change"))).kind ==
        Kind::kNodeWaiting);
  std::vector<FormedRound> views = RejoinAll(job, first);
  views.push_back(Ready(slow));
  for (const FormedRound& formed : views) {
    CHECK(formed.round == 1);
    CHECK(formed.group_world_size == 3);
  }
}

TEST_CASE("dropping the dead never leaves fewer than MIN", "[dynamic_rendezvous]") {
  Job job;
  Simulation sim;  // time passes on it, only while every node and the test wait
  job.Simulate(sim);
  job.min_nodes = 2;
  job.max_nodes = 4;
  job.last_call = milliseconds{600};
  job.keep_alive_interval = milliseconds{100};
  auto first = JoinAsync(job, 0);
  DynamicRendezvous observer = job.Node(9);
  job.store->Wait({observer.RoundKey(0, "node/1")}, kPromptly);
  job.store->Add(observer.RoundKey(0, "seq"), SeqValue::kArrival + 2 * SeqValue::kWorker);
  job.store->SetString(observer.RoundKey(0, "node/2"), R"({"nproc":2,"at":0})");
  job.store->SetString(observer.RoundKey(0, "min"), "1");
  const FormedRound formed = Ready(first);
  CHECK(formed.group_world_size == 2);  // kept: one live node alone would be below MIN
}
