#include "cli/env_presets.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <stdexcept>

#include "cli/cli.h"
#include "common/errors.h"
#include "launcher/dry_run.h"
#include "tests/unit/cli/one_line_usage_error.h"

namespace {

using ddprun::UsageError;
using ddprun::cli::CliResult;
using ddprun::cli::EnvLookup;
using ddprun::cli::ExpandSlurmHostlist;
using ddprun::cli::FirstSlurmHost;
using ddprun::cli::GpuCount;
using ddprun::cli::ResolveEnvPreset;
using ddprun::cli::testing::OneLineUsageError;
using ddprun::elastic::EnvPresetSetting;
using ddprun::elastic::LaunchConfig;
using Env = std::map<std::string, std::string>;
using Hosts = std::vector<std::string>;
using Args = std::vector<std::string>;

EnvLookup FakeEnv(Env vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional(it->second);
  };
}

const Env kSlurm = {{"SLURM_NNODES", "4"},
                    {"SLURM_NODEID", "2"},
                    {"SLURM_JOB_NODELIST", "node[01-04,07],gpu5"},
                    {"SLURM_JOB_ID", "4242"}};
const Env kAiPlatform = {{"WORLD_SIZE", "3"},
                         {"RANK", "1"},
                         {"MASTER_ADDR", "cmle-training-master-0"},
                         {"MASTER_PORT", "2222"}};
const Env kAzureMl = {
    {"WORLD_SIZE", "2"}, {"NODE_RANK", "1"}, {"MASTER_ADDR", "10.0.0.4"}, {"MASTER_PORT", "6105"}};
const Env kSkyPilot = {{"SKYPILOT_NUM_NODES", "2"},
                       {"SKYPILOT_NODE_RANK", "0"},
                       {"SKYPILOT_NODE_IPS", "172.31.0.10\n172.31.0.11\n"},
                       {"SKYPILOT_NUM_GPUS_PER_NODE", "8"}};

// "option=value<-VARIABLE" for each setting, for compact comparisons.
std::vector<std::string> Settings(const std::string& preset, const Env& env) {
  std::vector<std::string> out;
  for (const EnvPresetSetting& s : ResolveEnvPreset(preset, "--env_preset", FakeEnv(env))) {
    out.push_back(s.option + "=" + s.value + "<-" + s.variable);
  }
  return out;
}

std::string PresetError(const std::string& preset, const Env& env) {
  return OneLineUsageError([&] { ResolveEnvPreset(preset, "--env_preset", FakeEnv(env)); });
}

Env With(Env env, const std::string& name, std::optional<std::string> value) {
  if (value) {
    env[name] = *value;
  } else {
    env.erase(name);
  }
  return env;
}

LaunchConfig Config(const Args& options, const Env& env) {
  Args args = options;
  args.insert(args.end(), {"--no_python", "/bin/true"});
  const CliResult result = ddprun::cli::ParseCommandLine(args, FakeEnv(env), [] {
    return GpuCount{0, "no driver in tests"};
  });
  REQUIRE(result.action == CliResult::Action::kRun);
  return result.config;
}

std::string ConfigError(const Args& options, const Env& env) {
  try {
    Config(options, env);
  } catch (const UsageError& error) {
    return error.what();
  }
  FAIL("no UsageError");
  return "";
}

}  // namespace

TEST_CASE("SLURM hostlists expand like scontrol show hostnames", "[env_presets]") {
  CHECK(ExpandSlurmHostlist("node1") == Hosts{"node1"});
  CHECK(ExpandSlurmHostlist("a,b,c") == Hosts{"a", "b", "c"});
  CHECK(ExpandSlurmHostlist("node[01-04,07],gpu5") ==
        Hosts{"node01", "node02", "node03", "node04", "node07", "gpu5"});
  CHECK(ExpandSlurmHostlist("rack[1-2]-n[3-4]") ==
        Hosts{"rack1-n3", "rack1-n4", "rack2-n3", "rack2-n4"});
  CHECK(ExpandSlurmHostlist("n[8-10]") == Hosts{"n8", "n9", "n10"});
  CHECK(ExpandSlurmHostlist("n[008-010]") == Hosts{"n008", "n009", "n010"});
  CHECK(ExpandSlurmHostlist("n[5]x") == Hosts{"n5x"});
  CHECK(ExpandSlurmHostlist("[1-2]") == Hosts{"1", "2"});
  CHECK(ExpandSlurmHostlist("gpu-a[1-2].cluster,login") ==
        Hosts{"gpu-a1.cluster", "gpu-a2.cluster", "login"});
}

TEST_CASE("the first SLURM host is found without expanding the list", "[env_presets]") {
  CHECK(FirstSlurmHost("node[01-04,07],gpu5,rack[1-2]-n[3-4]") == "node01");
  CHECK(FirstSlurmHost("rack[1-2]-n[3-4]") == "rack1-n3");
  CHECK(FirstSlurmHost("gpu5,node[1-2]") == "gpu5");
  CHECK(FirstSlurmHost("n[0000-9999999]") == "n0000");
  CHECK(FirstSlurmHost("n[07,01-02]") == "n07");  // list order, not sorted
}

TEST_CASE("malformed SLURM hostlists are rejected with a reason", "[env_presets]") {
  for (const std::string list : {"", "node[1-2", "node1-2]", "node[]", "node[a-b]", "node[3-1]",
                                 "a,,b", "a,", ",a", "node[1-2,]", "node[[1]]", "a b", "n[1-]"}) {
    INFO(list);
    CHECK_THROWS_AS(ExpandSlurmHostlist(list), std::invalid_argument);
    CHECK_THROWS_AS(FirstSlurmHost(list), std::invalid_argument);
  }
  CHECK_THROWS_WITH(ExpandSlurmHostlist("n[0-9999999]"), Catch::Contains("1000000 hosts"));
  CHECK_THROWS_WITH(ExpandSlurmHostlist("n[0-999]m[0-9999]"), Catch::Contains("1000000 hosts"));
}

TEST_CASE("each preset reads its platform's variables", "[env_presets]") {
  CHECK(Settings("slurm", kSlurm) ==
        std::vector<std::string>{"nnodes=4<-SLURM_NNODES", "node_rank=2<-SLURM_NODEID",
                                 "master_addr=node01<-SLURM_JOB_NODELIST",
                                 "rdzv_id=4242<-SLURM_JOB_ID"});
  CHECK(Settings("slurm", With(kSlurm, "MASTER_PORT", "12345")).back() ==
        "master_port=12345<-MASTER_PORT");
  CHECK(Settings("aiplatform", kAiPlatform) ==
        std::vector<std::string>{"nnodes=3<-WORLD_SIZE", "node_rank=1<-RANK",
                                 "master_addr=cmle-training-master-0<-MASTER_ADDR",
                                 "master_port=2222<-MASTER_PORT"});
  CHECK(Settings("azureml", kAzureMl) ==
        std::vector<std::string>{"nnodes=2<-WORLD_SIZE", "node_rank=1<-NODE_RANK",
                                 "master_addr=10.0.0.4<-MASTER_ADDR",
                                 "master_port=6105<-MASTER_PORT"});
  CHECK(Settings("skypilot", kSkyPilot) ==
        std::vector<std::string>{"nnodes=2<-SKYPILOT_NUM_NODES", "node_rank=0<-SKYPILOT_NODE_RANK",
                                 "master_addr=172.31.0.10<-SKYPILOT_NODE_IPS",
                                 "nproc_per_node=8<-SKYPILOT_NUM_GPUS_PER_NODE"});
}

// Captured from job steps on a real Slurm 22.05 cluster (tests/integration/test_slurm.py's
// harness): `sbatch -N3 --gpus-per-node=2`, then in the batch script `srun -N2 -r1
// --ntasks-per-node=1 env` (a step on the job's last two nodes), on n2 (SLURM_*, trimmed).
const Env kSlurmStepOnN2 = {{"SLURM_CLUSTER_NAME", "ddprun"},
                            {"SLURM_GPUS_ON_NODE", "2"},
                            {"SLURM_GPUS_PER_NODE", "2"},
                            {"SLURM_JOBID", "1"},
                            {"SLURM_JOB_ID", "1"},
                            {"SLURM_JOB_NODELIST", "n[1-3]"},
                            {"SLURM_JOB_NUM_NODES", "3"},
                            {"SLURM_LOCALID", "0"},
                            {"SLURM_NNODES", "2"},
                            {"SLURM_NODEID", "0"},
                            {"SLURM_NODELIST", "n[1-3]"},
                            {"SLURM_NTASKS", "2"},
                            {"SLURM_PROCID", "0"},
                            {"SLURM_STEP_ID", "0"},
                            {"SLURM_STEP_NODELIST", "n[2-3]"},
                            {"SLURM_STEP_NUM_NODES", "2"},
                            {"SLURM_STEP_NUM_TASKS", "2"},
                            {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"},
                            {"SLURMD_NODENAME", "n2"}};
// The same cluster, heterogeneous job `sbatch -N1 : -N2`, step `srun --het-group=0,1
// --ntasks-per-node=1`, on n3: one step over both components, the leader's job id.
const Env kSlurmHetStepOnN3 = {{"SLURM_HET_SIZE", "2"},
                               {"SLURM_JOB_ID", "1"},
                               {"SLURM_JOB_ID_HET_GROUP_0", "1"},
                               {"SLURM_JOB_ID_HET_GROUP_1", "2"},
                               {"SLURM_JOB_NODELIST", "n[1-3]"},
                               {"SLURM_JOB_NODELIST_HET_GROUP_0", "n1"},
                               {"SLURM_JOB_NODELIST_HET_GROUP_1", "n[2-3]"},
                               {"SLURM_JOB_NUM_NODES", "3"},
                               {"SLURM_NNODES", "3"},
                               {"SLURM_NODEID", "2"},
                               {"SLURM_NTASKS", "3"},
                               {"SLURM_PROCID", "2"},
                               {"SLURM_STEP_NODELIST", "n[1-3]"},
                               {"SLURM_STEP_NUM_NODES", "3"},
                               {"SLURM_STEP_NUM_TASKS", "3"},
                               {"SLURM_STEP_TASKS_PER_NODE", "1(x3)"}};

TEST_CASE("slurm inside a job step: the step's nodes, not the job's", "[env_presets]") {
  // The master is the step's first node (n2 has node id 0), not the job's first (n1, which
  // runs no ddprun); one worker per allocated GPU.
  CHECK(Settings("slurm", kSlurmStepOnN2) ==
        std::vector<std::string>{"nnodes=2<-SLURM_STEP_NUM_NODES", "node_rank=0<-SLURM_NODEID",
                                 "master_addr=n2<-SLURM_STEP_NODELIST", "rdzv_id=1<-SLURM_JOB_ID",
                                 "nproc_per_node=2<-SLURM_GPUS_ON_NODE"});
  CHECK(Settings("slurm", kSlurmHetStepOnN3) ==
        std::vector<std::string>{"nnodes=3<-SLURM_STEP_NUM_NODES", "node_rank=2<-SLURM_NODEID",
                                 "master_addr=n1<-SLURM_STEP_NODELIST", "rdzv_id=1<-SLURM_JOB_ID"});
  // No GPUs allocated: nproc_per_node keeps its default.
  CHECK(Settings("slurm", With(kSlurmStepOnN2, "SLURM_GPUS_ON_NODE", "0")).size() == 4);
  const LaunchConfig config = Config({"--env_preset=slurm"}, kSlurmStepOnN2);
  CHECK(config.master_addr == "n2");
  CHECK(config.max_nodes == 2);
  CHECK(config.nproc_per_node == 2);
  CHECK(Config({"--env_preset=slurm", "--nproc_per_node=1"}, kSlurmStepOnN2).nproc_per_node == 1);
}

TEST_CASE("slurm: a step with more than one task per node is refused", "[env_presets]") {
  // srun without --ntasks-per-node=1 in a job of #SBATCH --ntasks-per-node=2.
  const Env env =
      With(With(kSlurmStepOnN2, "SLURM_STEP_NUM_TASKS", "4"), "SLURM_STEP_TASKS_PER_NODE", "2(x2)");
  CHECK(PresetError("slurm", env) ==
        "--env_preset=slurm: SLURM_STEP_NUM_TASKS=4: expected one task per node "
        "(SLURM_STEP_NUM_NODES=2); start ddprun with srun --ntasks-per-node=1");
  CHECK(PresetError("slurm", With(kSlurmStepOnN2, "SLURM_STEP_NODELIST", "n[2-")) ==
        "--env_preset=slurm: SLURM_STEP_NODELIST=n[2-: unclosed '['; expected a SLURM hostlist "
        "such as node[01-04,07]");
  CHECK(PresetError("slurm", With(kSlurmStepOnN2, "SLURM_NODEID", "2")) ==
        "--env_preset=slurm: SLURM_NODEID=2: expected a node rank below SLURM_STEP_NUM_NODES=2");
  CHECK_THAT(PresetError("slurm", With(kSlurmStepOnN2, "SLURM_GPUS_ON_NODE", "a100:2")),
             Catch::StartsWith("--env_preset=slurm: SLURM_GPUS_ON_NODE=a100:2: expected"));
}

TEST_CASE("skypilot: node count from the IP list, no GPUs leaves nproc alone", "[env_presets]") {
  const Env env =
      With(With(kSkyPilot, "SKYPILOT_NUM_NODES", std::nullopt), "SKYPILOT_NUM_GPUS_PER_NODE", "0");
  CHECK(Settings("skypilot", env) ==
        std::vector<std::string>{"nnodes=2<-SKYPILOT_NODE_IPS", "node_rank=0<-SKYPILOT_NODE_RANK",
                                 "master_addr=172.31.0.10<-SKYPILOT_NODE_IPS"});
  CHECK(Settings("skypilot", With(env, "SKYPILOT_NODE_IPS", " 10.1.0.1 \n\n10.1.0.2"))[2] ==
        "master_addr=10.1.0.1<-SKYPILOT_NODE_IPS");
}

TEST_CASE("missing or malformed variables name the preset, the variable and the expectation",
          "[env_presets]") {
  CHECK(PresetError("slurm", With(kSlurm, "SLURM_NNODES", std::nullopt)) ==
        "--env_preset=slurm: SLURM_NNODES is not set; expected the number of nodes, an integer "
        ">= 1");
  CHECK(PresetError("slurm", With(kSlurm, "SLURM_NNODES", "0")) ==
        "--env_preset=slurm: SLURM_NNODES=0: expected the number of nodes, an integer >= 1");
  CHECK(PresetError("slurm", With(kSlurm, "SLURM_NODEID", "-1")) ==
        "--env_preset=slurm: SLURM_NODEID=-1: expected this node's rank, an integer >= 0");
  CHECK(PresetError("slurm", With(kSlurm, "SLURM_NODEID", "4")) ==
        "--env_preset=slurm: SLURM_NODEID=4: expected a node rank below SLURM_NNODES=4");
  CHECK_THAT(PresetError("slurm", With(kSlurm, "SLURM_JOB_NODELIST", "node[1-")),
             Catch::StartsWith("--env_preset=slurm: SLURM_JOB_NODELIST=node[1-: unclosed '['"));
  CHECK_THAT(PresetError("slurm", With(kSlurm, "SLURM_JOB_ID", std::nullopt)),
             Catch::StartsWith("--env_preset=slurm: SLURM_JOB_ID is not set"));
  CHECK_THAT(PresetError("slurm", With(kSlurm, "MASTER_PORT", "http")),
             Catch::StartsWith("--env_preset=slurm: MASTER_PORT=http: expected"));
  CHECK_THAT(PresetError("aiplatform", With(kAiPlatform, "MASTER_PORT", "70000")),
             Catch::StartsWith("--env_preset=aiplatform: MASTER_PORT=70000: expected"));
  CHECK_THAT(PresetError("aiplatform", With(kAiPlatform, "MASTER_ADDR", "")),
             Catch::StartsWith("--env_preset=aiplatform: MASTER_ADDR=: expected"));
  CHECK_THAT(PresetError("azureml", With(kAzureMl, "NODE_RANK", std::nullopt)),
             Catch::StartsWith("--env_preset=azureml: NODE_RANK is not set"));
  CHECK_THAT(PresetError("azureml", With(kAzureMl, "WORLD_SIZE", "two")),
             Catch::StartsWith("--env_preset=azureml: WORLD_SIZE=two: expected"));
  CHECK_THAT(PresetError("skypilot", With(kSkyPilot, "SKYPILOT_NODE_IPS", "\n")),
             Catch::StartsWith("--env_preset=skypilot: SKYPILOT_NODE_IPS is empty"));
  CHECK_THAT(PresetError("skypilot", With(kSkyPilot, "SKYPILOT_NUM_GPUS_PER_NODE", "A100:8")),
             Catch::StartsWith("--env_preset=skypilot: SKYPILOT_NUM_GPUS_PER_NODE=A100:8"));
  CHECK(PresetError("slurm", {}).find("PET_") == std::string::npos);
}

TEST_CASE("an unknown preset lists the known ones", "[env_presets]") {
  CHECK(PresetError("kubernetes", {}) ==
        "--env_preset=kubernetes: unknown preset; known: aiplatform, azureml, skypilot, slurm");
  CHECK(ddprun::cli::EnvPresetNames() ==
        std::vector<std::string>{"aiplatform", "azureml", "skypilot", "slurm"});
}

TEST_CASE("the preset fills the launch configuration", "[env_presets][cli]") {
  const LaunchConfig config = Config({"--env_preset=slurm"}, kSlurm);
  CHECK(config.env_preset == "slurm");
  CHECK(config.min_nodes == 4);
  CHECK(config.max_nodes == 4);
  CHECK(config.node_rank == 2);
  CHECK(config.master_addr == "node01");
  CHECK(config.rdzv_id == "4242");
  CHECK(config.master_port == 29500);  // SLURM gives no port: torchrun's default
  CHECK(config.rdzv_backend == "static");
  CHECK(config.rdzv_endpoint == "node01:29500");
  CHECK(config.rdzv_conf.at("rank") == "2");
  CHECK_FALSE(config.standalone);
  CHECK(Config({"--env-preset", "slurm"}, kSlurm).node_rank == 2);
  CHECK(Config({}, With(kSlurm, "PET_ENV_PRESET", "slurm")).node_rank == 2);
  CHECK(Config({"--env_preset="}, kSlurm).env_preset.empty());  // empty: no preset
  CHECK(Config({"--env_preset=skypilot"}, kSkyPilot).nproc_per_node == 8);
  CHECK(Config({"--env_preset=aiplatform"}, kAiPlatform).master_port == 2222);
}

TEST_CASE("precedence: flag > PET_* > preset > default", "[env_presets][cli]") {
  const LaunchConfig by_flag = Config({"--env_preset=slurm", "--node_rank=3", "--nnodes=5"},
                                      With(With(kSlurm, "PET_NODE_RANK", "1"), "PET_NNODES", "6"));
  CHECK(by_flag.node_rank == 3);
  CHECK(by_flag.max_nodes == 5);
  const LaunchConfig by_pet =
      Config({"--env_preset=slurm"}, With(kSlurm, "PET_MASTER_ADDR", "login1"));
  CHECK(by_pet.master_addr == "login1");
  CHECK(by_pet.node_rank == 2);  // the rest still from the preset
  const LaunchConfig nproc = Config({"--env_preset=skypilot", "--nproc_per_node=2"}, kSkyPilot);
  CHECK(nproc.nproc_per_node == 2);
  const EnvPresetSetting& overridden = nproc.env_preset_settings.back();
  CHECK(overridden.option == "nproc_per_node");
  CHECK(overridden.overridden_by == "--nproc_per_node");
  CHECK(by_pet.env_preset_settings[2].overridden_by == "PET_MASTER_ADDR");
  CHECK(by_pet.env_preset_settings[1].overridden_by.empty());
}

TEST_CASE("an overridden variable is still checked", "[env_presets][cli]") {
  CHECK_THAT(ConfigError({"--env_preset=slurm", "--nnodes=2"}, With(kSlurm, "SLURM_NNODES", "x")),
             Catch::StartsWith("--env_preset=slurm: SLURM_NNODES=x"));
  CHECK_THAT(ConfigError({}, With(kSlurm, "PET_ENV_PRESET", "lsf")),
             Catch::StartsWith("PET_ENV_PRESET=lsf: unknown preset; known: aiplatform"));
  CHECK_THAT(ConfigError({"--env_preset=slurm"}, With(kSlurm, "SLURM_JOB_ID", std::nullopt)),
             Catch::StartsWith("--env_preset=slurm: SLURM_JOB_ID is not set"));
}

TEST_CASE("a single-node preset without a port goes standalone like torchrun", "[env_presets]") {
  const Env env = With(With(kSlurm, "SLURM_NNODES", "1"), "SLURM_NODEID", "0");
  const LaunchConfig config = Config({"--env_preset=slurm"}, env);
  CHECK(config.standalone);
  CHECK(config.rdzv_id != "4242");
  CHECK(Config({"--env_preset=slurm"}, With(env, "MASTER_PORT", "29400")).rdzv_id == "4242");
}

TEST_CASE("dry run of a multi-node preset shows this node's ranks", "[env_presets][dry_run]") {
  LaunchConfig config = Config({"--env_preset=slurm", "--nproc_per_node=2"}, kSlurm);
  std::ostringstream out;
  ddprun::launcher::PrintDryRun(out, config, {{"PATH", "/bin"}}, {{"PATH", "/bin"}});
  const std::string text = out.str();
  CHECK_THAT(text, Catch::Contains("    --nnodes=4 (SLURM_NNODES)\n"));
  CHECK_THAT(text, Catch::Contains("  ranks            : 4-5 of world size 8\n"));
  CHECK_THAT(text, Catch::Contains("every node runs nproc_per_node=2"));
  CHECK_THAT(text, Catch::Contains("worker local_rank=1 rank=5\n  command: /bin/true\n"));
  CHECK_THAT(text, Catch::Contains("  env: MASTER_ADDR=node01\n  env: MASTER_PORT=29500\n"));
  CHECK_THAT(text,
             Catch::Contains("  env: TORCHELASTIC_ERROR_FILE=<log_dir>/attempt_0/1/error.json"));
  CHECK_THAT(text, Catch::Contains("  env: TORCHELASTIC_USE_AGENT_STORE=True\n"));
  CHECK(text.find("PATH=") == std::string::npos);
  // The CLI refuses a node rank outside the preset's nodes, for the run and the dry run alike.
  CHECK_THAT(ConfigError({"--env_preset=slurm", "--node_rank=4"}, kSlurm),
             Catch::StartsWith("--node_rank=4: must be below the number of nodes "
                               "(--env_preset=slurm: SLURM_NNODES=4)"));
}
