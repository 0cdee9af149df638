// The known values the check and perf programs allreduce: rank r contributes small signed
// integers at element i, so every sum is exact in float (|sum| <= 48 * world size), and the
// expected result follows from the world size alone.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace ddprun::worker {

inline constexpr std::size_t kPatternPeriod = 97;

// The value at phase p = (31 i) mod 97 of rank r: ((p + 7 r) mod 97) - 48, in -48..48.
inline std::int64_t PhaseValue(std::size_t phase, int rank) {
  return static_cast<std::int64_t>((phase + static_cast<std::size_t>(rank) * 7) % kPatternPeriod) -
         48;
}

inline std::size_t PatternPhase(std::size_t index) { return (index * 31) % kPatternPeriod; }

inline std::int64_t PatternValue(int rank, std::size_t index) {
  return PhaseValue(PatternPhase(index), rank);
}

// Sums over ranks 0..world_size-1, one per phase of the pattern.
class PatternSums {
 public:
  explicit PatternSums(int world_size) {
    for (std::size_t phase = 0; phase < kPatternPeriod; ++phase) {
      for (int rank = 0; rank < world_size; ++rank) sums_[phase] += PhaseValue(phase, rank);
    }
  }
  std::int64_t At(std::size_t index) const { return sums_[PatternPhase(index)]; }

 private:
  std::array<std::int64_t, kPatternPeriod> sums_{};
};

template <typename T>
std::vector<T> PatternFor(int rank, std::size_t count) {
  std::vector<T> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<T>(PatternValue(rank, i));
  return values;
}

struct Mismatch {
  std::size_t index = 0;
  double expected = 0;
  double actual = 0;
  std::size_t wrong = 0;  // how many elements differ in all
};

// Compares an allreduce result with the exact sums; nullopt when all match.
template <typename T>
std::optional<Mismatch> CheckPattern(const std::vector<T>& result, int world_size) {
  PatternSums sums(world_size);
  std::optional<Mismatch> first;
  for (std::size_t i = 0; i < result.size(); ++i) {
    auto expected = static_cast<T>(sums.At(i));
    if (result[i] == expected) continue;
    if (!first) first = Mismatch{i, static_cast<double>(expected), static_cast<double>(result[i])};
    ++first->wrong;
  }
  return first;
}

}  // namespace ddprun::worker
