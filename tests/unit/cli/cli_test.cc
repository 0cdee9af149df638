// ParseCommandLine's top level (cli/cli.cc): PET_* defaults and the names messages give them,
// repeated options, odd input, --help and --version, and the ddprun-launch personality.
#include "cli/cli.h"

#include <catch2/catch.hpp>
#include <regex>

#include "common/errors.h"
#include "tests/unit/cli/cli_test_util.h"

namespace {

using ddprun::UsageError;
using ddprun::cli::CliResult;
using ddprun::cli::ParseCommandLine;
using ddprun::cli::Personality;
using ddprun::elastic::LaunchConfig;
using ddprun::elastic::RunMode;
using namespace ddprun::cli::testing;

}  // namespace

TEST_CASE("PET_* variables give defaults, the command line wins", "[cli]") {
  const Env env = {{"PET_NPROC_PER_NODE", "3"},
                   {"PET_NNODES", "2:4"},
                   {"PET_MAX_RESTARTS", "5"},
                   {"PET_RDZV_BACKEND", "static"},
                   {"PET_RDZV_ENDPOINT", "h:1"},
                   {"PET_REDIRECTS", "3"},
                   {"PET_TEE", "0:1"},
                   {"PET_ROLE", "r"},
                   {"PET_MONITOR_INTERVAL", "2"},
                   {"PET_LOG_LINE_PREFIX_TEMPLATE", "p"},
                   {"PET_SHUTDOWN_TIMEOUT", "9"}};
  const LaunchConfig config = Config({Train()}, env);
  CHECK(config.nproc_per_node == 3);
  CHECK(config.min_nodes == 2);
  CHECK(config.max_nodes == 4);
  CHECK(config.max_restarts == 5);
  CHECK(config.rdzv_backend == "static");
  CHECK(config.rdzv_endpoint == "h:1");
  CHECK(config.master_addr == "h");
  CHECK(config.master_port == 1);
  CHECK(config.redirects.all == 3);
  CHECK(config.tee.For(0) == 1);
  CHECK(config.role == "r");
  CHECK(config.monitor_interval_s == 2.0);
  CHECK(config.log_line_prefix_template == "p");
  CHECK(config.shutdown_timeout == std::chrono::seconds(9));
  const LaunchConfig overridden =
      Config({"--nproc_per_node=1", "--nnodes=1", "--max_restarts=0", Train()}, env);
  CHECK(overridden.nproc_per_node == 1);
  CHECK(overridden.max_nodes == 1);
  CHECK(overridden.max_restarts == 0);
}

TEST_CASE("PET_* values are validated and named in messages", "[cli]") {
  CHECK_THAT(ErrorOf({Train()}, {{"PET_NNODES", "abc"}}), Catch::StartsWith("PET_NNODES=abc: "));
  CHECK_THAT(ErrorOf({Train()}, {{"PET_MAX_RESTARTS", "-1"}}),
             Catch::StartsWith("PET_MAX_RESTARTS=-1: "));
  CHECK_THAT(ErrorOf({Train()}, {{"PET_NPROC_PER_NODE", "0"}}),
             Catch::StartsWith("PET_NPROC_PER_NODE=0: "));
  CHECK_THAT(ErrorOf({Train()}, {{"PET_MASTER_PORT", "70000"}}),
             Catch::StartsWith("PET_MASTER_PORT=70000: "));
  CHECK_THAT(ErrorOf({Train()}, {{"PET_RDZV_ENDPOINT", "h:x"}, {"PET_RDZV_BACKEND", "c10d"}}),
             Catch::StartsWith("PET_RDZV_ENDPOINT=h:x: "));
  // A bad PET_ value does not matter when the command line gives the option.
  CHECK(Config({"--nnodes=1", Train()}, {{"PET_NNODES", "abc"}}).max_nodes == 1);
}

TEST_CASE("PET_* boolean flags: 1 on, 0 off, anything else an error", "[cli]") {
  CHECK(Config({Train()}, {{"PET_STANDALONE", "1"}}).standalone_flag);
  CHECK_FALSE(Config({Train()}, {{"PET_STANDALONE", "0"}}).standalone_flag);
  CHECK_THAT(
      ErrorOf({Train()}, {{"PET_STANDALONE", "yes"}}),
      Catch::StartsWith("PET_STANDALONE=yes: ") && Catch::Contains("1") && Catch::Contains("0"));
  CHECK(Config({"-m", "x"}, {{"PET_STANDALONE", "0"}}).run_mode == RunMode::kModule);
  CHECK(Config({"x"}, {{"PET_MODULE", "1"}}).run_mode == RunMode::kModule);
  CHECK(Config({Train()}, {{"PET_VIRTUAL_LOCAL_RANK", "1"}}).virtual_local_rank);
  CHECK(Config({"--standalone", Train()}, {{"PET_STANDALONE", "bad"}}).standalone_flag);
}

TEST_CASE("options without a PET_ variable ignore the environment", "[cli]") {
  const LaunchConfig config = Config({Train()}, {{"PET_LOGS_SPECS", "x"},
                                                 {"PET_NUMA_BINDING", "bad"},
                                                 {"PET_DRY_RUN", "1"},
                                                 {"PET_PYTHON", "/x"}});
  CHECK_FALSE(config.logs_specs);
  CHECK_FALSE(config.numa_binding);
  CHECK_FALSE(config.dry_run);
  CHECK(config.python == "python3");
}

TEST_CASE("option --help and --version print and exit", "[cli]") {
  for (const Args& args : {Args{"--help"}, Args{"-h"}, Args{"--nnodes", "2", "--help"}}) {
    const CliResult result = Parse(args);
    REQUIRE(result.action == CliResult::Action::kPrintAndExit);
    CHECK_THAT(
        result.text,
        Catch::Contains("usage: ddprun [options] training_script [training_script_args...]"));
    for (const char* group :
         {"Worker/node size:", "Rendezvous:", "User-code launch:", "Logging:",
          "torchrun compatibility:", "--nproc-per-node", "[PET_NPROC_PER_NODE]", "--dry_run"}) {
      CHECK_THAT(result.text, Catch::Contains(group));
    }
    // No option is accepted without effect any more (issue 25).
    CHECK_THAT(result.text, !Catch::Contains("no effect"));
  }
  const CliResult version = Parse({"--version"});
  CHECK(version.action == CliResult::Action::kPrintAndExit);
  CHECK(std::regex_match(version.text, std::regex("ddprun [0-9]+\\.[0-9]+\\.[0-9]+.*\n")));
}

TEST_CASE("repeated options: the last one wins", "[cli]") {
  CHECK(ConfigWith({"--nnodes=2", "--nnodes=3"}).max_nodes == 3);
  CHECK(ConfigWith({"--standalone", "--standalone"}).standalone_flag);
}

TEST_CASE("odd input only ever raises UsageError", "[cli]") {
  const std::vector<Args> inputs = {
      {"--nnodes="},
      {"-"},
      {"--", "--"},
      {"-r="},
      {"--nproc_per_node", ""},
      {"-=x"},
      {"--master_port", "[1]"},
      {"--nnodes=[1,2]", Train()},
      {"--rdzv_endpoint=[", Train()},
      {"---"},
      {"-mx"},
  };
  for (const Args& args : inputs) {
    INFO(args.front());
    try {
      Parse(args);
    } catch (const UsageError&) {
    }
  }
}

TEST_CASE("ddprun-launch: torch.distributed.launch's --local_rank unless --use_env", "[cli]") {
  using ddprun::cli::PersonalityOf;
  CHECK(PersonalityOf("ddprun-launch") == Personality::kLegacyLaunch);
  CHECK(PersonalityOf("/usr/bin/ddprun-launch") == Personality::kLegacyLaunch);
  CHECK(PersonalityOf("ddprun") == Personality::kTorchrun);
  CHECK(PersonalityOf("/opt/ddprun-launch/bin/ddprun") == Personality::kTorchrun);
  CHECK(PersonalityOf("ddprun-launch.sh") == Personality::kTorchrun);
  CHECK(PersonalityOf(nullptr) == Personality::kTorchrun);

  CHECK(LegacyConfig({Train()}).local_rank_arg == "local_rank");
  CHECK_FALSE(LegacyConfig({"--use_env", Train()}).local_rank_arg);
  CHECK(LegacyConfig({"--pass_local_rank=local-rank", Train()}).local_rank_arg == "local-rank");
  // AzureML's line, `python -m torch.distributed.launch` replaced by ddprun-launch.
  const std::string train = Train();
  const LaunchConfig azureml =
      LegacyConfig({"--nproc_per_node", "2", "--nnodes", "2", "--node_rank", "1", "--master_addr",
                    "10.0.0.4", "--master_port", "6105", train, "--epochs", "3"});
  CHECK(azureml.rdzv_endpoint == "10.0.0.4:6105");
  CHECK(DryRunCommands(azureml) == Args{"python3 -u " + train + " --local_rank=0 --epochs 3",
                                        "python3 -u " + train + " --local_rank=1 --epochs 3"});
  // torch.distributed.launch's rule: a program run without Python gets no --local_rank.
  CHECK_THAT(LegacyError({"--no_python", Files().Path("trainer")}),
             Catch::StartsWith("When using the '--no_python' flag, you must also set the "
                               "'--use_env' flag"));
  CHECK_FALSE(LegacyConfig({"--no_python", "--use_env", Files().Path("trainer")}).local_rank_arg);
  CHECK(LegacyConfig({"--no_python", "--pass_local_rank=local_rank", Files().Path("trainer")})
            .local_rank_arg == "local_rank");

  const CliResult help =
      ParseCommandLine({"--help"}, FakeEnv({}), Gpus(0), Personality::kLegacyLaunch);
  REQUIRE(help.action == CliResult::Action::kPrintAndExit);
  CHECK_THAT(help.text, Catch::Contains("usage: ddprun-launch [options] training_script") &&
                            Catch::Contains("--local_rank=N right after the script, unless "
                                            "--use_env"));
  CHECK_THAT(Parse({"--help"}).text, Catch::Contains("torch.distributed.launch compatibility:") &&
                                         !Catch::Contains("As ddprun-launch"));
}
