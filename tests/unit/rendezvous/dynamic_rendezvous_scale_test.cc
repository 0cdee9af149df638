// The dynamic rendezvous at the scale of a large job, in the simulation of
// tests/unit/store/simulated_store.h: 1,024 simulated nodes form one round. Hidden ([.]): a
// measurement (it prints the real time), run by name.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <set>
#include <vector>

#include "rendezvous/dynamic_rendezvous.h"
#include "tests/unit/rendezvous/dynamic_rendezvous_job.h"

namespace {

using ddprun::rendezvous::FormedRound;
using ddprun::rendezvous::testing::Job;
using ddprun::rendezvous::testing::JoinAsync;
using ddprun::store::testing::Simulation;
using std::chrono::milliseconds;

}  // namespace

namespace {

struct Measured {
  std::chrono::milliseconds real{0};
  std::chrono::milliseconds simulated{0};
  std::uint64_t switches = 0;
};

// `nodes` nodes of a job of min_nodes..max_nodes join at once; each must be in one round of
// `nodes` members.
Measured JoinAtScale(int nodes, int min_nodes, int max_nodes) {
  const auto started = std::chrono::steady_clock::now();
  Measured measured;
  {
    Job job;
    Simulation sim(1);
    job.Simulate(sim);
    job.min_nodes = min_nodes;
    job.max_nodes = max_nodes;
    job.join_timeout = milliseconds{600'000};
    std::vector<std::future<FormedRound>> joins;
    for (int id = 0; id < nodes; ++id) joins.push_back(JoinAsync(job, id));
    std::set<int> ranks;
    for (auto& join : joins) {
      const FormedRound view = sim.Ready(join, milliseconds{600'000});
      CHECK(view.group_world_size == nodes);
      ranks.insert(view.group_rank);
    }
    CHECK(ranks.size() == static_cast<std::size_t>(nodes));
    measured.switches = sim.Switches();
    measured.simulated = std::chrono::duration_cast<milliseconds>(sim.Elapsed());
  }
  measured.real =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started);
  WARN(nodes << " of " << min_nodes << ".." << max_nodes << " nodes joined in "
             << measured.real.count() << " ms real, " << measured.simulated.count()
             << " ms simulated, " << measured.switches << " switches");
  return measured;
}

}  // namespace

TEST_CASE("1,024 simulated nodes form one round", "[.][dynamic_rendezvous][scale]") {
  JoinAtScale(1'024, 1'024, 1'024);
}

TEST_CASE("1,000 simulated nodes of at most 1,024 form one round after the last call",
          "[.][dynamic_rendezvous][scale]") {
  CHECK(JoinAtScale(1'000, 512, 1'024).simulated >= milliseconds{100});  // the last call
}
