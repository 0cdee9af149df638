#include "elastic/rank_assignment.h"

#include <catch2/catch.hpp>

using namespace ddprun::elastic;

TEST_CASE("ranks are prefix sums in group-rank order", "[elastic][ranks]") {
  // Heterogeneous nodes given out of order: group 1 has 3 workers, group 0 has 2.
  const auto result = AssignRanks({{"default", 1, 3}, {"default", 0, 2}});
  REQUIRE(result.size() == 2);
  CHECK(result[1].base_global_rank == 0);
  CHECK(result[0].base_global_rank == 2);
  CHECK(result[0].global_world_size == 5);
  CHECK(result[1].global_world_size == 5);
  CHECK(result[0].base_role_rank == 2);
  CHECK(result[0].role_world_size == 5);
}

TEST_CASE("role ranks count only agents of the same role", "[elastic][ranks]") {
  const auto result = AssignRanks({{"trainer", 0, 2}, {"reader", 1, 1}, {"trainer", 2, 2}});
  CHECK(result[2].base_global_rank == 3);
  CHECK(result[2].base_role_rank == 2);
  CHECK(result[2].role_world_size == 4);
  CHECK(result[1].base_role_rank == 0);
  CHECK(result[1].role_world_size == 1);
  CHECK(result[1].global_world_size == 5);
}
