// The C entry points of libddprun_worker_nccl.so, the NCCL backend built as a separately
// loaded module so that nothing else links CUDA or NCCL. Neither entry point throws: a
// failure returns -1 / nullptr with a one-line reason copied into `error`.
#pragma once
#include <chrono>
#include <cstddef>

#include "store/store.h"
#include "worker/communicator.h"

namespace ddprun::worker {

struct NcclPluginArgs {
  int rank = 0;
  int size = 1;
  int device = 0;                 // CUDA device ordinal (LOCAL_RANK)
  store::Store* store = nullptr;  // a fresh scope; the ncclUniqueId is exchanged here
  std::chrono::milliseconds timeout{60'000};
};

}  // namespace ddprun::worker

extern "C" {
// Number of visible CUDA devices, or -1 (e.g. "no CUDA driver").
int DdprunNcclDeviceCount(char* error, std::size_t error_len);
// A new NcclCommunicator owned by the caller (delete it normally), or nullptr; the reason
// starts with kDdprunNcclTimeoutTag when a deadline passed.
ddprun::worker::Communicator* DdprunNcclCreate(const ddprun::worker::NcclPluginArgs* args,
                                               char* error, std::size_t error_len);
}

inline constexpr const char* kDdprunNcclPluginName = "libddprun_worker_nccl.so";
inline constexpr const char* kDdprunNcclTimeoutTag = "timeout: ";
