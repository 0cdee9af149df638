#include "worker/cuda_libraries.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

namespace ddprun::worker {
namespace {

namespace fs = std::filesystem;

// lib/python3*/{site,dist}-packages under an environment's root, sorted for a stable order.
std::vector<fs::path> SitePackages(const fs::path& root) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root / "lib", ec)) {
    if (!entry.path().filename().string().starts_with("python3")) continue;
    for (const char* leaf : {"site-packages", "dist-packages"}) {
      if (fs::is_directory(entry.path() / leaf, ec)) found.push_back(entry.path() / leaf);
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

std::vector<fs::path> EnvironmentRoots(const std::string& program_dir, const EnvLookup& env) {
  std::vector<fs::path> roots;
  if (!program_dir.empty()) roots.push_back(fs::path(program_dir).parent_path());
  for (const char* name : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const auto value = env(name);
    if (value && !value->empty()) roots.emplace_back(*value);
  }
  return roots;
}

void AddIfFile(std::vector<std::string>& paths, const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return;  // follows links, as dlopen does
  if (std::find(paths.begin(), paths.end(), path.string()) == paths.end()) {
    paths.push_back(path.string());
  }
}

std::string ProgramDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::string Joined(const std::vector<std::string>& items, const std::string& separator) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : separator) + item;
  return text;
}

}  // namespace

const CudaLibrary& NcclLibrary() {
  static const CudaLibrary library{"DDPRUN_NCCL_LIBRARY",
                                   {"libnccl.so.2"},
                                   {"nvidia/nccl/lib"},
                                   {"/usr/local/cuda/lib64", "/usr/local/cuda/lib"}};
  return library;
}

const CudaLibrary& CudartLibrary() {
  static const CudaLibrary library{"DDPRUN_CUDART_LIBRARY",
                                   {"libcudart.so.13", "libcudart.so.12"},
                                   {"nvidia/cu13/lib", "nvidia/cuda_runtime/lib"},
                                   {"/usr/local/cuda/lib64", "/usr/local/cuda/lib"}};
  return library;
}

std::vector<std::string> CudaLibraryCandidates(const CudaLibrary& library,
                                               const std::string& program_dir,
                                               const EnvLookup& env) {
  if (const auto chosen = env(library.env_var); chosen && !chosen->empty()) return {*chosen};
  std::vector<std::string> paths(library.sonames.begin(), library.sonames.end());
  for (const auto& root : EnvironmentRoots(program_dir, env)) {
    for (const auto& site : SitePackages(root)) {
      for (const auto& dir : library.package_dirs) {
        for (const auto& soname : library.sonames) AddIfFile(paths, site / dir / soname);
      }
    }
  }
  for (const auto& dir : library.system_dirs) {
    for (const auto& soname : library.sonames) AddIfFile(paths, fs::path(dir) / soname);
  }
  return paths;
}

void* LoadCudaLibrary(const CudaLibrary& library, std::string& reason) {
  const auto candidates = CudaLibraryCandidates(
      library, ProgramDir(), [](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str());
        return value ? std::optional<std::string>(value) : std::nullopt;
      });
  std::vector<std::string> failures;
  for (const auto& path : candidates) {
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) return handle;
    // A bare soname the loader does not know is the common case, not worth a word.
    if (path.find('/') != std::string::npos) failures.push_back(dlerror());
  }
  const std::string failed = failures.empty() ? "" : ": " + Joined(failures, "; ");
  if (const char* chosen = std::getenv(library.env_var.c_str()); chosen && *chosen) {
    reason = library.env_var + "=" + chosen + " did not load" + failed + ": name a library that " +
             "loads, or unset " + library.env_var;
    return nullptr;
  }
  reason = Joined(library.sonames, " or ") + " not found (on the loader's path, in the nvidia " +
           "packages of the Python environments around this program, or in " +
           Joined(library.system_dirs, ", ") + ")" + failed + ": install torch (pip) or " +
           "NVIDIA's library, or name the file with " + library.env_var;
  return nullptr;
}

}  // namespace ddprun::worker
