// Simulated nodes of one job for the dynamic rendezvous tests: each node a DynamicRendezvous
// over one shared in-memory store (the TCP store's exact key semantics), joins on threads of
// their own, and a bound on every wait. A job made to Simulate runs its nodes in a simulation
// (tests/unit/store/simulated_store.h): time passes on its clock, and only while every node
// and the test wait; the helpers below then wait as participants, on simulated time.
#pragma once
#include <catch2/catch.hpp>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/dynamic_rendezvous.h"
#include "store/in_memory_store.h"
#include "tests/unit/store/simulated_store.h"

namespace ddprun::rendezvous::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kPromptly{10'000};  // far above what a prompt step takes

struct Job {
  bool serves_store_0 = false;  // node 0 serves the rendezvous store
  int min_nodes = 2;
  int max_nodes = 4;
  milliseconds join_timeout{20'000};
  milliseconds last_call{100};
  milliseconds member_timeout{0};
  milliseconds keep_alive_interval{0};
  std::function<void(const std::string&)> on_waiting;
  std::shared_ptr<store::InMemoryStore> store = std::make_shared<store::InMemoryStore>(seconds(30));
  Clock* clock = &RealClock();  // a fake one with a ClockedStore, for a node alone

  // The nodes' clock and store are `simulation`'s; call it on the simulation's (the test's)
  // thread, before any node starts.
  void Simulate(store::testing::Simulation& simulation) {
    clock = &simulation;
    store = std::make_shared<store::testing::SimulatedStore>(simulation, seconds(30));
  }

  DynamicRendezvous Node(int id, int nproc = 2) const {
    DynamicRendezvousOptions options;
    options.run_id = "job";
    options.min_nodes = min_nodes;
    options.max_nodes = max_nodes;
    options.node = {"host" + std::to_string(id), "10.0.0." + std::to_string(id), 1000 + id, nproc,
                    id == 0 && serves_store_0};
    options.join_timeout = join_timeout;
    options.last_call_timeout = last_call;
    options.member_timeout = member_timeout;
    options.keep_alive_interval = keep_alive_interval;
    options.on_waiting = on_waiting;
    options.clock = clock;
    return DynamicRendezvous(options, store);
  }
};

// Starts a join on its own thread.
inline std::future<FormedRound> JoinAsync(const Job& job, int id,
                                          std::optional<FormedRound> previous = std::nullopt,
                                          int nproc = 2) {
  auto join = [&job, id, previous, nproc] {
    DynamicRendezvous node = job.Node(id, nproc);
    return node.Join(previous);
  };
  if (auto* simulation = store::testing::Simulation::OfThisThread()) {
    return simulation->Spawn("node " + std::to_string(id), join);
  }
  return std::async(std::launch::async, join);
}

// What node `id`'s agent does when the workers of its round `member` fail (the handler's
// ReportFailure): returns the round's change in force.
inline RoundChange WorkersFailed(const Job& job, int id, const FormedRound& member) {
  return job.Node(id).ReportFailure(member.round, {RoundChange::Kind::kFailure, member.group_rank,
                                                   "host" + std::to_string(id), "{}"});
}

// True when `future` is ready within `bound` (of simulated time, in a simulation).
template <typename T>
bool Finishes(std::future<T>& future, milliseconds bound) {
  if (auto* simulation = store::testing::Simulation::OfThisThread()) {
    return simulation->Finishes(future, bound);
  }
  return future.wait_for(bound) == std::future_status::ready;
}

inline FormedRound Ready(std::future<FormedRound>& future) {
  REQUIRE(Finishes(future, kPromptly));
  return future.get();
}

// Nodes 0..nodes-1 join at once; element i is node i's view of the round they form.
inline std::vector<FormedRound> JoinAll(const Job& job, int nodes) {
  std::vector<std::future<FormedRound>> joins;
  for (int id = 0; id < nodes; ++id) joins.push_back(JoinAsync(job, id));
  std::vector<FormedRound> round;
  for (auto& join : joins) round.push_back(Ready(join));
  return round;
}

// The wall clock in epoch milliseconds, as beats and node records carry it.
inline std::int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The job's wall clock (the real one unless it is simulated) in epoch milliseconds.
inline std::int64_t NowMs(const Job& job) { return WallClockMs(*job.clock); }

// Member `rank` of `round` last beat `ms_ago` milliseconds ago (hb_at; negative: in the future).
inline void BeatAt(const Job& job, int round, int rank, std::int64_t ms_ago) {
  job.store->SetString(job.Node(9).Keys().HeartbeatAt(round, rank),
                       std::to_string(NowMs(job) - ms_ago));
}

}  // namespace ddprun::rendezvous::testing
