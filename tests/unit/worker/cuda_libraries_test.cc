// Built into ddprun_worker_tests only (the shared unit-test glob sees this file too).
#ifdef DDPRUN_WORKER_TESTS
#include "worker/cuda_libraries.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace ddprun::worker {
namespace {

namespace fs = std::filesystem;

// A folder of fake Python environments; removed with everything in it.
struct Environments {
  Environments() {
    char pattern[] = "/tmp/ddprun_cuda_libraries_XXXXXX";
    root = mkdtemp(pattern);
  }
  ~Environments() {
    std::error_code ignored;
    fs::remove_all(root, ignored);
  }
  // Makes <root>/<relative> (and its folders) and returns its path.
  std::string File(const std::string& relative) const {
    fs::path path = root / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << "not really a library";
    return path.string();
  }
  fs::path root;
};

struct FakeEnv {
  std::map<std::string, std::string> values;
  EnvLookup Lookup() const {
    return [this](const std::string& name) -> std::optional<std::string> {
      auto it = values.find(name);
      return it == values.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
  }
};

TEST_CASE("the loader's path comes first, then the program's environment, then the system",
          "[worker][cuda]") {
  Environments envs;
  const auto venv_nccl =
      envs.File("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2");
  envs.File("venv/bin/ddprun");
  const auto candidates =
      CudaLibraryCandidates(NcclLibrary(), (envs.root / "venv/bin").string(), FakeEnv{}.Lookup());
  REQUIRE(candidates.size() >= 2);
  CHECK(candidates[0] == "libnccl.so.2");
  CHECK(candidates[1] == venv_nccl);
}

TEST_CASE(
    "the newest CUDA runtime of each environment first, $VIRTUAL_ENV and $CONDA_PREFIX after "
    "the program's own",
    "[worker][cuda]") {
  Environments envs;
  const auto own12 =
      envs.File("own/lib/python3.10/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12");
  const auto own13 = envs.File("own/lib/python3.10/site-packages/nvidia/cu13/lib/libcudart.so.13");
  const auto conda =
      envs.File("conda/lib/python3.11/site-packages/nvidia/cu13/lib/libcudart.so.13");
  const auto venv =
      envs.File("venv/lib/python3.9/dist-packages/nvidia/cuda_runtime/lib/libcudart.so.12");
  FakeEnv env{{{"VIRTUAL_ENV", (envs.root / "venv").string()},
               {"CONDA_PREFIX", (envs.root / "conda").string()}}};
  auto candidates =
      CudaLibraryCandidates(CudartLibrary(), (envs.root / "own/bin").string(), env.Lookup());
  std::erase_if(candidates, [](const std::string& path) { return path.starts_with("/usr/"); });
  CHECK(candidates ==
        std::vector<std::string>{"libcudart.so.13", "libcudart.so.12", own13, own12, venv, conda});
}

TEST_CASE("the library's variable names the one file to try", "[worker][cuda]") {
  Environments envs;
  envs.File("venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2");
  FakeEnv env{{{"DDPRUN_NCCL_LIBRARY", "/opt/nccl/lib/libnccl.so.2"}}};
  CHECK(CudaLibraryCandidates(NcclLibrary(), (envs.root / "venv/bin").string(), env.Lookup()) ==
        std::vector<std::string>{"/opt/nccl/lib/libnccl.so.2"});
}

TEST_CASE("a library that is nowhere is reported with where it was looked for and the fix",
          "[worker][cuda]") {
  ::setenv("DDPRUN_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  std::string reason;
  CHECK(LoadCudaLibrary(NcclLibrary(), reason) == nullptr);
  ::unsetenv("DDPRUN_NCCL_LIBRARY");
  CHECK_THAT(reason, Catch::Contains("DDPRUN_NCCL_LIBRARY=/nonexistent/libnccl.so.2 did not load"));
  CHECK_THAT(reason, Catch::Contains("/nonexistent/libnccl.so.2: cannot open shared object file"));
  CHECK_THAT(reason, Catch::Contains("unset DDPRUN_NCCL_LIBRARY"));
}

}  // namespace
}  // namespace ddprun::worker
#endif
