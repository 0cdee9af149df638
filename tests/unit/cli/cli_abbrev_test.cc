// argv normalisation before CLI11 (cli/cli_abbrev.cc): short options, unambiguous prefixes,
// values that look like options, the split at the training script and argparse's lone "--".
#include <catch2/catch.hpp>

#include "cli/cli_internal.h"
#include "tests/unit/cli/cli_test_util.h"

namespace {

using ddprun::cli::CliResult;
using ddprun::elastic::LaunchConfig;
using ddprun::elastic::RunMode;
namespace cli = ddprun::cli;
using namespace ddprun::cli::testing;

}  // namespace

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
