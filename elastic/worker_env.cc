#include "elastic/worker_env.h"

#include <boost/algorithm/string.hpp>
#include <vector>

#include "common/env_names.h"
#include "common/errors.h"

namespace ddprun::elastic {
namespace {

// CUDA_VISIBLE_DEVICES as a list: split at commas, blanks around each item dropped.
std::vector<std::string> VisibleDevices(const std::string& text) {
  std::vector<std::string> devices;
  boost::algorithm::split(devices, text, boost::algorithm::is_any_of(","));
  for (auto& device : devices)
    boost::algorithm::trim_if(device, boost::algorithm::is_any_of(" \t"));
  return devices;
}

// --virtual_local_rank: each worker sees exactly one GPU, the local_rank-th visible one.
std::string VirtualVisibleDevice(const Environment& base, int local_rank) {
  const auto found = base.find(env::kCudaVisibleDevices);
  if (found == base.end()) return std::to_string(local_rank);
  const auto devices = VisibleDevices(found->second);
  if (local_rank >= static_cast<int>(devices.size())) {
    throw UsageError("local_rank " + std::to_string(local_rank) +
                     " exceeds available GPUs in CUDA_VISIBLE_DEVICES=" + found->second +
                     "; lower --nproc_per_node or widen CUDA_VISIBLE_DEVICES");
  }
  return devices[local_rank];
}

// One setting known under two names: the current name gets `value`, unless the user set
// either. (Setting the older name too makes current PyTorch warn in every worker that it is
// deprecated.)
void SetUnlessEitherSet(Environment& env, const char* older, const char* current,
                        const std::string& value) {
  if (env.count(older) != 0 || env.count(current) != 0) return;
  env[current] = value;
}

}  // namespace

void AddDiagnosticsEnv(Environment& env, const WorkerDiagnostics& diagnostics) {
  env.try_emplace(env::kPythonFaultHandler, "1");
  SetUnlessEitherSet(env, env::kNcclTraceBufferSize, env::kFrBufferSize, "2000");
  SetUnlessEitherSet(env, env::kNcclDumpOnTimeout, env::kFrDumpOnTimeout, "1");
  if (!diagnostics.rank_dir.empty()) {
    SetUnlessEitherSet(env, env::kNcclDebugInfoTempFile, env::kFrDumpTempFile,
                       diagnostics.rank_dir + "/nccl_trace_rank_");
  }
  if (!diagnostics.pulse_file.empty()) env[env::kPulseFile] = diagnostics.pulse_file;
  if (!diagnostics.timer_file.empty()) env[env::kTimerFile] = diagnostics.timer_file;
}

Environment BuildWorkerEnv(const Environment& base, const WorkerGroupEnv& group, int local_rank,
                           const std::string& error_file) {
  Environment env = base;
  env.erase(env::kRdzvToken);  // the agents' secret: user code has no use for it, and logs it
  env[env::kLocalRank] = std::to_string(group.virtual_local_rank ? 0 : local_rank);
  env[env::kRank] = std::to_string(group.ranks.base_global_rank + local_rank);
  env[env::kGroupRank] = std::to_string(group.group_rank);
  env[env::kRoleRank] = std::to_string(group.ranks.base_role_rank + local_rank);
  env[env::kRoleName] = group.role;
  env[env::kLocalWorldSize] = std::to_string(group.local_world_size);
  env[env::kWorldSize] = std::to_string(group.ranks.global_world_size);
  env[env::kGroupWorldSize] = std::to_string(group.group_world_size);
  env[env::kRoleWorldSize] = std::to_string(group.ranks.role_world_size);
  env[env::kMasterAddr] = group.master_addr;
  env[env::kMasterPort] = std::to_string(group.master_port);
  env[env::kRestartCount] = std::to_string(group.restart_count);
  env[env::kMaxRestarts] = std::to_string(group.max_restarts);
  env[env::kRunId] = group.run_id;
  env[env::kUseAgentStore] = group.use_agent_store ? "True" : "False";
  env[env::kErrorFile] = error_file;
  env.try_emplace(env::kNcclAsyncErrorHandling, "1");
  if (group.virtual_local_rank) {
    env[env::kCudaVisibleDevices] = VirtualVisibleDevice(base, local_rank);
  }
  return env;
}

bool ApplyOmpDefault(Environment& launcher_env, int nproc_per_node) {
  if (nproc_per_node <= 1 || launcher_env.count(env::kOmpNumThreads) != 0) return false;
  launcher_env[env::kOmpNumThreads] = "1";
  return true;
}

const char* OmpWarningBanner() {
  return "*****************************************\n"
         "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to "
         "avoid your system being overloaded, please further tune the variable for optimal "
         "performance in your application as needed. \n"
         "*****************************************";
}

}  // namespace ddprun::elastic
