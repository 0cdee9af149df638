// Global and role ranks from each agent's local world size, exactly as torchrun's
// SimpleElasticAgent._assign_worker_ranks computes them (prefix sums in group-rank order).
#pragma once
#include <string>
#include <vector>

namespace ddprun::elastic {

// What one agent announces in the rendezvous round.
struct RoleInfo {
  std::string role;
  int group_rank = 0;
  int local_world_size = 0;
};

// What one agent needs to compute its workers' ranks.
struct RankAssignment {
  int base_global_rank = 0;
  int global_world_size = 0;
  int base_role_rank = 0;
  int role_world_size = 0;
  bool operator==(const RankAssignment&) const = default;
};

// One assignment per entry of `infos` (any order; walked in group-rank order).
std::vector<RankAssignment> AssignRanks(const std::vector<RoleInfo>& infos);

}  // namespace ddprun::elastic
