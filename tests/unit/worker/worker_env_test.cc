// Built into ddprun_worker_tests only (the shared unit-test glob sees this file too).
#ifdef DDPRUN_WORKER_TESTS
#include "worker/worker_env.h"

#include <catch2/catch.hpp>
#include <map>

#include "common/errors.h"

namespace ddprun::worker {
namespace {

using Vars = std::map<std::string, std::string>;

Vars GoodVars() {
  return {{"RANK", "2"},
          {"LOCAL_RANK", "0"},
          {"WORLD_SIZE", "4"},
          {"LOCAL_WORLD_SIZE", "2"},
          {"MASTER_ADDR", "localhost"},
          {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_RESTART_COUNT", "3"},
          {"TORCHELASTIC_USE_AGENT_STORE", "True"}};
}

WorkerEnv Read(const Vars& vars) {
  return ReadWorkerEnv([&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

std::string ErrorOf(const Vars& vars) {
  try {
    Read(vars);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "no error";
}

TEST_CASE("ReadWorkerEnv reads torchrun's variables", "[worker]") {
  auto env = Read(GoodVars());
  CHECK(env.rank == 2);
  CHECK(env.local_rank == 0);
  CHECK(env.world_size == 4);
  CHECK(env.local_world_size == 2);
  CHECK(env.master_addr == "localhost");
  CHECK(env.master_port == 29500);
  CHECK(env.restart_count == 3);
  CHECK(env.use_agent_store);
}

TEST_CASE("ReadWorkerEnv defaults the optional variables", "[worker]") {
  auto vars = GoodVars();
  vars.erase("TORCHELASTIC_RESTART_COUNT");
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "False";
  auto env = Read(vars);
  CHECK(env.restart_count == 0);
  CHECK_FALSE(env.use_agent_store);
  vars.erase("TORCHELASTIC_USE_AGENT_STORE");
  CHECK_FALSE(Read(vars).use_agent_store);
}

TEST_CASE("ReadWorkerEnv names a missing variable", "[worker]") {
  for (const char* name :
       {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) {
    auto vars = GoodVars();
    vars.erase(name);
    CHECK(ErrorOf(vars).starts_with(std::string(name) + " is not set"));
  }
}

TEST_CASE("ReadWorkerEnv rejects malformed values, naming the variable", "[worker]") {
  auto vars = GoodVars();
  vars["WORLD_SIZE"] = "four";
  CHECK(ErrorOf(vars) == "WORLD_SIZE='four' is not an integer");
  vars = GoodVars();
  vars["MASTER_PORT"] = "70000";
  CHECK(ErrorOf(vars) == "MASTER_PORT=70000 is out of range 1..65535");
  vars = GoodVars();
  vars["RANK"] = "4";
  CHECK(ErrorOf(vars) == "RANK=4 must be less than WORLD_SIZE=4");
  vars = GoodVars();
  vars["LOCAL_RANK"] = "2";
  CHECK(ErrorOf(vars) == "LOCAL_RANK=2 must be less than LOCAL_WORLD_SIZE=2");
  vars = GoodVars();
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "yes";
  CHECK(ErrorOf(vars) == "TORCHELASTIC_USE_AGENT_STORE='yes' must be True or False");
  vars = GoodVars();
  vars["RANK"] = "";
  CHECK(ErrorOf(vars).starts_with("RANK is empty"));
}

}  // namespace
}  // namespace ddprun::worker
#endif  // DDPRUN_WORKER_TESTS
