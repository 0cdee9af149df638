// Seeded churn schedules for ddprun-sim (pure: (nodes, seed, index) -> the same plan). A plan is
// the job's shape (MIN..MAX of `nodes`, which start when, the step target) and its fault
// episodes, one after the other, each held then healed, as tests/chaos/schedule.py's: kill-agent
// (one node, 10 % at once, the store host with others; returning after the hold or not), pause
// (past the heartbeat timeout, or a blip), partition (a minority, the store host's side),
// oneway-in / oneway-out, kill-worker (spends a restart). Spares start while a round seals, and
// part of the MAX nodes start late (a scale-up to MAX). Index 0 of every seed is the clean
// schedule: no fault. About a third of the others end with a slow network (delay: every call
// of some nodes late by 20-150 ms each way), and about a third with a graceful leave (SIGTERM:
// one node or a tenth of them declare themselves gone and exit), each drawn from a stream of
// its own and placed after the others, so that adding them left every earlier episode of every
// schedule as it was.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ddprun::sim {

struct Action {
  enum class Kind { kStart, kKill, kPause, kResume, kCut, kHeal, kFailWorker, kDelay, kLeave };
  double at = 0;  // simulated seconds
  Kind kind = Kind::kStart;
  std::vector<int> nodes;
  bool in = false;  // kCut: which way packets are dropped, seen from `nodes`
  bool out = false;
  int fault = -1;    // the episode it injects or heals (-1: none)
  int delay_ms = 0;  // kDelay: each call's latency each way (0: none again)
};

// One fault episode, as the chaos history records it (its times filled in by the run).
struct Episode {
  std::string kind;  // the chaos checker's kinds
  std::vector<int> hosts;
  double inject = 0;
  double heal = 0;
  bool returns = false;  // kill-agent: the machines come back at the heal
  int ms = 0;            // delay: the latency
};

struct Plan {
  int nodes = 0;
  int min_nodes = 0;
  int max_nodes = 0;
  int target_steps = 0;
  std::vector<Action> actions;  // in time order
  std::vector<Episode> episodes;
  std::string Describe() const;
};

Plan MakePlan(int nodes, std::uint64_t seed, int index);

}  // namespace ddprun::sim
