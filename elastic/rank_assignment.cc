#include "elastic/rank_assignment.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace ddprun::elastic {

std::vector<RankAssignment> AssignRanks(const std::vector<RoleInfo>& infos) {
  std::vector<std::size_t> order(infos.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return infos[a].group_rank < infos[b].group_rank;
  });
  std::vector<RankAssignment> result(infos.size());
  int global_offset = 0;
  std::map<std::string, int> role_offsets;
  for (const std::size_t index : order) {
    result[index].base_global_rank = global_offset;
    result[index].base_role_rank = role_offsets[infos[index].role];
    global_offset += infos[index].local_world_size;
    role_offsets[infos[index].role] += infos[index].local_world_size;
  }
  for (std::size_t i = 0; i < infos.size(); ++i) {
    result[i].global_world_size = global_offset;
    result[i].role_world_size = role_offsets[infos[i].role];
  }
  return result;
}

}  // namespace ddprun::elastic
