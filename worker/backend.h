// Chooses and builds a Communicator for this worker: "cpu" (gloo), "nccl" (CUDA device =
// LOCAL_RANK) or "auto" (nccl when every rank can use it, else cpu; the ranks vote through the
// store so they always agree). Errors name the rank and say what to check.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "worker/communicator.h"
#include "worker/worker_env.h"
#include "worker/worker_store.h"

namespace ddprun::worker {

enum class BackendKind { kCpu, kNccl, kAuto };

// "cpu" / "gloo", "nccl" / "cuda", "auto"; throws UsageError.
BackendKind ParseBackend(const std::string& name);

struct CommunicatorConfig {
  BackendKind backend = BackendKind::kAuto;
  std::chrono::milliseconds timeout{60'000};  // rendezvous and every collective
};

// Throws CollectiveTimeout (e.g. "only 4 of WORLD_SIZE=5 ranks joined within 5 s"),
// BackendUnavailable, or std::runtime_error.
std::unique_ptr<Communicator> CreateCommunicator(const WorkerEnv& env, WorkerStore& store,
                                                 const CommunicatorConfig& config);

}  // namespace ddprun::worker
