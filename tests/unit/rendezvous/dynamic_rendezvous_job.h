// Simulated nodes of one job for the dynamic rendezvous tests: each node a DynamicRendezvous
// over one shared in-memory store (the TCP store's exact key semantics), joins on threads of
// their own, and a bound on every wait.
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
  return std::async(std::launch::async, [&job, id, previous, nproc] {
    DynamicRendezvous node = job.Node(id, nproc);
    return node.Join(previous);
  });
}

inline FormedRound Ready(std::future<FormedRound>& future) {
  REQUIRE(future.wait_for(kPromptly) == std::future_status::ready);
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

// Member `rank` of `round` last beat `ms_ago` milliseconds ago (hb_at; negative: in the future).
inline void BeatAt(const Job& job, int round, int rank, std::int64_t ms_ago) {
  job.store->SetString(job.Node(9).RoundKey(round, "hb_at/" + std::to_string(rank)),
                       std::to_string(NowMs() - ms_ago));
}

}  // namespace ddprun::rendezvous::testing
