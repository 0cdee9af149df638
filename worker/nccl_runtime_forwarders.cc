// The CUDA runtime and NCCL functions nccl_communicator.cc calls, defined for the portable
// wheel's NCCL module (DDPRUN_NCCL_DLOPEN) as forwarders to libcudart and libnccl loaded on first
// use (cuda_libraries.h says where from), so that the module's ELF names no library outside
// glibc and the wheel works with whichever NCCL torch installed. When a library cannot be loaded,
// every function of it fails (cudaErrorSharedObjectInitFailed, ncclSystemError) and its
// *GetErrorString returns the reason: what was looked for, where, and the fix.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <mutex>  // std::call_once
#include <string>

#include "worker/cuda_libraries.h"

namespace ddprun::worker {
namespace {

struct LoadedLibrary {
  void* handle = nullptr;
  std::string reason;
};

LoadedLibrary& Loaded(const CudaLibrary& library) {
  static LoadedLibrary cudart;
  static LoadedLibrary nccl;
  static std::once_flag cudart_once;
  static std::once_flag nccl_once;
  const bool is_nccl = &library == &NcclLibrary();
  LoadedLibrary& loaded = is_nccl ? nccl : cudart;
  std::call_once(is_nccl ? nccl_once : cudart_once,
                 [&] { loaded.handle = LoadCudaLibrary(library, loaded.reason); });
  return loaded;
}

// The function `name` of `library`, or nullptr when the library (or the function) is missing;
// the lookup is made once per function.
void* Resolve(const CudaLibrary& library, const char* name) {
  LoadedLibrary& loaded = Loaded(library);
  if (loaded.handle == nullptr) return nullptr;
  void* symbol = dlsym(loaded.handle, name);
  if (symbol == nullptr && loaded.reason.empty()) {
    loaded.reason = std::string(library.sonames.front()) + " lacks " + name + " (too old?)";
  }
  return symbol;
}

const char* Reason(const CudaLibrary& library) {
  const std::string& reason = Loaded(library).reason;
  return reason.empty() ? "not loaded" : reason.c_str();
}

}  // namespace
}  // namespace ddprun::worker

// One forwarder: resolves `name` in the library once, then calls it; `failure` when it is missing.
#define DDPRUN_FORWARD(library, failure, ret, name, params, args)                   \
  extern "C" ret name params {                                                      \
    using Fn = ret(*) params;                                                       \
    static Fn fn = reinterpret_cast<Fn>(ddprun::worker::Resolve(library(), #name)); \
    if (fn == nullptr) return failure;                                              \
    return fn args;                                                                 \
  }

#define DDPRUN_CUDART(ret, name, params, args)                                              \
  DDPRUN_FORWARD(ddprun::worker::CudartLibrary, cudaErrorSharedObjectInitFailed, ret, name, \
                 params, args)
#define DDPRUN_NCCL(ret, name, params, args) \
  DDPRUN_FORWARD(ddprun::worker::NcclLibrary, ncclSystemError, ret, name, params, args)

DDPRUN_CUDART(cudaError_t, cudaGetDeviceCount, (int* count), (count))
DDPRUN_CUDART(cudaError_t, cudaSetDevice, (int device), (device))
DDPRUN_CUDART(cudaError_t, cudaMalloc, (void** pointer, size_t size), (pointer, size))
DDPRUN_CUDART(cudaError_t, cudaFree, (void* pointer), (pointer))
DDPRUN_CUDART(cudaError_t, cudaMemset, (void* pointer, int value, size_t count),
              (pointer, value, count))
DDPRUN_CUDART(cudaError_t, cudaMemcpy,
              (void* dst, const void* src, size_t count, enum cudaMemcpyKind kind),
              (dst, src, count, kind))
DDPRUN_CUDART(cudaError_t, cudaStreamCreateWithFlags, (cudaStream_t * stream, unsigned int flags),
              (stream, flags))
DDPRUN_CUDART(cudaError_t, cudaStreamQuery, (cudaStream_t stream), (stream))
DDPRUN_CUDART(cudaError_t, cudaStreamDestroy, (cudaStream_t stream), (stream))
DDPRUN_FORWARD(ddprun::worker::CudartLibrary,
               ddprun::worker::Reason(ddprun::worker::CudartLibrary()), const char*,
               cudaGetErrorString, (cudaError_t error), (error))

DDPRUN_NCCL(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id), (id))
DDPRUN_NCCL(ncclResult_t, ncclCommInitRankConfig,
            (ncclComm_t * comm, int ranks, ncclUniqueId id, int rank, ncclConfig_t* config),
            (comm, ranks, id, rank, config))
DDPRUN_NCCL(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* error),
            (comm, error))
DDPRUN_NCCL(ncclResult_t, ncclAllReduce,
            (const void* send, void* receive, size_t count, ncclDataType_t type, ncclRedOp_t op,
             ncclComm_t comm, cudaStream_t stream),
            (send, receive, count, type, op, comm, stream))
DDPRUN_NCCL(ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))
DDPRUN_NCCL(ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))
DDPRUN_FORWARD(ddprun::worker::NcclLibrary, ddprun::worker::Reason(ddprun::worker::NcclLibrary()),
               const char*, ncclGetErrorString, (ncclResult_t result), (result))
