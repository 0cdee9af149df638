#include "cli/nproc.h"

#include <catch2/catch.hpp>

#include "common/errors.h"
#include "tests/unit/cli/cli_test_util.h"

using ddprun::UsageError;
using ddprun::cli::CudaDeviceCount;
using ddprun::cli::GpuCount;
using ddprun::cli::GpuCounter;
using ddprun::cli::OnlineCpuCount;
using ddprun::cli::ResolveNprocPerNode;
// ParseCommandLine's outcome (this file's Gpus and ErrorOf are ResolveNprocPerNode's).
using ddprun::cli::testing::Config;
using ddprun::cli::testing::ConfigWith;
using ddprun::cli::testing::ErrorWith;
using ddprun::cli::testing::Train;

namespace {

GpuCounter Gpus(int count, std::string reason = "") {
  return [count, reason] { return GpuCount{count, reason}; };
}

std::string ErrorOf(const std::string& text, const GpuCounter& gpus) {
  try {
    ResolveNprocPerNode(text, "--nproc_per_node", gpus);
  } catch (const UsageError& error) {
    return error.what();
  }
  FAIL("no UsageError for " << text);
  return "";
}

}  // namespace

TEST_CASE("nproc_per_node integers are used as given", "[nproc]") {
  CHECK(ResolveNprocPerNode("1", "--nproc_per_node", Gpus(0)) == 1);
  CHECK(ResolveNprocPerNode("8", "--nproc_per_node", Gpus(0)) == 8);
  CHECK(ResolveNprocPerNode("+2", "--nproc_per_node", Gpus(0)) == 2);
}

TEST_CASE("nproc_per_node rejects non-positive and unknown values", "[nproc]") {
  for (const std::string text : {"0", "-1", "foo", "2.5", "", "xpu", "4x"}) {
    const std::string message = ErrorOf(text, Gpus(2));
    CHECK_THAT(message, Catch::StartsWith("--nproc_per_node=" + text + ": "));
    CHECK_THAT(message, Catch::Contains("positive integer, auto, cpu or gpu"));
  }
}

TEST_CASE("nproc_per_node=cpu counts online CPUs", "[nproc]") {
  CHECK(OnlineCpuCount() >= 1);
  CHECK(ResolveNprocPerNode("cpu", "--nproc_per_node", Gpus(4)) == OnlineCpuCount());
}

TEST_CASE("nproc_per_node=gpu counts GPUs or fails with the reason", "[nproc]") {
  CHECK(ResolveNprocPerNode("gpu", "--nproc_per_node", Gpus(4)) == 4);
  const std::string message = ErrorOf("gpu", Gpus(0, "cannot load libcuda.so.1"));
  CHECK(
      message ==
      "--nproc_per_node=gpu: no CUDA GPU found (cannot load libcuda.so.1); use an integer or cpu");
  CHECK_THAT(ErrorOf("gpu", Gpus(0)), Catch::Contains("(0 devices)"));
}

TEST_CASE("nproc_per_node=auto prefers GPUs, else CPUs", "[nproc]") {
  CHECK(ResolveNprocPerNode("auto", "--nproc_per_node", Gpus(3)) == 3);
  CHECK(ResolveNprocPerNode("auto", "--nproc_per_node", Gpus(0, "none")) == OnlineCpuCount());
}

TEST_CASE("nproc_per_node errors name the environment variable they came from", "[nproc]") {
  try {
    ResolveNprocPerNode("abc", "PET_NPROC_PER_NODE", Gpus(0));
    FAIL("no error");
  } catch (const UsageError& error) {
    CHECK_THAT(error.what(), Catch::StartsWith("PET_NPROC_PER_NODE=abc: "));
  }
}

TEST_CASE("CudaDeviceCount works with or without a driver", "[nproc]") {
  const GpuCount found = CudaDeviceCount();
  CHECK(found.count >= 0);
  if (found.count == 0) CHECK_FALSE(found.reason.empty());
}

TEST_CASE("option --nproc_per_node validation and resolution", "[cli]") {
  for (const std::string bad : {"-1", "0", "foo"}) {
    const std::string message = ErrorWith({"--nproc_per_node=" + bad});
    CHECK_THAT(message, Catch::StartsWith("--nproc_per_node=" + bad + ": "));
    CHECK_THAT(message, Catch::Contains("positive integer, auto, cpu or gpu"));
  }
  CHECK(Config({"--nproc_per_node=gpu", Train()}, {}, 4).nproc_per_node == 4);
  CHECK(Config({"--nproc_per_node=gpu", Train()}, {}, 4).nproc_per_node_text == "gpu");
  CHECK(Config({"--nproc_per_node=auto", Train()}, {}, 2).nproc_per_node == 2);
  CHECK(Config({"--nproc_per_node=auto", Train()}, {}, 0).nproc_per_node ==
        ddprun::cli::OnlineCpuCount());
  CHECK(ConfigWith({"--nproc_per_node=cpu"}).nproc_per_node == ddprun::cli::OnlineCpuCount());
  CHECK(ErrorWith({"--nproc_per_node=gpu"}) ==
        "--nproc_per_node=gpu: no CUDA GPU found (no driver in tests); use an integer or cpu");
}
