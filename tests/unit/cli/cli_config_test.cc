// From option values to a LaunchConfig (cli/cli_config.cc): defaults, the endpoint, Python, the
// shutdown timeout, logging, run mode and script checks, the standalone switch, the event log,
// the health port and the --local_rank argument.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <regex>

#include "tests/unit/cli/cli_test_util.h"

namespace {

using ddprun::elastic::LaunchConfig;
using ddprun::elastic::RunMode;
namespace fs = std::filesystem;
using namespace ddprun::cli::testing;

}  // namespace

TEST_CASE("defaults are torchrun's, single node goes standalone", "[cli]") {
  const LaunchConfig config = Config({Train()});
  CHECK(config.min_nodes == 1);
  CHECK(config.max_nodes == 1);
  CHECK(config.nproc_per_node == 1);
  CHECK(config.rdzv_backend == "c10d");
  CHECK(config.rdzv_endpoint == "localhost:0");
  CHECK(config.standalone);
  CHECK_FALSE(config.standalone_flag);
  CHECK(config.master_port == 29500);
  CHECK(config.max_restarts == 0);
  CHECK(config.monitor_interval_s == 0.1);
  CHECK(config.shutdown_timeout == std::chrono::seconds(30));
  CHECK(config.python == "python3");
  CHECK(config.run_mode == RunMode::kPython);
  CHECK(config.training_script == Train());
  CHECK(config.training_script_args.empty());
  CHECK(config.rdzv_conf == std::map<std::string, std::string>{{"timeout", "900"}});
  CHECK(config.redirects.For(0) == 0);
  CHECK_FALSE(config.log_dir);
  CHECK_FALSE(config.dry_run);
}

TEST_CASE("option --rdzv_endpoint is host[:port]", "[cli]") {
  CHECK(ConfigWith({"--rdzv_backend=c10d", "--rdzv_endpoint=[::1]:29400"}).rdzv_endpoint ==
        "[::1]:29400");
  CHECK_THAT(ErrorWith({"--rdzv_backend=c10d", "--rdzv_endpoint=h:99999"}),
             Catch::StartsWith("--rdzv_endpoint=h:99999: "));
  CHECK_THAT(ErrorWith({"--rdzv_endpoint=h"}),
             Catch::StartsWith("--rdzv_endpoint=h: ") && Catch::Contains("HOST:PORT"));
}

TEST_CASE("option --python, then DDPRUN_PYTHON, then PYTHON_EXEC, then python3", "[cli]") {
  const Env env = {{"DDPRUN_PYTHON", "/d/python"}, {"PYTHON_EXEC", "/p/python"}};
  CHECK(ConfigWith({"--python", "/f/python"}, env).python == "/f/python");
  CHECK(ConfigWith({}, env).python == "/d/python");
  CHECK(ConfigWith({}, {{"PYTHON_EXEC", "/p/python"}}).python == "/p/python");
  CHECK(ConfigWith({}, {{"DDPRUN_PYTHON", ""}}).python == "python3");
  CHECK_THAT(ErrorWith({"--python="}), Catch::StartsWith("--python=: "));
}

TEST_CASE("shutdown timeout: flag, PET_, TORCH_ELASTIC_SHUTDOWN_TIMEOUT, 30", "[cli]") {
  const Env env = {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "5"}};
  CHECK(ConfigWith({}, env).shutdown_timeout == std::chrono::seconds(5));
  CHECK(ConfigWith({"--shutdown-timeout=2"}, env).shutdown_timeout == std::chrono::seconds(2));
  CHECK_THAT(ErrorWith({}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "x"}}),
             Catch::StartsWith("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=x: "));
}

TEST_CASE("log line prefix template: flag, then TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[cli]") {
  const Env env = {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${rank}]"}};
  CHECK(ConfigWith({}, env).log_line_prefix_template == "[${rank}]");
  CHECK(ConfigWith({"--log-line-prefix-template=${local_rank}:"}, env).log_line_prefix_template ==
        "${local_rank}:");
  CHECK_FALSE(ConfigWith({}).log_line_prefix_template);
}

TEST_CASE("option --log_dir must not be a file", "[cli]") {
  CHECK(ConfigWith({"--log_dir", Files().Dir()}).log_dir == Files().Dir());
  CHECK(ConfigWith({"--log_dir=/nonexistent/new"}).log_dir == "/nonexistent/new");
  CHECK_THAT(ErrorWith({"--log_dir", Train()}),
             Catch::StartsWith("--log_dir=" + Train() + ": is a file"));
}

TEST_CASE("run modes", "[cli]") {
  CHECK(Config({"-m", "pkg.mod"}).run_mode == RunMode::kModule);
  CHECK(Config({"--module", "not.a.file"}).training_script == "not.a.file");
  CHECK(Config({"--no_python", Files().Path("trainer")}).run_mode == RunMode::kNoPython);
  CHECK(Config({"--run_path", Train()}).run_mode == RunMode::kRunPath);
  CHECK(Config({"--run_path", "--no_python", "-m", Train()}).run_mode == RunMode::kRunPath);
  CHECK(Config({Files().Path("tool.py")}).run_mode == RunMode::kPython);
  CHECK(Config({Files().Path("data")}).run_mode == RunMode::kPython);
}

TEST_CASE("an executable that is not a .py file runs without Python", "[cli]") {
  const LaunchConfig config = Config({Files().Path("trainer"), "--lr", "1"});
  CHECK(config.run_mode == RunMode::kNoPython);
  CHECK(config.training_script == Files().Path("trainer"));
  const auto cwd = fs::current_path();
  fs::current_path(Files().Dir());
  const LaunchConfig relative = Config({"trainer"});
  fs::current_path(cwd);
  CHECK(relative.run_mode == RunMode::kNoPython);
  CHECK(relative.training_script == "./trainer");
}

TEST_CASE("option -m with --no_python is torchrun's error", "[cli]") {
  CHECK(ErrorOf({"-m", "--no_python", "x"}) ==
        "Don't use both the '--no-python' flag and the '--module' flag at the same time.");
}

TEST_CASE("the training script must exist", "[cli]") {
  const std::string missing = Files().Path("missing.py");
  CHECK_THAT(ErrorOf({missing}),
             Catch::StartsWith("training script '" + missing + "': no such file"));
  CHECK_THAT(ErrorOf({"--run_path", missing}), Catch::Contains(missing));
  CHECK_THAT(ErrorOf({"--no_python", missing}), Catch::Contains("'" + missing + "': no such file"));
  // An existing file that cannot be executed is left to the spawner (exit 126 with the reason).
  CHECK(Config({"--no_python", Files().Path("data")}).run_mode ==
        ddprun::elastic::RunMode::kNoPython);
  CHECK(Config({"--no_python", "trainer"}, {{"PATH", "/nonexistent:" + Files().Dir()}})
            .training_script == "trainer");
  CHECK_THAT(ErrorOf({"--no_python", "trainer"}, {{"PATH", "/nonexistent"}}),
             Catch::Contains("'trainer': not found on PATH"));
}

TEST_CASE("option --standalone forces c10d on localhost:0 with a random id", "[cli]") {
  const LaunchConfig config = ConfigWith({"--standalone", "--rdzv_backend=etcd",
                                          "--rdzv_endpoint=h:1", "--rdzv_id=mine", "--nnodes=2"});
  CHECK(config.rdzv_backend == "c10d");
  CHECK(config.rdzv_endpoint == "localhost:0");
  CHECK(config.rdzv_id != "mine");
  CHECK(std::regex_match(
      config.rdzv_id,
      std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")));
  CHECK(config.standalone);
  CHECK(config.standalone_flag);
  CHECK(config.max_nodes == 2);
  CHECK(config.master_port == 29500);
  CHECK(ConfigWith({"--standalone"}).rdzv_id != ConfigWith({"--standalone"}).rdzv_id);
}

TEST_CASE("static single node without port or endpoint goes standalone silently", "[cli]") {
  CHECK(ConfigWith({}).standalone);
  CHECK_FALSE(ConfigWith({}).standalone_flag);
  const auto is_static = [](const LaunchConfig& config) {
    return config.rdzv_backend == "static" && !config.standalone;
  };
  CHECK(is_static(ConfigWith({"--master_port=1234"})));
  CHECK(is_static(ConfigWith({"--nnodes=2"})));
  CHECK(is_static(ConfigWith({"--nnodes=1:2"})));
  CHECK(is_static(ConfigWith({"--rdzv_endpoint=h:5"})));
  CHECK(is_static(Config({Train()}, {{"PET_MASTER_PORT", "1234"}})));
  CHECK_FALSE(ConfigWith({"--rdzv_backend=c10d"}).standalone);
}

TEST_CASE("static endpoint is master_addr:master_port, rank from --node_rank", "[cli]") {
  const LaunchConfig config =
      ConfigWith({"--nnodes=2", "--node_rank=1", "--master_addr=10.1.2.3", "--master_port=29555"});
  CHECK(config.rdzv_endpoint == "10.1.2.3:29555");
  CHECK(config.rdzv_conf.at("rank") == "1");
  CHECK(config.rdzv_conf.at("timeout") == "900");
  CHECK(ConfigWith({"--nnodes=2"}).rdzv_endpoint == "127.0.0.1:29500");
  CHECK(ConfigWith({"--nnodes=2", "--master_addr=::1"}).rdzv_endpoint == "[::1]:29500");
  CHECK(ConfigWith({"--rdzv_backend=c10d", "--nnodes=1"}).rdzv_endpoint.empty());
  CHECK_FALSE(ConfigWith({"--rdzv_backend=c10d"}).rdzv_conf.contains("rank"));
}

TEST_CASE("option --dry_run is stored", "[cli]") { CHECK(ConfigWith({"--dry_run"}).dry_run); }

TEST_CASE("option --event_log, else $DDPRUN_EVENT_LOG", "[cli]") {
  CHECK_FALSE(ConfigWith({}).event_log.has_value());
  CHECK(ConfigWith({"--event_log=/tmp/e.jsonl"}).event_log == "/tmp/e.jsonl");
  CHECK(ConfigWith({"--event-log", "/tmp/e.jsonl"}).event_log == "/tmp/e.jsonl");
  const LaunchConfig from_env = Config({Train()}, {{"DDPRUN_EVENT_LOG", "/tmp/env.jsonl"}});
  CHECK(from_env.event_log == "/tmp/env.jsonl");
  CHECK(from_env.GivenAs("event_log") == "DDPRUN_EVENT_LOG");
  CHECK(Config({"--event_log=/tmp/flag.jsonl", Train()}, {{"DDPRUN_EVENT_LOG", "/tmp/env"}})
            .event_log == "/tmp/flag.jsonl");
  CHECK_THAT(ErrorWith({"--event_log="}), Catch::StartsWith("--event_log=: must name a file"));
}

TEST_CASE("option --health_port: a port, 0 ephemeral, off by default, loopback", "[cli][health]") {
  CHECK_FALSE(ConfigWith({}).health_port);
  CHECK(ConfigWith({}).health_addr == "127.0.0.1");
  CHECK(ConfigWith({"--health-port", "9400"}).health_port == 9400);
  CHECK(ConfigWith({"--health_port=0"}).health_port == 0);
  CHECK(ConfigWith({"--health_port=0", "--health-addr=0.0.0.0"}).health_addr == "0.0.0.0");
  for (const std::string bad : {"-1", "65536", "http", ""}) {
    INFO(bad);
    CHECK_THAT(ErrorWith({"--health-port=" + bad}),
               Catch::StartsWith("--health_port=" + bad + ": must be a port between 0 and 65535"));
  }
  CHECK_THAT(ErrorWith({"--health_addr="}), Catch::StartsWith("--health_addr=: must name"));
}

TEST_CASE("option --health_port defaults to PET_HEALTH_PORT, then TORCHELASTIC_HEALTH_CHECK_PORT",
          "[cli][health]") {
  const Env torch = {{"TORCHELASTIC_HEALTH_CHECK_PORT", "29400"}};
  CHECK(Config({Train()}, torch).health_port == 29400);
  CHECK(Config({Train()}, torch).GivenAs("health_port") == "TORCHELASTIC_HEALTH_CHECK_PORT");
  CHECK(Config({Train()}, {{"TORCHELASTIC_HEALTH_CHECK_PORT", "1"}, {"PET_HEALTH_PORT", "2"}})
            .health_port == 2);
  CHECK(Config({"--health_port=3", Train()}, torch).health_port == 3);
  CHECK_THAT(ErrorOf({Train()}, {{"TORCHELASTIC_HEALTH_CHECK_PORT", "x"}}),
             Catch::StartsWith("TORCHELASTIC_HEALTH_CHECK_PORT=x: must be a port"));
}

TEST_CASE("option --use_env is torch.distributed.launch's, and torchrun's behaviour", "[cli]") {
  for (const char* spelling : {"--use_env", "--use-env", "--use"}) {
    INFO(spelling);
    const LaunchConfig config = Config({spelling, Train(), "--lr", "1"});
    CHECK_FALSE(config.local_rank_arg);
    CHECK(config.training_script_args == Args{"--lr", "1"});
    CHECK_FALSE(LegacyConfig({spelling, Train()}).local_rank_arg);
  }
  CHECK_FALSE(Config({Train()}).local_rank_arg);  // torchrun never passes --local_rank
  CHECK_FALSE(Config({Train()}, {{"PET_USE_ENV", "0"}}).local_rank_arg);
  CHECK(LegacyConfig({Train()}, {{"PET_USE_ENV", "1"}}).local_rank_arg == "local_rank");  // no PET_
  CHECK(ErrorWith({"--use_env=1"}) == "argument --use_env: ignored explicit argument '1'");
}

TEST_CASE("option --pass_local_rank takes local_rank or local-rank", "[cli]") {
  CHECK(ConfigWith({"--pass_local_rank", "local_rank"}).local_rank_arg == "local_rank");
  CHECK(ConfigWith({"--pass-local-rank=local-rank"}).local_rank_arg == "local-rank");
  CHECK(ConfigWith({"--pass=local-rank"}).local_rank_arg == "local-rank");
  CHECK_FALSE(Config({Train()}, {{"PET_PASS_LOCAL_RANK", "local_rank"}}).local_rank_arg);
  CHECK(ErrorWith({"--pass_local_rank=localrank"}) ==
        "--pass_local_rank=localrank: invalid choice; use local_rank or local-rank");
  CHECK(ErrorWith({"--pass-local-rank", ""}) ==
        "--pass_local_rank=: invalid choice; use local_rank or local-rank");
  CHECK(ErrorWith({"--use_env", "--pass_local_rank=local_rank"}) ==
        "--pass_local_rank=local_rank: contradicts --use_env (the local rank in LOCAL_RANK "
        "only); give one");
  // --local_rank still abbreviates --local_ranks_filter, as in torchrun.
  CHECK(ConfigWith({"--local_rank", "0,1"}).local_ranks_filter == std::vector<int>{0, 1});
}

TEST_CASE("the local rank argument comes right after the script, as torch.distributed.launch",
          "[cli][dry_run]") {
  const std::string train = Train();
  const LaunchConfig python =
      ConfigWith({"--nproc_per_node=2", "--pass_local_rank=local_rank", "--python=/p/python3"});
  CHECK(DryRunCommands(python) == Args{"/p/python3 -u " + train + " --local_rank=0",
                                       "/p/python3 -u " + train + " --local_rank=1"});
  const LaunchConfig args = Config({"--nproc_per_node=2", "--pass_local_rank=local-rank", train,
                                    "--epochs", "3", "--", "--local-rank=9"});
  CHECK(DryRunCommands(args) ==
        Args{"python3 -u " + train + " --local-rank=0 --epochs 3 -- --local-rank=9",
             "python3 -u " + train + " --local-rank=1 --epochs 3 -- --local-rank=9"});
  const LaunchConfig module =
      Config({"--nproc_per_node=2", "--pass_local_rank=local_rank", "-m", "pkg.train", "x"});
  CHECK(DryRunCommands(module).at(1) == "python3 -u -m pkg.train --local_rank=1 x");
  const std::string trainer = Files().Path("trainer");
  CHECK(DryRunCommands(Config({"--pass_local_rank=local_rank", "--no_python", trainer, "y"})) ==
        Args{trainer + " --local_rank=0 y"});
  CHECK_THAT(
      DryRunCommands(Config({"--pass_local_rank=local_rank", "--run_path", train, "z"})).at(0),
      Catch::EndsWith(" " + train + " --local_rank=0 z"));
  CHECK(DryRunCommands(Config({"--nproc_per_node=2", train, "a"})).at(1) ==
        "python3 -u " + train + " a");
}
