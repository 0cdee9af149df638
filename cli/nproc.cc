#include "cli/nproc.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <optional>
#include <thread>

#include "common/errors.h"
#include "common/integer.h"

namespace ddprun::cli {
namespace {

// The driver entry points used, with CUresult as int (0 is CUDA_SUCCESS), CUdevice as int.
using CuInitFn = int (*)(unsigned int);
using CuDeviceGetCountFn = int (*)(int*);
using CuGetErrorStringFn = int (*)(int, const char**);
using CuDeviceGetFn = int (*)(int*, int);
using CuDeviceGetPciBusIdFn = int (*)(char*, int, int);

std::string CudaErrorText(void* library, int code) {
  const char* text = nullptr;
  auto error_string = reinterpret_cast<CuGetErrorStringFn>(dlsym(library, "cuGetErrorString"));
  if (error_string == nullptr || error_string(code, &text) != 0 || text == nullptr) {
    return "CUDA error " + std::to_string(code);
  }
  return std::string(text) + " (CUDA error " + std::to_string(code) + ")";
}

std::optional<int> ParsePositive(const std::string& text) {
  const auto value = ParseInt(text);
  if (!value || *value <= 0 || *value > INT_MAX) return std::nullopt;
  return static_cast<int>(*value);
}

int RequireGpus(const std::string& text, const std::string& name, const GpuCounter& gpus) {
  const GpuCount found = gpus();
  if (found.count > 0) return found.count;
  const std::string reason = found.reason.empty() ? "0 devices" : found.reason;
  throw UsageError(name + "=" + text + ": no CUDA GPU found (" + reason +
                   "); use an integer or cpu");
}

void* CudaDriver() {
  // Deliberately never dlclose'd: unloading the CUDA driver is not supported.
  return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
}

// Device `index`'s PCI bus id, or "" with `reason` set.
std::string BusIdOf(void* library, int index, std::string& reason) {
  auto get = reinterpret_cast<CuDeviceGetFn>(dlsym(library, "cuDeviceGet"));
  auto bus_id = reinterpret_cast<CuDeviceGetPciBusIdFn>(dlsym(library, "cuDeviceGetPCIBusId"));
  if (get == nullptr || bus_id == nullptr) {
    reason = "libcuda.so.1 lacks cuDeviceGetPCIBusId";
    return "";
  }
  int device = 0;
  char text[64] = {};
  int code = get(&device, index);
  if (code == 0) code = bus_id(text, static_cast<int>(sizeof text), device);
  if (code != 0) reason = "cuDeviceGetPCIBusId: " + CudaErrorText(library, code);
  return code == 0 ? text : "";
}

}  // namespace

GpuCount CudaDeviceCount() {
  void* library = CudaDriver();
  if (library == nullptr) return {0, std::string("cannot load libcuda.so.1: ") + dlerror()};
  auto init = reinterpret_cast<CuInitFn>(dlsym(library, "cuInit"));
  auto get_count = reinterpret_cast<CuDeviceGetCountFn>(dlsym(library, "cuDeviceGetCount"));
  if (init == nullptr || get_count == nullptr) return {0, "libcuda.so.1 lacks cuInit"};
  if (const int code = init(0); code != 0) return {0, "cuInit: " + CudaErrorText(library, code)};
  int count = 0;
  if (const int code = get_count(&count); code != 0) {
    return {0, "cuDeviceGetCount: " + CudaErrorText(library, code)};
  }
  return {count, count > 0 ? "" : "the driver reports 0 devices"};
}

GpuBusIds CudaPciBusIds() {
  const GpuCount count = CudaDeviceCount();  // cuInit, once per process in the driver
  GpuBusIds found{count.count, {}, count.reason};
  void* library = count.count > 0 ? CudaDriver() : nullptr;  // loaded: CudaDeviceCount found GPUs
  for (int index = 0; index < count.count; ++index) {
    const std::string id = BusIdOf(library, index, found.reason);
    if (id.empty()) return {count.count, {}, found.reason};
    found.ids.push_back(id);
  }
  return found;
}

int OnlineCpuCount() {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online > 0) return static_cast<int>(online);
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware > 0 ? static_cast<int>(hardware) : 1;
}

int ResolveNprocPerNode(const std::string& text, const std::string& name, const GpuCounter& gpus) {
  if (const auto value = ParsePositive(text)) return *value;
  if (text == "cpu") return OnlineCpuCount();
  if (text == "gpu") return RequireGpus(text, name, gpus);
  if (text == "auto") {
    const int count = gpus().count;
    return count > 0 ? count : OnlineCpuCount();
  }
  throw UsageError(name + "=" + text + ": must be a positive integer, auto, cpu or gpu");
}

}  // namespace ddprun::cli
