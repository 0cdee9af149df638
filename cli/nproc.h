// Resolution of --nproc_per_node: a positive integer, "cpu" (online CPUs), "gpu" (CUDA devices)
// or "auto" (GPUs if any, else CPUs). CUDA is reached through dlopen("libcuda.so.1") only, so
// the binary has no link-time CUDA dependency.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace ddprun::cli {

struct GpuCount {
  int count = 0;
  std::string reason;  // why count is 0 (no driver, cuInit failed, no device)
};

// Injectable so that tests need no CUDA.
using GpuCounter = std::function<GpuCount()>;

// Counts CUDA devices with cuInit(0) + cuDeviceGetCount through the driver library.
GpuCount CudaDeviceCount();
// Every CUDA device's PCI bus id ("0000:3B:00.0"), by device index, through cuInit(0),
// cuDeviceGetCount, cuDeviceGet and cuDeviceGetPCIBusId; the driver applies
// CUDA_VISIBLE_DEVICES. Empty, with the reason, when there is no driver or no device.
struct GpuBusIds {
  int devices = 0;               // what cuDeviceGetCount reported
  std::vector<std::string> ids;  // every device's, or none (then `reason` says why)
  std::string reason;
};
GpuBusIds CudaPciBusIds();

// Number of online CPUs, at least 1.
int OnlineCpuCount();

// Resolves `text` given as `name` ("--nproc_per_node" or "PET_NPROC_PER_NODE"). Throws
// UsageError "<name>=<text>: ..." for anything else, and for "gpu" when no GPU is found.
int ResolveNprocPerNode(const std::string& text, const std::string& name, const GpuCounter& gpus);

}  // namespace ddprun::cli
