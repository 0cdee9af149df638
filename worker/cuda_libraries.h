// Where the portable wheel's NCCL module finds NVIDIA's shared libraries at run time (the wheel's
// ELF files name no library outside glibc, so libnccl and libcudart are dlopen'ed, see
// nccl_runtime_forwarders.cc). In order, the first one that loads wins:
//   1. the file named by the library's environment variable (DDPRUN_NCCL_LIBRARY,
//      DDPRUN_CUDART_LIBRARY), and nothing else when it is set;
//   2. each soname through the dynamic loader (LD_LIBRARY_PATH, the ld.so cache);
//   3. the nvidia/* packages of the Python environments around the program: the one whose bin
//      holds the program (a venv, conda, ~/.local), then $VIRTUAL_ENV and $CONDA_PREFIX, each
//      searched in lib/python3*/{site,dist}-packages (where pip puts torch's NCCL and CUDA
//      runtime);
//   4. the library's system folders (the CUDA toolkit's /usr/local/cuda/lib64).
#pragma once
#include <string>
#include <vector>

#include "worker/worker_env.h"  // EnvLookup

namespace ddprun::worker {

struct CudaLibrary {
  std::string env_var;                    // DDPRUN_NCCL_LIBRARY
  std::vector<std::string> sonames;       // newest first: libcudart.so.13, libcudart.so.12
  std::vector<std::string> package_dirs;  // under site-packages: nvidia/nccl/lib
  std::vector<std::string> system_dirs;   // /usr/local/cuda/lib64
};

const CudaLibrary& NcclLibrary();
const CudaLibrary& CudartLibrary();

// The files (existing ones, beyond the bare sonames of step 2) to try in order. `program_dir` is
// the folder of the running program; `env` reads the environment.
std::vector<std::string> CudaLibraryCandidates(const CudaLibrary& library,
                                               const std::string& program_dir,
                                               const EnvLookup& env);

// The handle of the first candidate that loads (RTLD_NOW | RTLD_GLOBAL: NCCL and the CUDA runtime
// share one process-wide CUDA context), or nullptr with `reason` saying what was tried and
// how to fix it.
void* LoadCudaLibrary(const CudaLibrary& library, std::string& reason);

}  // namespace ddprun::worker
