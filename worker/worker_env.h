// The launcher's contract with a worker: the torchrun environment variables read into a
// struct. Every missing or malformed variable is a UsageError naming it, in one line.
#pragma once
#include <functional>
#include <optional>
#include <string>

namespace ddprun::worker {

struct WorkerEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr;
  int master_port = 0;
  int restart_count = 0;         // TORCHELASTIC_RESTART_COUNT, 0 when unset
  bool use_agent_store = false;  // TORCHELASTIC_USE_AGENT_STORE == "True"
};

// Returns the value of a variable, or nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Reads and validates the variables through `lookup`; throws UsageError.
WorkerEnv ReadWorkerEnv(const EnvLookup& lookup);
// ReadWorkerEnv over this process's environment (getenv).
WorkerEnv ReadWorkerEnvFromProcess();

}  // namespace ddprun::worker
