#include "cli/cli.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "common/errors.h"
#include "cli/cli_internal.h"
#include "launcher/dry_run.h"
#include "tests/unit/cli/cli_test_util.h"

namespace {

using ddprun::UsageError;
using ddprun::elastic::LaunchConfig;
using ddprun::elastic::RunMode;
using ddprun::cli::CliResult;
using ddprun::cli::EnvLookup;
using ddprun::cli::GpuCount;
using ddprun::cli::GpuCounter;
using ddprun::cli::ParseCommandLine;
using ddprun::cli::Personality;
namespace fs = std::filesystem;
namespace cli = ddprun::cli;
using namespace ddprun::cli::testing;

// A valid value for every option, for the spelling tests.
const std::map<std::string, std::string> kSamples = {
    {"nnodes", "1"},
    {"nproc_per_node", "2"},
    {"rdzv_backend", "c10d"},
    {"rdzv_endpoint", "host:29400"},
    {"rdzv_id", "job"},
    {"rdzv_conf", "join_timeout=5"},
    {"node_rank", "0"},
    {"master_addr", "10.0.0.1"},
    {"master_port", "1234"},
    {"local_addr", "10.0.0.2"},
    {"max_restarts", "2"},
    {"monitor_interval", "0.5"},
    {"role", "trainer"},
    {"python", "/usr/bin/python3"},
    {"signals_to_handle", "SIGUSR1"},
    {"shutdown_timeout", "7"},
    {"log_dir", "/tmp/ddprun_cli_test_logs"},
    {"redirects", "3"},
    {"tee", "1"},
    {"local_ranks_filter", "0"},
    {"duplicate_stdout_filters", "x"},
    {"duplicate_stderr_filters", "y"},
    {"log_line_prefix_template", "${rank}:"},
    {"start_method", "fork"},
    {"event_log_handler", "console"},
    {"env_preset", ""},
    {"logs_specs", "mine"},
    {"numa_binding", "node"},
    {"event_log", "/tmp/ddprun_cli_test_events.jsonl"},
    {"pass_local_rank", "local_rank"},
    {"hang_timeout", "0.5"},
    {"hang_startup_timeout", "5"},
    {"hang_timeout_factor", "4"},
    {"hang_timeout_warmup", "10"},
    {"hang_timeout_floor", "2"},
    {"max_no_progress_hangs", "2"},
    {"health_port", "0"},
    {"health_addr", "127.0.0.1"},
};

// As ddprun-launch (torch.distributed.launch's stand-in).
LaunchConfig LegacyConfig(const Args& args, const Env& env = {}) {
  const CliResult result =
      ParseCommandLine(args, FakeEnv(env), Gpus(0), Personality::kLegacyLaunch);
  REQUIRE(result.action == CliResult::Action::kRun);
  return result.config;
}

std::string LegacyError(const Args& args) {
  return OneLineUsageError(
      [&] { ParseCommandLine(args, FakeEnv({}), Gpus(0), Personality::kLegacyLaunch); });
}

// What an option's sample needs beside it: those that apply only with hang detection on.
const std::map<std::string, Args> kNeeds = {
    {"hang_startup_timeout", {"--hang-timeout=5"}},
    {"hang_timeout_factor", {"--hang-timeout=auto"}},
    {"hang_timeout_warmup", {"--hang-timeout=auto"}},
    {"hang_timeout_floor", {"--hang-timeout=auto"}},
};

Args WithNeeds(const std::string& dest, Args args) {
  const auto needs = kNeeds.find(dest);
  if (needs != kNeeds.end()) args.insert(args.begin(), needs->second.begin(), needs->second.end());
  return args;
}

// Each worker's command line (by local rank) as --dry_run shows it.
std::vector<std::string> DryRunCommands(const LaunchConfig& config) {
  std::ostringstream out;
  ddprun::launcher::PrintDryRun(out, config, {}, {});
  std::vector<std::string> commands;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("  command: ")) commands.push_back(line.substr(11));
  }
  return commands;
}

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

TEST_CASE("every option accepts every spelling", "[cli]") {
  for (const cli::OptionSpec& spec : cli::Options()) {
    const std::string dest = spec.dest;
    if (dest == "help" || dest == "version" || dest == "print_completion") continue;
    for (const std::string& name : cli::LongNames(spec)) {
      INFO(name);
      if (dest == "no_python") {
        CHECK_NOTHROW(Config({name, Files().Path("trainer")}));
      } else if (dest == "logs_specs") {  // known under every spelling, and refused
        CHECK_THAT(ErrorWith({name, "mine"}), Catch::StartsWith("--logs_specs=mine: "));
      } else if (spec.metavar == nullptr) {
        CHECK_NOTHROW(ConfigWith({name}));
      } else {
        CHECK_NOTHROW(ConfigWith(WithNeeds(dest, {name, kSamples.at(dest)})));
        CHECK_NOTHROW(ConfigWith(WithNeeds(dest, {name + "=" + kSamples.at(dest)})));
      }
    }
  }
  CHECK(ConfigWith({"--nproc-per-node", "3"}).nproc_per_node == 3);
  CHECK(ConfigWith({"--nproc_per_node=3"}).nproc_per_node == 3);
  CHECK(ConfigWith({"--max-restarts=4"}).max_restarts == 4);
  CHECK(ConfigWith({"--shutdown-timeout", "4"}).shutdown_timeout == std::chrono::seconds(4));
  CHECK(ConfigWith({"--dry-run"}).dry_run);
}

TEST_CASE("short options -m, -r, -t and -h", "[cli]") {
  CHECK(Config({"-m", "pkg.train"}).run_mode == RunMode::kModule);
  CHECK(ConfigWith({"-r", "3"}).redirects.all == 3);
  CHECK(ConfigWith({"-r2"}).redirects.all == 2);
  CHECK(ConfigWith({"-r=1"}).redirects.all == 1);
  CHECK(ConfigWith({"-t", "0:1,1:3"}).tee.For(1) == 3);
  CHECK(Parse({"-h"}).action == CliResult::Action::kPrintAndExit);
  CHECK(Parse({"-mh"}).action == CliResult::Action::kPrintAndExit);
  CHECK_THAT(ErrorOf({"-x", Train()}), Catch::Contains("unrecognized argument -x"));
  CHECK_THAT(ErrorOf({"-r"}), Catch::Contains("argument --redirects: expected one argument"));
}

TEST_CASE("unambiguous prefixes are accepted", "[cli]") {
  CHECK(ConfigWith({"--nproc=4"}).nproc_per_node == 4);
  CHECK(ConfigWith({"--nproc", "4"}).nproc_per_node == 4);
  CHECK(ConfigWith({"--nproc-per", "5"}).nproc_per_node == 5);
  CHECK(ConfigWith({"--master_p", "29561"}).master_port == 29561);
  CHECK(ConfigWith({"--master-p=29562"}).master_port == 29562);
  CHECK(ConfigWith({"--stand"}).standalone_flag);
  CHECK_THAT(Parse({"--vers"}).text, Catch::StartsWith("ddprun "));
  CHECK(Parse({"--hel"}).action == CliResult::Action::kPrintAndExit);  // --he: --health_*
}

TEST_CASE("ambiguous prefixes name every candidate", "[cli]") {
  const std::string message = ErrorWith({"--d", "x"});
  CHECK_THAT(message, Catch::Contains("ambiguous option: --d"));
  CHECK_THAT(message, Catch::Contains("--dry_run"));
  CHECK_THAT(message, Catch::Contains("--duplicate_stdout_filters"));
  CHECK_THAT(message, Catch::Contains("--duplicate_stderr_filters"));
  CHECK_THAT(ErrorWith({"--mo"}),
             Catch::Contains("--module") && Catch::Contains("--monitor_interval"));
  CHECK_THAT(ErrorWith({"--rdzv", "x"}), Catch::Contains("ambiguous option: --rdzv"));
}

TEST_CASE("normalisation rewrites options to canonical tokens", "[cli]") {
  const cli::SplitArgs split = cli::NormaliseArgs(
      {"--nproc-per=2", "-m", "--master_p", "-1", "-t3", "mod", "--nnodes", "9"});
  CHECK(split.options ==
        Args{"--nproc_per_node", "2", "--module", "--master_port", "-1", "--tee", "3"});
  CHECK(split.script == "mod");
  CHECK(split.script_args == Args{"--nnodes", "9"});
}

TEST_CASE("a flag given a value and an option without one are errors", "[cli]") {
  CHECK(ErrorWith({"--standalone=1"}) == "argument --standalone: ignored explicit argument '1'");
  CHECK_THAT(ErrorOf({"--nnodes"}), Catch::Contains("argument --nnodes: expected one argument"));
  CHECK_THAT(ErrorOf({"--nnodes", "--standalone", Train()}),
             Catch::Contains("argument --nnodes: expected one argument"));
}

TEST_CASE("negative numbers are values, not options", "[cli]") {
  CHECK_THAT(ErrorWith({"--max_restarts", "-1"}), Catch::Contains("--max_restarts=-1"));
  CHECK_THAT(ErrorWith({"--monitor_interval", "-.5"}), Catch::Contains("--monitor_interval=-.5"));
}

TEST_CASE("everything after the script goes to the script untouched", "[cli]") {
  const LaunchConfig config =
      Config({"--nnodes", "1", Train(), "--nnodes", "5", "-h", "--bogus", "--version", "x"});
  CHECK(config.training_script_args == Args{"--nnodes", "5", "-h", "--bogus", "--version", "x"});
  CHECK(config.min_nodes == 1);
}

TEST_CASE("one lone -- before or after the script is dropped", "[cli]") {
  CHECK(Config({Train(), "--", "--x", "y"}).training_script_args == Args{"--x", "y"});
  CHECK(Config({"--nproc", "2", "--", Train(), "a"}).training_script_args == Args{"a"});
  CHECK(Config({"--", Train(), "--", "a"}).training_script_args == Args{"--", "a"});
  CHECK(Config({Train(), "--", "--", "a"}).training_script_args == Args{"--", "a"});
  CHECK(Config({Train(), "a", "--"}).training_script_args == Args{"a", "--"});
  CHECK(Config({"-m", "--", "--weird"}).training_script == "--weird");
  CHECK_THAT(ErrorOf({"--"}), Catch::StartsWith("the training script is missing"));
}

TEST_CASE("missing script and unknown options", "[cli]") {
  CHECK(ErrorOf({}) ==
        "the training script is missing: ddprun [options] training_script [args...]");
  CHECK(ErrorOf({"--nnodes", "2"}) ==
        "the training script is missing: ddprun [options] training_script [args...]");
  CHECK(ErrorWith({"--bogus"}) == "unrecognized argument --bogus; see ddprun --help");
  CHECK(ErrorWith({"--bogus=3"}) == "unrecognized argument --bogus=3; see ddprun --help");
  CHECK_THAT(ErrorWith({"--=3"}), Catch::Contains("unrecognized argument --=3"));
}

TEST_CASE("option --nnodes validation", "[cli]") {
  CHECK(ConfigWith({"--nnodes=2:4"}).min_nodes == 2);
  CHECK(ConfigWith({"--nnodes=2:4"}).max_nodes == 4);
  CHECK(ConfigWith({"--nnodes=3"}).max_nodes == 3);
  for (const std::string bad : {"0", "3:2", "a", "1:2:3", "0:2", "-1", "1:b", ""}) {
    const std::string message = ErrorWith({"--nnodes=" + bad});
    CHECK_THAT(message, Catch::StartsWith("--nnodes=" + bad + ": "));
    CHECK_THAT(message, Catch::Contains("MIN:MAX"));
  }
  CHECK_THAT(ErrorWith({"--nnodes=3:2"}), Catch::Contains("min_nodes=3, max_nodes=2"));
  CHECK_THAT(ErrorWith({"--nnodes=1:2:3"}), Catch::Contains("not in \"MIN:MAX\" format"));
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

TEST_CASE("integer and number options are range checked", "[cli]") {
  CHECK_THAT(ErrorWith({"--master_port=70000"}),
             Catch::StartsWith("--master_port=70000: ") && Catch::Contains("0 and 65535"));
  CHECK_THAT(ErrorWith({"--master_port=x"}), Catch::StartsWith("--master_port=x: "));
  CHECK_THAT(ErrorWith({"--max_restarts=-1"}),
             Catch::StartsWith("--max_restarts=-1: ") && Catch::Contains(">= 0"));
  CHECK_THAT(ErrorWith({"--max_restarts=1.5"}), Catch::StartsWith("--max_restarts=1.5: "));
  CHECK_THAT(ErrorWith({"--node_rank=-2"}), Catch::StartsWith("--node_rank=-2: "));
  for (const std::string bad : {"0", "-1", "abc", "nan", "inf"}) {
    CHECK_THAT(ErrorWith({"--monitor_interval=" + bad}),
               Catch::StartsWith("--monitor_interval=" + bad + ": ") && Catch::Contains("> 0"));
  }
  CHECK(ConfigWith({"--monitor_interval=5"}).monitor_interval_s == 5.0);
  CHECK_THAT(ErrorWith({"--shutdown-timeout=-3"}),
             Catch::StartsWith("--shutdown_timeout=-3: ") && Catch::Contains("non-negative"));
  CHECK(ConfigWith({"--shutdown_timeout=0"}).shutdown_timeout == std::chrono::seconds(0));
}

TEST_CASE("option --redirects and --tee take 0..3 or a per-rank map", "[cli]") {
  const LaunchConfig config = ConfigWith({"--redirects=0:1,3:2", "--tee=3"});
  CHECK(config.redirects.For(0) == 1);
  CHECK(config.redirects.For(3) == 2);
  CHECK(config.redirects.For(1) == 0);
  CHECK(config.tee.For(7) == 3);
  for (const std::string bad : {"9", "4", "0:4", "10:1", "0:1,", "a", ""}) {
    CHECK_THAT(ErrorWith({"--redirects=" + bad}),
               Catch::StartsWith("--redirects=" + bad + ": ") && Catch::Contains("0:1,1:3"));
    CHECK_THAT(ErrorWith({"-t", bad}), Catch::StartsWith("--tee=" + bad + ": "));
  }
}

TEST_CASE("option --local_ranks_filter is a comma list of integers", "[cli]") {
  CHECK(ConfigWith({"--local_ranks_filter=2,0,2"}).local_ranks_filter == std::vector<int>{0, 2});
  CHECK(ConfigWith({"--local_ranks_filter="}).local_ranks_filter.empty());
  for (const std::string bad : {"a", "0,,1", "0,", "1.5"}) {
    CHECK_THAT(ErrorWith({"--local_ranks_filter=" + bad}),
               Catch::StartsWith("--local_ranks_filter=" + bad + ": ") &&
                   Catch::Contains("comma-separated list of integers"));
  }
}

TEST_CASE("option --rdzv_conf is k=v,k=v", "[cli]") {
  const LaunchConfig config = ConfigWith({"--rdzv_backend=c10d", "--rdzv_conf= a=1 , b = x=y "});
  CHECK(config.rdzv_conf ==
        std::map<std::string, std::string>{{"a", "1"}, {"b", "x=y"}, {"timeout", "900"}});
  CHECK(ConfigWith({"--rdzv_backend=c10d", "--rdzv_conf=timeout=60"}).rdzv_conf.at("timeout") ==
        "60");
  CHECK_THAT(ErrorWith({"--rdzv_conf==1"}),
             Catch::StartsWith("--rdzv_conf==1: ") && Catch::Contains("<key1>=<value1>"));
  CHECK_THAT(ErrorWith({"--rdzv_conf=a=1,,b=2"}), Catch::Contains("<key1>=<value1>"));
  CHECK_THAT(ErrorWith({"--rdzv_conf=foo"}),
             Catch::StartsWith("--rdzv_conf=foo: ") && Catch::Contains("'foo' must have a value"));
  CHECK_THAT(ErrorWith({"--rdzv_conf=foo="}), Catch::Contains("'foo' must have a value"));
}

TEST_CASE("choices: backend, start method, numa binding, event log handler", "[cli]") {
  CHECK(ConfigWith({"--rdzv_backend=c10d", "--rdzv_endpoint=h:2379"}).rdzv_backend == "c10d");
  CHECK(ConfigWith({"--rdzv_backend=static", "--rdzv_endpoint=h:2379"}).rdzv_backend == "static");
  CHECK_THAT(ErrorWith({"--rdzv_backend=zk"}), Catch::StartsWith("--rdzv_backend=zk: ") &&
                                                   Catch::Contains("use static, c10d or etcd"));
  CHECK(ConfigWith({"--start_method=forkserver"}).start_method == "forkserver");
  CHECK_THAT(
      ErrorWith({"--start_method=thread"}),
      Catch::StartsWith("--start_method=thread: ") && Catch::Contains("spawn, fork or forkserver"));
  CHECK(ConfigWith({"--numa_binding=core-complex"}).numa_binding == "core-complex");
  CHECK_THAT(ErrorWith({"--numa_binding=x"}),
             Catch::StartsWith("--numa_binding=x: ") && Catch::Contains("socket"));
  CHECK(ConfigWith({"--event_log_handler=console"}).event_log_handler == "console");
  CHECK_THAT(ErrorWith({"--event_log_handler=x"}), Catch::StartsWith("--event_log_handler=x: "));
  CHECK(ErrorWith({"--logs_specs=custom"}) ==
        "--logs_specs=custom: ddprun loads no Python LogsSpecs plugins (torchrun's entry point "
        "group torchrun.logs_specs); drop the flag: the logs follow torchrun's default layout "
        "(--log-dir, --redirects, --tee, --local-ranks-filter)");
}

TEST_CASE("option --signals_to_handle takes signal names", "[cli]") {
  CHECK(ConfigWith({"--signals_to_handle=SIGUSR1, TERM"}).signals_to_handle ==
        Args{"SIGUSR1", "SIGTERM"});
  CHECK_THAT(
      ErrorWith({"--signals_to_handle=SIGTERM,SIGFOO"}),
      Catch::StartsWith("--signals_to_handle=SIGTERM,SIGFOO: ") && Catch::Contains("SIGFOO"));
  CHECK_THAT(ErrorWith({"--signals_to_handle=SIGKILL"}),
             Catch::Contains("SIGKILL cannot be handled"));
  CHECK_THAT(ErrorWith({"--signals_to_handle="}), Catch::StartsWith("--signals_to_handle=: "));
}

TEST_CASE("option --rdzv_endpoint is host[:port]", "[cli]") {
  CHECK(ConfigWith({"--rdzv_backend=c10d", "--rdzv_endpoint=[::1]:29400"}).rdzv_endpoint ==
        "[::1]:29400");
  CHECK_THAT(ErrorWith({"--rdzv_backend=c10d", "--rdzv_endpoint=h:99999"}),
             Catch::StartsWith("--rdzv_endpoint=h:99999: "));
  CHECK_THAT(ErrorWith({"--rdzv_endpoint=h"}),
             Catch::StartsWith("--rdzv_endpoint=h: ") && Catch::Contains("HOST:PORT"));
}

TEST_CASE("duplicate filters split on , with ,, as a literal comma", "[cli]") {
  const LaunchConfig config =
      ConfigWith({"--duplicate_stdout_filters=a,,b,c", "--duplicate-stderr-filters=x,,,y,"});
  CHECK(config.duplicate_stdout_filters == Args{"a,b", "c"});
  CHECK(config.duplicate_stderr_filters == Args{"x,", "y"});
  CHECK(cli::ParseFilters("").empty());
}

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
  CHECK(Config({"--no_python", Files().Path("data")}).run_mode == ddprun::elastic::RunMode::kNoPython);
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

TEST_CASE("option --help and --version print and exit", "[cli]") {
  for (const Args& args : {Args{"--help"}, Args{"-h"}, Args{"--nnodes", "2", "--help"}}) {
    const CliResult result = Parse(args);
    REQUIRE(result.action == CliResult::Action::kPrintAndExit);
    CHECK_THAT(
        result.text,
        Catch::Contains("usage: ddprun [options] training_script [training_script_args...]"));
    for (const char* group : {"Worker/node size:", "Rendezvous:", "User-code launch:", "Logging:",
                              "torchrun compatibility:", "--nproc-per-node",
                              "[PET_NPROC_PER_NODE]", "--dry_run"}) {
      CHECK_THAT(result.text, Catch::Contains(group));
    }
    // No option is accepted without effect any more (issue 25).
    CHECK_THAT(result.text, !Catch::Contains("no effect"));
  }
  const CliResult version = Parse({"--version"});
  CHECK(version.action == CliResult::Action::kPrintAndExit);
  CHECK(std::regex_match(version.text, std::regex("ddprun [0-9]+\\.[0-9]+\\.[0-9]+.*\n")));
}

TEST_CASE("option --dry_run is stored", "[cli]") { CHECK(ConfigWith({"--dry_run"}).dry_run); }

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

TEST_CASE("uuid4 has the RFC 4122 shape", "[cli]") {
  const std::string uuid = cli::RandomUuid4();
  CHECK(std::regex_match(
      uuid, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")));
}

TEST_CASE("static --rdzv_endpoint gives the master, as torchrun", "[cli]") {
  // PyTorch's ddp-tutorial-series run_example.sh and HF accelerate's multi-machine launch.
  const LaunchConfig single = ConfigWith({"--nnodes=1", "--rdzv_id=101",
                                          "--rdzv_endpoint=localhost:5972"});
  CHECK_FALSE(single.standalone);
  CHECK(single.rdzv_backend == "static");
  CHECK(single.master_addr == "localhost");
  CHECK(single.master_port == 5972);
  const LaunchConfig node1 =
      ConfigWith({"--rdzv_backend", "static", "--rdzv_endpoint", "10.0.0.7:6000", "--nnodes",
                  "2", "--node_rank", "1", "--master_addr=ignored", "--master_port=1"});
  CHECK(node1.master_addr == "10.0.0.7");
  CHECK(node1.master_port == 6000);
  CHECK(node1.rdzv_endpoint == "10.0.0.7:6000");
  CHECK(ConfigWith({"--rdzv_endpoint=[::1]:7000", "--nnodes=2"}).master_addr == "::1");
  CHECK(Config({Train()}, {{"PET_RDZV_ENDPOINT", "h:7"}, {"PET_NNODES", "2"}}).master_port == 7);
  // c10d keeps --master_addr/--master_port (unused) and the endpoint for its rendezvous.
  const LaunchConfig c10d =
      ConfigWith({"--rdzv_backend=c10d", "--rdzv_endpoint=h:29400", "--master_port=1234"});
  CHECK(c10d.master_port == 1234);
  CHECK(c10d.master_addr == "127.0.0.1");
}

TEST_CASE("etcd and etcd-v2 are the elastic rendezvous over etcd, on every member given", "[cli]") {
  for (const std::string backend : {"etcd", "etcd-v2"}) {
    const LaunchConfig one = ConfigWith({"--rdzv_backend=" + backend, "--rdzv_endpoint=h:2379"});
    CHECK(one.Etcd());
    CHECK(one.Elastic());  // even one node: torchrun's etcd is always the dynamic rendezvous
    CHECK_THAT(ErrorWith({"--nnodes=2", "--rdzv_backend=" + backend}),
               Catch::StartsWith("--rdzv_backend=" + backend + ": ") &&
                   Catch::Contains("needs --rdzv_endpoint") && Catch::Contains("2379"));
  }
  // The members' list and ports are the plan's: launch_plan_table_test.cc.
  CHECK_THAT(ErrorOf({Train()}, {{"PET_RDZV_BACKEND", "zookeeper"}}),
             Catch::StartsWith("PET_RDZV_BACKEND=zookeeper: "));
}

TEST_CASE("the etcd rdzv_conf keys: protocol, TLS files, etcd_prefix", "[cli]") {
  const auto etcd = [](const std::string& conf) {
    return ConfigWith({"--rdzv_backend=etcd", "--rdzv_endpoint=h", "--rdzv_conf=" + conf});
  };
  const std::string pem = Files().Path("data");  // any readable file passes the CLI
  const auto tls = etcd("protocol=https,cacert=" + pem + ",cert=" + pem + ",key=" + pem +
                        ",etcd_prefix=/team")
                       .rdzv_settings;
  CHECK(tls.etcd_tls);
  CHECK(tls.etcd_cacert == pem);
  CHECK(tls.etcd_cert == pem);
  CHECK(tls.etcd_key == pem);
  CHECK(tls.etcd_prefix == "/team/");
  // etcd-v2's spellings of the same files.
  const auto v2 = etcd("protocol=https,ca_cert=" + pem + ",ssl_cert=" + pem + ",ssl_cert_key=" + pem)
                      .rdzv_settings;
  CHECK(v2.etcd_cacert == pem);
  CHECK(v2.etcd_key == pem);
  CHECK(etcd("join_timeout=5").rdzv_settings.etcd_prefix == "/ddprun/");
  CHECK_FALSE(etcd("join_timeout=5").rdzv_settings.etcd_tls);
  const auto error = [](const std::string& conf) {
    return ErrorWith({"--rdzv_backend=etcd", "--rdzv_endpoint=h", "--rdzv_conf=" + conf});
  };
  CHECK_THAT(error("protocol=gopher"), Catch::Contains("protocol=gopher: must be http or https"));
  CHECK_THAT(error("protocol=https,cacert=/nonexistent/ca.pem"),
             Catch::Contains("cacert=/nonexistent/ca.pem: No such file"));
  CHECK_THAT(error("protocol=https,cert=" + pem), Catch::Contains("cert and key go together"));
  CHECK_THAT(error("cacert=" + pem), Catch::Contains("add protocol=https"));
  CHECK_THAT(error("etcd_prefix=team"), Catch::Contains("must start with /"));
}

TEST_CASE("unknown backends are refused in one line", "[cli]") {
  CHECK_THAT(ErrorWith({"--rdzv_backend=zookeeper"}),
             Catch::StartsWith("--rdzv_backend=zookeeper: ") &&
                 Catch::Contains("not a rendezvous backend"));
  // --standalone overrides the backend, as in torchrun.
  CHECK(ConfigWith({"--standalone", "--rdzv_backend=zookeeper"}).rdzv_backend == "c10d");
}

TEST_CASE("elastic c10d lines need an endpoint, named as the user wrote them", "[cli]") {
  const LaunchConfig elastic =
      ConfigWith({"--nnodes=1:4", "--rdzv-backend=c10d", "--rdzv_endpoint=h:1"});
  CHECK(elastic.min_nodes == 1);
  CHECK(elastic.max_nodes == 4);
  CHECK_FALSE(elastic.standalone);
  CHECK_THAT(ErrorWith({"--nnodes=2", "--rdzv_backend=c10d"}),
             Catch::StartsWith("--nnodes=2 with --rdzv_backend=c10d: ") &&
                 Catch::Contains("--rdzv_endpoint"));
  // Kubeflow's elastic PyTorchJob: everything from PET_*.
  const Env kubeflow = {{"PET_NNODES", "1:3"}, {"PET_RDZV_BACKEND", "c10d"},
                        {"PET_RDZV_ID", "job"}};
  CHECK_THAT(ErrorOf({Train()}, kubeflow),
             Catch::StartsWith("PET_NNODES=1:3 with PET_RDZV_BACKEND=c10d: "));
  Env with_endpoint = kubeflow;
  with_endpoint["PET_RDZV_ENDPOINT"] = "job-worker-0:23456";
  CHECK(Config({Train()}, with_endpoint).rdzv_endpoint == "job-worker-0:23456");
}

TEST_CASE("static node rank must name one of the nodes, as given", "[cli]") {
  CHECK_THAT(ErrorWith({"--nnodes=2", "--node_rank=2"}),
             Catch::StartsWith("--node_rank=2: must be below the number of nodes (--nnodes=2)"));
  CHECK_THAT(ErrorOf({Train()}, {{"PET_NNODES", "2"}, {"PET_NODE_RANK", "5"}}),
             Catch::StartsWith("PET_NODE_RANK=5: ") && Catch::Contains("(PET_NNODES=2)"));
}

TEST_CASE("rdzv_conf values are parsed once, with torchrun's defaults", "[cli]") {
  const auto settings = [](const Args& options) { return ConfigWith(options).rdzv_settings; };
  const auto c10d = settings({"--rdzv_backend=c10d"});
  CHECK(c10d.join_timeout == std::chrono::seconds(600));
  CHECK(c10d.last_call_timeout == std::chrono::seconds(30));
  CHECK(c10d.close_timeout == std::chrono::seconds(30));
  CHECK(c10d.read_timeout == std::chrono::seconds(60));
  CHECK(c10d.keep_alive_interval == std::chrono::seconds(5));
  CHECK(c10d.keep_alive_max_attempt == 3);
  CHECK_FALSE(c10d.is_host.has_value());
  CHECK(settings({"--nnodes=2"}).join_timeout == std::chrono::seconds(900));
  CHECK(settings({"--rdzv_conf=timeout=12"}).join_timeout == std::chrono::seconds(12));
  const auto given = settings({"--rdzv_backend=c10d",
                               "--rdzv_conf=join_timeout=1.5,timeout=9,last_call_timeout=2,"
                               "keep_alive_interval=0.25,keep_alive_max_attempt=4,is_host=Yes"});
  CHECK(given.join_timeout == std::chrono::milliseconds(1500));
  CHECK(given.last_call_timeout == std::chrono::seconds(2));
  CHECK(given.keep_alive_interval == std::chrono::milliseconds(250));
  CHECK(given.HeartbeatTimeout() == std::chrono::seconds(1));
  CHECK(given.is_host == true);
  CHECK_THAT(ErrorWith({"--rdzv_conf=keep_alive_interval=0"}),
             Catch::StartsWith("--rdzv_conf keep_alive_interval=0: "));
  CHECK_THAT(ErrorWith({"--rdzv_conf=keep_alive_max_attempt=2.5"}),
             Catch::StartsWith("--rdzv_conf keep_alive_max_attempt=2.5: "));
  CHECK_THAT(ErrorOf({Train()}, {{"PET_RDZV_CONF", "is_host=maybe"}}),
             Catch::StartsWith("PET_RDZV_CONF is_host=maybe: "));
  // Found by fuzz/cli_values_fuzzer.cc: rounded to the millisecond, never 0 ms, at most 1e9 s.
  const auto rounded = settings({"--rdzv_backend=c10d",
                                 "--rdzv_conf=join_timeout=1.001,keep_alive_interval=0.0001"});
  CHECK(rounded.join_timeout == std::chrono::milliseconds(1001));
  CHECK(rounded.keep_alive_interval == std::chrono::milliseconds(1));
  CHECK(settings({"--rdzv_conf=timeout=1e9"}).join_timeout == std::chrono::seconds(1'000'000'000));
  CHECK_THAT(ErrorWith({"--rdzv_conf=last_call_timeout=1e308"}),
             Catch::StartsWith("--rdzv_conf last_call_timeout=1e308: must be at most 1e9 seconds"));
}

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

TEST_CASE("the dry run shows the file timer, a random path as such", "[cli][hang]") {
  const Env on = {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}};
  std::ostringstream drawn, given;
  ddprun::launcher::PrintDryRun(drawn, ConfigWith({}), on, on);
  Env with_file = on;
  with_file["TORCHELASTIC_TIMER_FILE"] = "/run/t";
  ddprun::launcher::PrintDryRun(given, ConfigWith({}), with_file, with_file);
  const std::string drawn_path = "<temporary directory>/ddprun-timer-<random hex>";
  CHECK_THAT(drawn.str(), Catch::Contains("file_timer       : " + drawn_path + "\n") &&
                              Catch::Contains("env: TORCHELASTIC_TIMER_FILE=" + drawn_path));
  CHECK_THAT(given.str(), Catch::Contains("file_timer       : /run/t\n"));
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
