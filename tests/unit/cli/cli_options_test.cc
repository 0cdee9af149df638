// The option table (cli/cli_options.cc): every option under each of its long spellings, with
// and without "=".
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "cli/cli_internal.h"
#include "tests/unit/cli/cli_test_util.h"

namespace {

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
    {"warm_restart", "on"},
    {"warm_preload", "numpy"},
    {"health_port", "0"},
    {"health_addr", "127.0.0.1"},
};

// What an option's sample needs beside it: those that apply only with hang detection on.
const std::map<std::string, Args> kNeeds = {
    {"hang_startup_timeout", {"--hang-timeout=5"}},
    {"hang_timeout_factor", {"--hang-timeout=auto"}},
    {"hang_timeout_warmup", {"--hang-timeout=auto"}},
    {"hang_timeout_floor", {"--hang-timeout=auto"}},
    {"warm_preload", {"--warm-restart=on"}},
};

Args WithNeeds(const std::string& dest, Args args) {
  const auto needs = kNeeds.find(dest);
  if (needs != kNeeds.end()) args.insert(args.begin(), needs->second.begin(), needs->second.end());
  return args;
}

}  // namespace

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
