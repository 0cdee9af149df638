// Built into ddprun_worker_tests only (the shared unit-test glob sees this file too).
#ifdef DDPRUN_WORKER_TESTS
#include "worker/check_values.h"

#include <catch2/catch.hpp>
#include <cstdint>

namespace ddprun::worker {
namespace {

TEST_CASE("pattern sums equal the brute-force sums", "[worker]") {
  for (int world : {1, 2, 3, 4, 8, 97, 100}) {
    PatternSums sums(world);
    for (std::size_t i = 0; i < 300; ++i) {
      std::int64_t expected = 0;
      for (int rank = 0; rank < world; ++rank) expected += PatternValue(rank, i);
      REQUIRE(sums.At(i) == expected);
    }
  }
}

TEST_CASE("pattern values are small, signed and differ between ranks", "[worker]") {
  bool negative = false;
  for (std::size_t i = 0; i < 200; ++i) {
    auto value = PatternValue(1, i);
    CHECK(value >= -48);
    CHECK(value <= 48);
    negative = negative || value < 0;
  }
  CHECK(negative);
  CHECK(PatternValue(0, 5) != PatternValue(1, 5));
}

TEST_CASE("CheckPattern accepts the exact sums and reports the first mismatch", "[worker]") {
  const int world = 4;
  PatternSums sums(world);
  std::vector<float> result(1000);
  for (std::size_t i = 0; i < result.size(); ++i) result[i] = static_cast<float>(sums.At(i));
  CHECK_FALSE(CheckPattern(result, world).has_value());
  result[17] += 1;
  result[900] -= 2;
  auto mismatch = CheckPattern(result, world);
  REQUIRE(mismatch.has_value());
  CHECK(mismatch->index == 17);
  CHECK(mismatch->expected == sums.At(17));
  CHECK(mismatch->actual == sums.At(17) + 1);
  CHECK(mismatch->wrong == 2);
}

}  // namespace
}  // namespace ddprun::worker
#endif  // DDPRUN_WORKER_TESTS
