#include "elastic/learned_hang_timeout.h"

#include "common/integer.h"

namespace ddprun::elastic {
namespace {

using std::chrono::milliseconds;

std::optional<milliseconds> Decode(const store::Bytes& bytes) {
  const auto value = ParseInt(store::Store::ToString(bytes));
  if (!value || *value <= 0) return std::nullopt;
  return milliseconds(*value);
}

}  // namespace

std::optional<milliseconds> ShareLearnedHangTimeout(store::Store& job_store,
                                                    std::optional<milliseconds> mine) {
  const std::string key = kLearnedHangTimeoutKey;
  store::Bytes current = job_store.Check({key}) ? job_store.Get(key) : store::Bytes{};
  // Bounded: each failed swap means another node raised the value, and values only rise.
  for (int tries = 0; tries < 16; ++tries) {
    const auto stored = Decode(current);
    if (!mine || (stored && *stored >= *mine)) return stored ? stored : mine;
    const store::Bytes desired = store::Store::ToBytes(std::to_string(mine->count()));
    const store::Bytes now = job_store.CompareSet(key, current, desired);
    if (now == desired) return mine;
    current = now;
  }
  return mine;
}

}  // namespace ddprun::elastic
