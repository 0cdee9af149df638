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
// Evidence of a hang (issue 24): every thread's stack on SIGABRT, NCCL's flight recorder (set
// under its current TORCH_FR_ names; the older TORCH_NCCL_ ones are read to respect the user's
// choice), torchelastic's file timer and ddprun's pulse FIFO.
inline constexpr const char* kPythonFaultHandler = "PYTHONFAULTHANDLER";
inline constexpr const char* kNcclTraceBufferSize = "TORCH_NCCL_TRACE_BUFFER_SIZE";
inline constexpr const char* kFrBufferSize = "TORCH_FR_BUFFER_SIZE";
inline constexpr const char* kNcclDumpOnTimeout = "TORCH_NCCL_DUMP_ON_TIMEOUT";
inline constexpr const char* kFrDumpOnTimeout = "TORCH_FR_DUMP_ON_TIMEOUT";
inline constexpr const char* kNcclDebugInfoTempFile = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE";
inline constexpr const char* kFrDumpTempFile = "TORCH_FR_DUMP_TEMP_FILE";
inline constexpr const char* kEnableFileTimer = "TORCHELASTIC_ENABLE_FILE_TIMER";
inline constexpr const char* kTimerFile = "TORCHELASTIC_TIMER_FILE";
inline constexpr const char* kPulseFile = "DDPRUN_PULSE_FILE";
// The rendezvous token (docs/reliability.md), read by ddprun and ddprun-store; the token itself
// is removed from the workers' environment.
inline constexpr const char* kRdzvToken = "DDPRUN_RDZV_TOKEN";
inline constexpr const char* kRdzvTokenFile = "DDPRUN_RDZV_TOKEN_FILE";

}  // namespace ddprun::env
