// Hang detection's options: --hang-timeout (seconds or auto), the start-up timeout, the learning
// of auto, --max-no-progress-hangs, their PET_ defaults, their refusals and the dry run
// (the hang timeouts, the file timer).
#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>

#include "cli/cli_internal.h"
#include "launcher/dry_run.h"
#include "tests/unit/cli/cli_test_util.h"

using namespace ddprun::cli::testing;
using std::chrono::milliseconds;
namespace cli = ddprun::cli;

TEST_CASE("option --hang_timeout: seconds >= 0, fractions allowed, 0 off", "[cli][hang]") {
  CHECK(ConfigWith({}).hang.hang == milliseconds(0));
  CHECK_FALSE(ConfigWith({}).hang.On());
  CHECK(ConfigWith({"--hang-timeout", "300"}).hang.hang == milliseconds(300'000));
  CHECK(ConfigWith({"--hang_timeout=0.5"}).hang.hang == milliseconds(500));
  CHECK(ConfigWith({"--hang-timeout=1.0015"}).hang.hang == milliseconds(1002));
  CHECK(ConfigWith({"--hang-timeout=0"}).hang.hang == milliseconds(0));
  CHECK(ConfigWith({"--hang-timeout=0.0001"}).hang.hang == milliseconds(1));  // never "off"
  CHECK(ConfigWith({"--hang-timeout= 2 "}).hang.hang == milliseconds(2000));
  CHECK_FALSE(ConfigWith({"--hang-timeout=2"}).hang.learn);
  for (const std::string bad : {"-1", "abc", "", "1s", "inf", "nan", "2e9", "Auto"}) {
    INFO(bad);
    CHECK_THAT(ErrorWith({"--hang-timeout=" + bad}),
               Catch::StartsWith("--hang_timeout=" + bad + ": must be a number of seconds") &&
                   Catch::Contains("0 turns hang detection off"));
  }
}

TEST_CASE("option --hang_timeout=auto learns the timeout", "[cli][hang]") {
  const auto config = ConfigWith({"--hang-timeout=auto"});
  CHECK(config.hang.learn);
  CHECK(config.hang.On());
  CHECK(config.hang.learning.factor == 5.0);
  CHECK(config.hang.learning.warmup_intervals == 20);
  CHECK(config.hang.learning.floor == milliseconds(30'000));
  const auto tuned = ConfigWith({"--hang-timeout=auto", "--hang-timeout-factor=2.5",
                                 "--hang-timeout-warmup", "8", "--hang_timeout_floor=0.5"});
  CHECK(tuned.hang.learning.factor == 2.5);
  CHECK(tuned.hang.learning.warmup_intervals == 8);
  CHECK(tuned.hang.learning.floor == milliseconds(500));
}

TEST_CASE("option --hang_startup_timeout: before the first progress, default 600 s or more",
          "[cli][hang]") {
  CHECK(ConfigWith({"--hang-timeout=3"}).hang.startup == milliseconds(600'000));
  CHECK(ConfigWith({"--hang-timeout=auto"}).hang.startup == milliseconds(600'000));
  // Never below the hang timeout by default: start-up is not held to less than the rest.
  CHECK(ConfigWith({"--hang-timeout=900"}).hang.startup == milliseconds(900'000));
  CHECK(ConfigWith({"--hang-timeout=2", "--hang-startup-timeout=4"}).hang.startup ==
        milliseconds(4000));
  CHECK(ConfigWith({"--hang-startup-timeout=0.25", "--hang-timeout=2"}).hang.startup ==
        milliseconds(250));  // in any order
}

TEST_CASE("hang options that need hang detection are refused without it", "[cli][hang]") {
  CHECK_THAT(ErrorWith({"--hang-startup-timeout=10"}),
             Catch::StartsWith("--hang_startup_timeout=10: applies only with hang detection, "
                               "which is off; add --hang-timeout=SECONDS or --hang-timeout=auto"));
  CHECK_THAT(ErrorWith({"--hang-timeout=0", "--hang-startup-timeout=10"}),
             Catch::StartsWith("--hang_startup_timeout=10: applies only with hang detection"));
  for (const std::string flag :
       {"--hang-timeout-factor=3", "--hang-timeout-warmup=3", "--hang-timeout-floor=3"}) {
    INFO(flag);
    CHECK_THAT(ErrorWith({"--hang-timeout=5", flag}),
               Catch::Contains(": applies only to a learned hang timeout; add "
                               "--hang-timeout=auto"));
  }
}

TEST_CASE("bad values of the hang options: one line, exit 2", "[cli][hang]") {
  const Args on = {"--hang-timeout=auto"};
  auto error = [&](const std::string& flag) {
    Args args = on;
    args.push_back(flag);
    return ErrorWith(args);
  };
  for (const std::string bad : {"-1", "0", "abc", "", "nan", "inf"}) {
    INFO(bad);
    CHECK_THAT(
        error("--hang-startup-timeout=" + bad),
        Catch::StartsWith("--hang_startup_timeout=" + bad + ": must be a number of seconds > 0"));
    CHECK_THAT(error("--hang-timeout-floor=" + bad),
               Catch::StartsWith("--hang_timeout_floor=" + bad + ": must be a number of seconds"));
  }
  CHECK_THAT(error("--hang-startup-timeout=auto"),
             Catch::StartsWith("--hang_startup_timeout=auto: must be a number of seconds > 0 "
                               "(only --hang-timeout learns its value"));
  CHECK_THAT(error("--hang-timeout-floor=auto"),
             Catch::StartsWith("--hang_timeout_floor=auto: must be a number of seconds > 0"));
  CHECK_THAT(error("--hang-startup-timeout=2e9"), Catch::Contains("must be at most 1e9"));
  for (const std::string bad : {"0.5", "0", "-2", "x", "auto", "1001"}) {
    INFO(bad);
    CHECK_THAT(
        error("--hang-timeout-factor=" + bad),
        Catch::StartsWith("--hang_timeout_factor=" + bad) && Catch::Contains("must be a number"));
  }
  for (const std::string bad : {"0", "-1", "1.5", "x", "auto"}) {
    INFO(bad);
    CHECK_THAT(error("--hang-timeout-warmup=" + bad),
               Catch::StartsWith("--hang_timeout_warmup=" + bad + ": must be an integer >= 1"));
  }
  for (const std::string bad : {"-1", "x", "auto", "1.5"}) {
    INFO(bad);
    CHECK_THAT(ErrorWith({"--max-no-progress-hangs=" + bad}),
               Catch::StartsWith("--max_no_progress_hangs=" + bad + ": must be an integer >= 0"));
  }
}

TEST_CASE("option --max_no_progress_hangs: default 3, 0 never stops", "[cli][hang]") {
  CHECK(ConfigWith({}).max_no_progress_hangs == 3);
  CHECK(ConfigWith({"--max-no-progress-hangs=0"}).max_no_progress_hangs == 0);
  CHECK(ConfigWith({"--max_no_progress_hangs", "7"}).max_no_progress_hangs == 7);
}

TEST_CASE("hang options default to their PET_ variables, the flags win", "[cli][hang]") {
  const Env env = {{"PET_HANG_TIMEOUT", "60"},
                   {"PET_HANG_STARTUP_TIMEOUT", "120"},
                   {"PET_MAX_NO_PROGRESS_HANGS", "5"}};
  const auto config = Config({Train()}, env);
  CHECK(config.hang.hang == milliseconds(60'000));
  CHECK(config.GivenAs("hang_timeout") == "PET_HANG_TIMEOUT");
  CHECK(config.hang.startup == milliseconds(120'000));
  CHECK(config.max_no_progress_hangs == 5);
  CHECK_FALSE(Config({"--hang-timeout=2", Train()}, {{"PET_HANG_TIMEOUT", "auto"}}).hang.learn);
  CHECK(Config({Train()}, {{"PET_HANG_TIMEOUT", "auto"}, {"PET_HANG_TIMEOUT_FLOOR", "3"}})
            .hang.learning.floor == milliseconds(3000));
  CHECK_THAT(ErrorOf({Train()}, {{"PET_HANG_TIMEOUT", "soon"}}),
             Catch::StartsWith("PET_HANG_TIMEOUT=soon: must be a number of seconds"));
  CHECK_THAT(ErrorOf({Train()}, {{"PET_HANG_STARTUP_TIMEOUT", "9"}}),
             Catch::StartsWith("PET_HANG_STARTUP_TIMEOUT=9: applies only with hang detection"));
  CHECK(Config({"--hang_timeout=1", Train()}, {{"PET_HANG_TIMEOUT", "bad"}}).hang.hang ==
        milliseconds(1000));
}

TEST_CASE("option --hang_timeout and its companions are ddprun extensions in --help",
          "[cli][hang]") {
  for (const std::string dest :
       {"hang_timeout", "hang_startup_timeout", "hang_timeout_factor", "hang_timeout_warmup",
        "hang_timeout_floor", "max_no_progress_hangs"}) {
    INFO(dest);
    const cli::OptionSpec* spec = cli::FindOption(dest);
    REQUIRE(spec != nullptr);
    CHECK(std::string(spec->group) == "ddprun");
    CHECK(spec->pet);
  }
  const cli::OptionSpec* spec = cli::FindOption("hang_timeout");
  CHECK(cli::LongNames(*spec) == std::vector<std::string>{"--hang_timeout", "--hang-timeout"});
  const cli::CliResult help = Parse({"--help"});
  CHECK_THAT(help.text, Catch::Contains("--hang_timeout") && Catch::Contains("--hang-timeout") &&
                            Catch::Contains("[PET_HANG_TIMEOUT]") &&
                            Catch::Contains("DDPRUN_PULSE_FILE") &&
                            Catch::Contains("--hang-startup-timeout") &&
                            Catch::Contains("[PET_MAX_NO_PROGRESS_HANGS]"));
}

TEST_CASE("the dry run shows both hang timeouts and whether the first is learned", "[cli][hang]") {
  std::ostringstream off, fixed, learned;
  ddprun::launcher::PrintDryRun(off, ConfigWith({}), {}, {});
  ddprun::launcher::PrintDryRun(fixed, ConfigWith({"--hang-timeout=90.5"}), {}, {});
  ddprun::launcher::PrintDryRun(
      learned, ConfigWith({"--hang-timeout=auto", "--hang-startup-timeout=300"}), {}, {});
  CHECK_THAT(off.str(), Catch::Contains("hang_timeout     : off\n"));
  CHECK_THAT(off.str(), !Catch::Contains("DDPRUN_PULSE_FILE") && !Catch::Contains("file_timer") &&
                            !Catch::Contains("hang_startup_timeout"));
  CHECK_THAT(fixed.str(),
             Catch::Contains("hang_timeout     : 90.5 s between signs of progress (fixed)\n") &&
                 Catch::Contains("hang_startup_timeout: 600 s before a rank's first sign of "
                                 "progress\n") &&
                 Catch::Contains("max_no_progress_hangs: 3 hangs in a row before progress past "
                                 "start-up stop the job\n") &&
                 Catch::Contains("env: DDPRUN_PULSE_FILE=<log_dir>/attempt_0/0/pulse"));
  CHECK_THAT(learned.str(),
             Catch::Contains("hang_timeout     : learned: auto (5 x the longest interval between "
                             "signs of progress, learned after 20 intervals of a rank, at least "
                             "30 s)\n") &&
                 Catch::Contains("hang_startup_timeout: 300 s before"));
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
