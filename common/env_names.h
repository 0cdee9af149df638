// Names of the environment variables torchrun gives its workers, and ddprun's own it reads.
#pragma once

namespace ddprun::env {

inline constexpr const char* kRank = "RANK";
inline constexpr const char* kLocalRank = "LOCAL_RANK";
inline constexpr const char* kWorldSize = "WORLD_SIZE";
inline constexpr const char* kLocalWorldSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kGroupRank = "GROUP_RANK";
inline constexpr const char* kGroupWorldSize = "GROUP_WORLD_SIZE";
inline constexpr const char* kRoleName = "ROLE_NAME";
inline constexpr const char* kRoleRank = "ROLE_RANK";
inline constexpr const char* kRoleWorldSize = "ROLE_WORLD_SIZE";
inline constexpr const char* kMasterAddr = "MASTER_ADDR";
inline constexpr const char* kMasterPort = "MASTER_PORT";
inline constexpr const char* kRestartCount = "TORCHELASTIC_RESTART_COUNT";
inline constexpr const char* kMaxRestarts = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr const char* kRunId = "TORCHELASTIC_RUN_ID";
inline constexpr const char* kUseAgentStore = "TORCHELASTIC_USE_AGENT_STORE";
inline constexpr const char* kErrorFile = "TORCHELASTIC_ERROR_FILE";
inline constexpr const char* kSignalsToHandle = "TORCHELASTIC_SIGNALS_TO_HANDLE";
inline constexpr const char* kOmpNumThreads = "OMP_NUM_THREADS";
inline constexpr const char* kNcclAsyncErrorHandling = "TORCH_NCCL_ASYNC_ERROR_HANDLING";
inline constexpr const char* kLogLinePrefixTemplate = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE";
inline constexpr const char* kCudaVisibleDevices = "CUDA_VISIBLE_DEVICES";
// The rendezvous token (docs/reliability.md), read by ddprun and ddprun-store; the token itself
// is removed from the workers' environment.
inline constexpr const char* kRdzvToken = "DDPRUN_RDZV_TOKEN";
inline constexpr const char* kRdzvTokenFile = "DDPRUN_RDZV_TOKEN_FILE";

}  // namespace ddprun::env
