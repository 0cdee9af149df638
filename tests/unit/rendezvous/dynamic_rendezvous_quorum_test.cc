// The dynamic rendezvous after a loss: the quorum that keeps one side of a partition only, the
// sweep of members that stopped beating, and a moved store seeded for the survivors
// (docs/elastic.md, "Surviving the loss of the store host").
#include <catch2/catch.hpp>
#include <chrono>

#include "rendezvous/dynamic_rendezvous.h"
#include "rendezvous/rendezvous_handler.h"
#include "tests/unit/rendezvous/dynamic_rendezvous_job.h"

namespace {

using ddprun::rendezvous::DynamicRendezvous;
using ddprun::rendezvous::FormedRound;
using ddprun::rendezvous::MovedStoreMarker;
using ddprun::rendezvous::ReadMovedStoreMarker;
using ddprun::rendezvous::RendezvousKeys;
using ddprun::rendezvous::RendezvousQuorumError;
using ddprun::rendezvous::RoundChange;
using ddprun::rendezvous::RoundMember;
using ddprun::rendezvous::testing::Job;
using ddprun::rendezvous::testing::JoinAsync;
using ddprun::rendezvous::testing::kPromptly;
using ddprun::rendezvous::testing::NowMs;
using ddprun::rendezvous::testing::Ready;
using ddprun::store::testing::Simulation;
using std::chrono::milliseconds;
using Kind = RoundChange::Kind;
using Clock = std::chrono::steady_clock;

// A first round of `nodes` nodes (MAX = nodes closes it at once); element i is node i's view.
std::vector<FormedRound> FormFirstRound(Job& job, int nodes) {
  job.max_nodes = nodes;
  return ddprun::rendezvous::testing::JoinAll(job, nodes);
}

// Declares node `id` of round 0 lost (or leaving).
void Lose(Job& job, const std::vector<FormedRound>& first, int id, Kind kind = Kind::kNodeLost) {
  const int rank = first[id].group_rank;
  job.Node(8).DeclareGone(0, rank, {kind, rank, "host" + std::to_string(id), "test"});
}

void BeatAt(Job& job, const FormedRound& member, std::int64_t ms_ago) {
  ddprun::rendezvous::testing::BeatAt(job, 0, member.group_rank, ms_ago);
}

// Round 0 ends (its workers failed: their collective broke with the silent members).
void EndRound(Job& job, const FormedRound& member) {
  job.Node(8).Announce(0, {Kind::kFailure, member.group_rank, "host", "{}"});
}

std::string QuorumErrorOf(std::future<FormedRound>& join) {
  REQUIRE(ddprun::rendezvous::testing::Finishes(join, kPromptly));
  try {
    join.get();
  } catch (const RendezvousQuorumError& error) {
    return error.what();
  }
  FAIL("the join formed a round without quorum");
  return "";
}

}  // namespace

TEST_CASE("after a loss, fewer than half of the members coming back stops that side",
          "[dynamic_rendezvous][quorum]") {
  Job job;
  job.min_nodes = 1;
  job.last_call = milliseconds{60'000};  // the decision must not wait for it
  const auto first = FormFirstRound(job, 3);
  Lose(job, first, 1);
  Lose(job, first, 2);
  auto alone = JoinAsync(job, 0, first[0]);
  CHECK(QuorumErrorOf(alone) ==
        "lost quorum: only 1 of the 3 nodes of round 0 came back to the rendezvous store (at "
        "least 2 needed); the others may be training on the other side of a network partition, "
        "so this side stops");
  // A node arriving later learns why at once, also after the stopped side closed the job.
  job.Node(0).Close(1);
  auto late = JoinAsync(job, 5);
  CHECK_THAT(QuorumErrorOf(late),
             Catch::StartsWith("the rendezvous 'job' is closed: lost quorum: only 1 of the 3"));
}

TEST_CASE("after a loss, half of the members is enough on the store's side",
          "[dynamic_rendezvous][quorum]") {
  Job job;
  job.min_nodes = 1;
  job.last_call = milliseconds{60'000};
  const auto first = FormFirstRound(job, 2);
  Lose(job, first, 1);
  auto survivor = JoinAsync(job, 0, first[0]);
  const FormedRound next = Ready(survivor);
  CHECK(next.round == 1);
  CHECK(next.group_world_size == 1);
  CHECK(next.restart_count == 0);
}

TEST_CASE("a member that left gracefully does not count against the quorum",
          "[dynamic_rendezvous][quorum]") {
  Job job;
  job.min_nodes = 1;
  job.last_call = milliseconds{60'000};
  const auto first = FormFirstRound(job, 3);
  Lose(job, first, 2, Kind::kNodeLeaving);
  Lose(job, first, 1);
  auto survivor = JoinAsync(job, 0, first[0]);
  CHECK(Ready(survivor).group_world_size == 1);  // 1 of the 2 that did not leave
}

TEST_CASE("a round without a loss needs no quorum", "[dynamic_rendezvous][quorum]") {
  Job job;
  Simulation sim;  // time passes on it, only while every node and the test wait
  job.Simulate(sim);
  job.min_nodes = 1;
  job.max_nodes = 3;
  job.last_call = milliseconds{300};
  const auto first = FormFirstRound(job, 3);
  job.max_nodes = 3;
  job.Node(0).Announce(0, {Kind::kNodeWaiting, -1, "host7", "waiting"});
  auto one = JoinAsync(job, 0, first[0]);  // the others never rejoin: the last call closes it
  CHECK(Ready(one).group_world_size == 1);
}

TEST_CASE("the first arrival declares lost the members that stopped beating",
          "[dynamic_rendezvous][quorum]") {
  Job job;
  Simulation sim;  // time passes on it, only while every node and the test wait
  job.Simulate(sim);
  job.min_nodes = 1;
  job.keep_alive_interval = milliseconds{50};  // x 3 attempts: silent for 150 ms is lost
  job.last_call = milliseconds{60'000};        // the sweep must not wait for it
  const auto first = FormFirstRound(job, 3);
  BeatAt(job, first[0], 0);
  BeatAt(job, first[1], 0);
  BeatAt(job, first[2], 10'000);  // never declared by its ring neighbour (say, partitioned)
  EndRound(job, first[0]);
  const auto started = sim.Now();
  auto a = JoinAsync(job, 0, first[0]);
  job.store->Wait({job.Node(9).RoundKey(1, "node/1")}, kPromptly);
  auto b = JoinAsync(job, 1, first[1]);
  const FormedRound next = Ready(a);
  CHECK(Ready(b).group_world_size == 2);
  CHECK(sim.Now() - started < milliseconds{5'000});
  CHECK(next.group_world_size == 2);  // 2 of 3: a quorum
  CHECK(next.restart_count == 0);
  const DynamicRendezvous view = job.Node(9);
  CHECK(job.store->Check({view.Keys().Gone(0, first[2].group_rank)}));
  CHECK(job.store->Add(view.RoundKey(1, "lost"), 0) == 1);  // a loss: the failure spends nothing
}

TEST_CASE("a side that finds most members silent stops within a few keep-alive intervals",
          "[dynamic_rendezvous][quorum]") {
  Job job;
  Simulation sim;  // time passes on it, only while every node and the test wait
  job.Simulate(sim);
  job.min_nodes = 2;  // the minority could never seal by MIN either
  job.keep_alive_interval = milliseconds{50};
  job.join_timeout = milliseconds{20'000};
  const auto first = FormFirstRound(job, 3);
  BeatAt(job, first[0], 0);
  BeatAt(job, first[1], 10'000);
  BeatAt(job, first[2], 10'000);
  EndRound(job, first[0]);
  const auto started = sim.Now();
  auto alone = JoinAsync(job, 0, first[0]);
  CHECK_THAT(QuorumErrorOf(alone), Catch::StartsWith("lost quorum: only 1 of the 3 nodes"));
  CHECK(sim.Now() - started < milliseconds{5'000});  // not join_timeout
}

TEST_CASE("Members lists a round's first members with the store host marked",
          "[dynamic_rendezvous][failover]") {
  Job job;
  job.serves_store_0 = true;
  const auto first = FormFirstRound(job, 3);
  DynamicRendezvous view = job.Node(9);
  const std::vector<RoundMember> all = view.Members(0, 8);
  REQUIRE(all.size() == 3);
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(all[rank].group_rank == rank);
    const int id = all[rank].node.pid - 1000;
    CHECK(first[id].group_rank == rank);
    CHECK(all[rank].node.addr == "10.0.0." + std::to_string(id));
    CHECK(all[rank].node.serves_store == (id == 0));
  }
  CHECK(view.Members(0, 2).size() == 2);
}

// The survivors of round 0 (3 members, restart count 2) in a store that took over from the lost
// one, whose host was group rank `lost`.
struct MovedStore {
  Job job;
  FormedRound basis;
  std::vector<RoundMember> members;
  std::unique_ptr<Simulation> sim;  // after the job: its nodes end before the job goes

  enum class Time { kReal, kSimulated };
  explicit MovedStore(int lost, int round = 0, Time time = Time::kReal,
                      milliseconds keep_alive = milliseconds{0}) {
    job.keep_alive_interval = keep_alive;
    if (time == Time::kSimulated) {
      sim = std::make_unique<Simulation>();  // time passes only while every node and the test wait
      job.Simulate(*sim);
    }
    job.min_nodes = 1;
    job.max_nodes = 3;
    job.last_call = milliseconds{60'000};
    basis = FormedRound{round, 0, 3, 0, 6, 2};
    for (int rank = 0; rank < 3; ++rank) {
      members.push_back({rank,
                         {"host" + std::to_string(rank), "10.0.0." + std::to_string(rank),
                          1000 + rank, 2, rank == lost}});
    }
    job.Node(1).SeedMovedStore(basis, members, lost, {1, "10.0.0.1:29400", round});
  }
  FormedRound Member(int rank) const {
    FormedRound mine = basis;
    mine.group_rank = rank;
    return mine;
  }
};

TEST_CASE("survivors rejoin a moved store at once, without spending a restart",
          "[dynamic_rendezvous][failover]") {
  MovedStore moved(/*lost=*/0);
  const MovedStoreMarker marker = ReadMovedStoreMarker(*moved.job.store, RendezvousKeys{"job"});
  CHECK(marker.epoch == 1);
  CHECK(marker.addr == "10.0.0.1:29400");
  CHECK(marker.basis == 0);
  const auto started = Clock::now();
  auto successor = JoinAsync(moved.job, 1, moved.Member(1));
  moved.job.store->Wait({moved.job.Node(9).RoundKey(1, "node/1")}, kPromptly);
  auto other = JoinAsync(moved.job, 2, moved.Member(2));
  const FormedRound a = Ready(successor);
  const FormedRound b = Ready(other);
  CHECK(Clock::now() - started < milliseconds{5'000});  // accounted for: no last call
  CHECK(a.round == 1);
  CHECK(a.group_rank == 0);  // the successor arrived first: it serves the workers' store
  CHECK(b.group_rank == 1);
  CHECK(a.group_world_size == 2);
  CHECK(a.global_world_size == 4);
  CHECK(a.restart_count == 2);  // carried over, not moved on
}

TEST_CASE("a moved store's first round needs more than half of the members",
          "[dynamic_rendezvous][failover]") {
  MovedStore moved(/*lost=*/0);
  moved.job.Node(8).DeclareGone(0, 2, {Kind::kNodeLost, 2, "host2", "test"});
  auto alone = JoinAsync(moved.job, 1, moved.Member(1));
  CHECK_THAT(QuorumErrorOf(alone), Catch::StartsWith("lost quorum: only 1 of the 3 nodes"));
}

TEST_CASE("in a moved store, an even split is not enough", "[dynamic_rendezvous][failover]") {
  Job job;
  job.min_nodes = 1;
  job.last_call = milliseconds{60'000};
  const FormedRound basis{0, 0, 2, 0, 4, 0};
  const std::vector<RoundMember> members{{0, {"host0", "10.0.0.0", 1000, 2, true}},
                                         {1, {"host1", "10.0.0.1", 1001, 2, false}}};
  job.Node(1).SeedMovedStore(basis, members, 0, {1, "10.0.0.1:29400", 0});
  FormedRound mine = basis;
  mine.group_rank = 1;
  auto survivor = JoinAsync(job, 1, mine);  // 1 of 2: the store host's side would go on
  CHECK_THAT(QuorumErrorOf(survivor), Catch::StartsWith("lost quorum: only 1 of the 2 nodes"));
}

TEST_CASE("a survivor that never saw the basis sealed still joins the moved store's round",
          "[dynamic_rendezvous][failover]") {
  MovedStore moved(/*lost=*/0, /*round=*/3, MovedStore::Time::kSimulated);
  moved.job.keep_alive_interval = milliseconds{50};  // its place in round 3 is swept promptly
  auto successor = JoinAsync(moved.job, 1, moved.Member(1));
  moved.job.store->Wait({moved.job.Node(9).RoundKey(4, "node/1")}, kPromptly);
  FormedRound stale = moved.Member(2);
  stale.round = 2;  // it still thinks it is in round 2: it arrives at round 3, sealed already
  auto late = JoinAsync(moved.job, 2, stale);
  const FormedRound a = Ready(successor);
  const FormedRound b = Ready(late);
  CHECK(a.round == 4);
  CHECK(b.round == 4);
  CHECK(a.group_world_size == 2);
}

TEST_CASE("at a moved store, a survivor that took a heartbeat timeout to find it still counts",
          "[dynamic_rendezvous][failover]") {
  // x 3 attempts: a 150 ms heartbeat timeout (set before the seed, which counts on it)
  MovedStore moved(/*lost=*/0, /*round=*/0, MovedStore::Time::kSimulated, milliseconds{50});
  const std::int64_t seeded = NowMs(moved.job);
  auto successor = JoinAsync(moved.job, 1, moved.Member(1));
  moved.job.store->Wait({moved.job.Node(9).RoundKey(1, "node/1")}, kPromptly);
  // The other survivor awaited an earlier candidate for the window, then came over a slow link.
  CHECK_FALSE(moved.sim->Finishes(successor, milliseconds{250}));
  auto late = JoinAsync(moved.job, 2, moved.Member(2));
  CHECK(Ready(successor).group_world_size == 2);
  CHECK(Ready(late).group_world_size == 2);
  CHECK(NowMs(moved.job) - seeded >= 250);
}

TEST_CASE("at a moved store, a survivor silent for two heartbeat timeouts is gone",
          "[dynamic_rendezvous][failover]") {
  MovedStore moved(/*lost=*/0, /*round=*/0, MovedStore::Time::kSimulated, milliseconds{50});
  moved.job.join_timeout = milliseconds{20'000};
  const std::int64_t seeded = NowMs(moved.job);
  auto alone = JoinAsync(moved.job, 1, moved.Member(1));
  CHECK_THAT(QuorumErrorOf(alone), Catch::StartsWith("lost quorum: only 1 of the 3 nodes"));
  CHECK(NowMs(moved.job) - seeded >= 300);   // the window, then the timeout
  CHECK(NowMs(moved.job) - seeded < 5'000);  // not join_timeout
}

TEST_CASE("a member declared lost that rejoins anyway does not end the job",
          "[dynamic_rendezvous][quorum]") {
  Job job;
  Simulation sim;  // time passes on it, only while every node and the test wait
  job.Simulate(sim);
  job.min_nodes = 2;
  job.last_call = milliseconds{60'000};
  const auto first = FormFirstRound(job, 3);
  Lose(job, first, 1);  // a false alarm: node 1 is alive and rejoins
  Lose(job, first, 1);  // declared twice: counted once
  Lose(job, first, 2);
  auto back = JoinAsync(job, 1, first[1]);
  // Every member looks accounted for (two declarations and one rejoin) with fewer than MIN
  // here and no quorum yet, but node 0 is neither here nor gone: the round must wait for it.
  job.store->Wait({job.Node(9).RoundKey(1, "node/1")}, kPromptly);
  CHECK_FALSE(sim.Finishes(back, milliseconds{300}));
  auto last = JoinAsync(job, 0, first[0]);
  CHECK(Ready(back).group_world_size == 2);
  CHECK(Ready(last).group_world_size == 2);
}
