#include "elastic/worker_env.h"

#include <catch2/catch.hpp>

#include "common/errors.h"

using namespace ddprun::elastic;

namespace {
WorkerGroupEnv TwoNodeGroup() {
  WorkerGroupEnv group;
  group.role = "trainer";
  group.local_world_size = 2;
  group.group_rank = 1;
  group.group_world_size = 2;
  group.ranks = {2, 4, 2, 4};
  group.master_addr = "10.0.0.1";
  group.master_port = 29500;
  group.restart_count = 1;
  group.max_restarts = 3;
  group.run_id = "job";
  group.use_agent_store = true;
  return group;
}
}  // namespace

TEST_CASE("worker environment carries torchrun's variables over the launcher's", "[elastic][env]") {
  const Environment base{{"PATH", "/bin"}, {"RANK", "stale"}};
  const auto env = BuildWorkerEnv(base, TwoNodeGroup(), 1, "/logs/attempt_1/1/error.json");
  CHECK(env.at("PATH") == "/bin");
  CHECK(env.at("RANK") == "3");
  CHECK(env.at("LOCAL_RANK") == "1");
  CHECK(env.at("GROUP_RANK") == "1");
  CHECK(env.at("ROLE_RANK") == "3");
  CHECK(env.at("ROLE_NAME") == "trainer");
  CHECK(env.at("LOCAL_WORLD_SIZE") == "2");
  CHECK(env.at("WORLD_SIZE") == "4");
  CHECK(env.at("GROUP_WORLD_SIZE") == "2");
  CHECK(env.at("ROLE_WORLD_SIZE") == "4");
  CHECK(env.at("MASTER_ADDR") == "10.0.0.1");
  CHECK(env.at("MASTER_PORT") == "29500");
  CHECK(env.at("TORCHELASTIC_RESTART_COUNT") == "1");
  CHECK(env.at("TORCHELASTIC_MAX_RESTARTS") == "3");
  CHECK(env.at("TORCHELASTIC_RUN_ID") == "job");
  CHECK(env.at("TORCHELASTIC_USE_AGENT_STORE") == "True");
  CHECK(env.at("TORCHELASTIC_ERROR_FILE") == "/logs/attempt_1/1/error.json");
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
  CHECK(env.count("CUDA_VISIBLE_DEVICES") == 0);
}

TEST_CASE("the parent's NCCL error handling value is kept", "[elastic][env]") {
  const auto env =
      BuildWorkerEnv({{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}}, TwoNodeGroup(), 0, "");
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "3");
  CHECK(env.at("TORCHELASTIC_ERROR_FILE").empty());
}

TEST_CASE("virtual local rank narrows CUDA_VISIBLE_DEVICES to one GPU", "[elastic][env]") {
  auto group = TwoNodeGroup();
  group.virtual_local_rank = true;
  const auto env = BuildWorkerEnv({{"CUDA_VISIBLE_DEVICES", "4, 5"}}, group, 1, "");
  CHECK(env.at("LOCAL_RANK") == "0");
  CHECK(env.at("CUDA_VISIBLE_DEVICES") == "5");
  CHECK(BuildWorkerEnv({}, group, 1, "").at("CUDA_VISIBLE_DEVICES") == "1");
  CHECK_THROWS_AS(BuildWorkerEnv({{"CUDA_VISIBLE_DEVICES", "4"}}, group, 1, ""),
                  ddprun::UsageError);
}

TEST_CASE("OMP_NUM_THREADS defaults to 1 only for several workers and when unset",
          "[elastic][env]") {
  Environment env;
  CHECK_FALSE(ApplyOmpDefault(env, 1));
  CHECK(env.count("OMP_NUM_THREADS") == 0);
  CHECK(ApplyOmpDefault(env, 2));
  CHECK(env.at("OMP_NUM_THREADS") == "1");
  Environment preset{{"OMP_NUM_THREADS", "8"}};
  CHECK_FALSE(ApplyOmpDefault(preset, 4));
  CHECK(preset.at("OMP_NUM_THREADS") == "8");
}

TEST_CASE("diagnostics: faulthandler, NCCL flight recorder under its current names, pulse, timer",
          "[elastic][env][hang]") {
  Environment env{{"PATH", "/bin"}, {"DDPRUN_PULSE_FILE", "/stale"}};
  AddDiagnosticsEnv(env, {"/l/attempt_0/1", "/l/attempt_0/1/pulse", "/tmp/timer"});
  CHECK(env.at("PYTHONFAULTHANDLER") == "1");
  CHECK(env.at("TORCH_FR_BUFFER_SIZE") == "2000");
  CHECK(env.at("TORCH_FR_DUMP_ON_TIMEOUT") == "1");
  CHECK(env.at("TORCH_FR_DUMP_TEMP_FILE") == "/l/attempt_0/1/nccl_trace_rank_");
  // Not the deprecated names: current PyTorch warns in every worker when they are set.
  CHECK(env.count("TORCH_NCCL_TRACE_BUFFER_SIZE") == 0);
  CHECK(env.count("TORCH_NCCL_DUMP_ON_TIMEOUT") == 0);
  CHECK(env.count("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") == 0);
  CHECK(env.at("DDPRUN_PULSE_FILE") == "/l/attempt_0/1/pulse");
  CHECK(env.at("TORCHELASTIC_TIMER_FILE") == "/tmp/timer");
  CHECK(env.at("PATH") == "/bin");
}

TEST_CASE("diagnostics without files: no dump path, pulse or timer", "[elastic][env][hang]") {
  Environment env;
  AddDiagnosticsEnv(env, {});
  CHECK(env.at("PYTHONFAULTHANDLER") == "1");
  CHECK(env.at("TORCH_FR_BUFFER_SIZE") == "2000");
  CHECK(env.count("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") == 0);
  CHECK(env.count("TORCH_FR_DUMP_TEMP_FILE") == 0);
  CHECK(env.count("DDPRUN_PULSE_FILE") == 0);
  CHECK(env.count("TORCHELASTIC_TIMER_FILE") == 0);
}

TEST_CASE("diagnostics leave the user's values alone, a pair whole", "[elastic][env][hang]") {
  Environment env{{"PYTHONFAULTHANDLER", ""},
                  {"TORCH_FR_BUFFER_SIZE", "50"},
                  {"TORCH_NCCL_DUMP_ON_TIMEOUT", "0"},
                  {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/mine/trace_"}};
  AddDiagnosticsEnv(env, {"/l/attempt_0/0", "", ""});
  CHECK(env.at("PYTHONFAULTHANDLER").empty());
  CHECK(env.at("TORCH_FR_BUFFER_SIZE") == "50");
  CHECK(env.count("TORCH_NCCL_TRACE_BUFFER_SIZE") == 0);
  CHECK(env.at("TORCH_NCCL_DUMP_ON_TIMEOUT") == "0");
  CHECK(env.count("TORCH_FR_DUMP_ON_TIMEOUT") == 0);
  CHECK(env.at("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") == "/mine/trace_");
  CHECK(env.count("TORCH_FR_DUMP_TEMP_FILE") == 0);
}
