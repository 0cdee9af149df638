// The value validators (cli/cli_validate.cc): --nnodes, integer and number ranges, stream
// selections, rank filters, --rdzv_conf, choices, signals, output filters and the random uuid.
#include <catch2/catch.hpp>
#include <map>
#include <regex>

#include "cli/cli_internal.h"
#include "tests/unit/cli/cli_test_util.h"

namespace {

using ddprun::elastic::LaunchConfig;
namespace cli = ddprun::cli;
using namespace ddprun::cli::testing;

}  // namespace

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

TEST_CASE("duplicate filters split on , with ,, as a literal comma", "[cli]") {
  const LaunchConfig config =
      ConfigWith({"--duplicate_stdout_filters=a,,b,c", "--duplicate-stderr-filters=x,,,y,"});
  CHECK(config.duplicate_stdout_filters == Args{"a,b", "c"});
  CHECK(config.duplicate_stderr_filters == Args{"x,", "y"});
  CHECK(cli::ParseFilters("").empty());
}

TEST_CASE("uuid4 has the RFC 4122 shape", "[cli]") {
  const std::string uuid = cli::RandomUuid4();
  CHECK(std::regex_match(
      uuid, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")));
}
