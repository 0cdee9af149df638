#include "worker/worker_env.h"

#include <cstdlib>

#include "common/env_names.h"
#include "common/errors.h"
#include "common/integer.h"

namespace ddprun::worker {
namespace {

constexpr const char* kHint = " (run the program under ddprun or torchrun)";

std::string Required(const EnvLookup& lookup, const char* name) {
  auto value = lookup(name);
  if (!value) throw UsageError(std::string(name) + " is not set" + kHint);
  if (value->empty()) throw UsageError(std::string(name) + " is empty" + kHint);
  return *value;
}

int IntIn(const char* name, const std::string& text, int min, int max) {
  const auto value = ParseInt(text);
  if (!value) throw UsageError(std::string(name) + "=" + NotAnInteger(text));
  if (*value < min || *value > max) {
    throw UsageError(std::string(name) + "=" + text + " is out of range " + std::to_string(min) +
                     ".." + std::to_string(max));
  }
  return static_cast<int>(*value);
}

int RequiredInt(const EnvLookup& lookup, const char* name, int min, int max) {
  return IntIn(name, Required(lookup, name), min, max);
}

void CheckBelow(const char* name, int value, const char* limit_name, int limit) {
  if (value >= limit) {
    throw UsageError(std::string(name) + "=" + std::to_string(value) + " must be less than " +
                     limit_name + "=" + std::to_string(limit));
  }
}

bool ParseUseAgentStore(const EnvLookup& lookup) {
  auto value = lookup(env::kUseAgentStore);
  if (!value || value->empty()) return false;
  if (*value == "True") return true;
  if (*value == "False") return false;
  throw UsageError(std::string(env::kUseAgentStore) + "='" + *value + "' must be True or False");
}

}  // namespace

WorkerEnv ReadWorkerEnv(const EnvLookup& lookup) {
  constexpr int kMaxInt = 1 << 30;
  WorkerEnv out;
  out.world_size = RequiredInt(lookup, env::kWorldSize, 1, kMaxInt);
  out.rank = RequiredInt(lookup, env::kRank, 0, kMaxInt);
  CheckBelow(env::kRank, out.rank, env::kWorldSize, out.world_size);
  out.local_world_size = RequiredInt(lookup, env::kLocalWorldSize, 1, kMaxInt);
  if (out.local_world_size > out.world_size) {
    throw UsageError(std::string(env::kLocalWorldSize) + "=" +
                     std::to_string(out.local_world_size) + " exceeds " + env::kWorldSize + "=" +
                     std::to_string(out.world_size));
  }
  out.local_rank = RequiredInt(lookup, env::kLocalRank, 0, kMaxInt);
  CheckBelow(env::kLocalRank, out.local_rank, env::kLocalWorldSize, out.local_world_size);
  out.master_addr = Required(lookup, env::kMasterAddr);
  out.master_port = RequiredInt(lookup, env::kMasterPort, 1, 65535);
  auto restart = lookup(env::kRestartCount);
  if (restart && !restart->empty()) {
    out.restart_count = IntIn(env::kRestartCount, *restart, 0, kMaxInt);
  }
  out.use_agent_store = ParseUseAgentStore(lookup);
  return out;
}

WorkerEnv ReadWorkerEnvFromProcess() {
  return ReadWorkerEnv([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace ddprun::worker
