#include "store/store.h"

namespace ddprun::store {

std::string WaitTimeoutMessage(const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout) {
  std::string shown;
  for (std::size_t i = 0; i < keys.size() && i < 4; ++i) shown += (i ? ", " : "") + keys[i];
  if (keys.size() > 4) shown += ", ...";
  return "wait timeout after " + std::to_string(timeout.count()) + "ms, keys: " + shown;
}

std::vector<Bytes> Store::MultiGet(const std::vector<std::string>& keys) {
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const auto& key : keys) values.push_back(Get(key));
  return values;
}

void Store::MultiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  for (std::size_t i = 0; i < keys.size() && i < values.size(); ++i) Set(keys[i], values[i]);
}

void Store::Append(const std::string& key, const Bytes& value) {
  Bytes current = Check({key}) ? Get(key) : Bytes{};
  current.insert(current.end(), value.begin(), value.end());
  Set(key, current);
}

void Store::Barrier(const std::string& key, std::int64_t world_size,
                    std::chrono::milliseconds timeout) {
  const std::string done_key = key + "/done";
  if (Add(key, 1) == world_size) Set(done_key, ToBytes("1"));
  Wait({done_key}, timeout);
}

void Store::SetString(const std::string& key, const std::string& value) {
  Set(key, ToBytes(value));
}

std::string Store::GetString(const std::string& key) { return ToString(Get(key)); }

}  // namespace ddprun::store
