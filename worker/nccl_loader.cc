#include "worker/nccl_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace ddprun::worker {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Candidates() {
  std::vector<std::string> paths;
  if (const char* path = std::getenv("DDPRUN_NCCL_PLUGIN")) paths.emplace_back(path);
  std::error_code ec;
  fs::path exe_dir = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (!ec) {
    paths.push_back((exe_dir / kDdprunNcclPluginName).string());
    paths.push_back((exe_dir / DDPRUN_NCCL_PLUGIN_RELDIR / kDdprunNcclPluginName).string());
  }
  return paths;
}

void* Open(std::string& reasons) {
  for (const auto& path : Candidates()) {
    if (!fs::exists(path)) continue;
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    reasons += std::string("; ") + dlerror();
  }
  return nullptr;
}

template <typename Fn>
Fn Symbol(void* handle, const char* name) {
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    throw BackendUnavailable(std::string("nccl backend: ") + kDdprunNcclPluginName + " lacks " +
                             name);
  }
  return reinterpret_cast<Fn>(symbol);
}

}  // namespace

NcclPlugin& NcclPlugin::Get() {
  static NcclPlugin* plugin = nullptr;
  if (plugin != nullptr) return *plugin;
  std::string reasons;
  void* handle = Open(reasons);
  if (handle == nullptr) {
    throw BackendUnavailable(
        std::string("nccl backend unavailable: ") + kDdprunNcclPluginName +
        (reasons.empty() ? " not found (built without CUDA/NCCL?)" : " failed to load" + reasons));
  }
  plugin = new NcclPlugin(Symbol<DeviceCountFn>(handle, "DdprunNcclDeviceCount"),
                          Symbol<CreateFn>(handle, "DdprunNcclCreate"));
  return *plugin;
}

int NcclPlugin::DeviceCount() const {
  char error[512] = "";
  int count = device_count_(error, sizeof(error));
  if (count < 0) throw BackendUnavailable(std::string("nccl backend unavailable: ") + error);
  if (count == 0) throw BackendUnavailable("nccl backend unavailable: no CUDA device");
  return count;
}

std::unique_ptr<Communicator> NcclPlugin::Create(const NcclPluginArgs& args) const {
  char error[512] = "";
  Communicator* communicator = create_(&args, error, sizeof(error));
  if (communicator == nullptr) {
    std::string message = std::string("nccl backend: ") + error;
    if (std::string(error).starts_with(kDdprunNcclTimeoutTag)) throw CollectiveTimeout(message);
    throw std::runtime_error(message);
  }
  return std::unique_ptr<Communicator>(communicator);
}

}  // namespace ddprun::worker
