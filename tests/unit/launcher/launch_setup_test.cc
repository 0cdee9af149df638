// The worker spec of a launch (launcher/launch_setup.h): hang detection and the file timer.
#include "launcher/launch_setup.h"

#include <catch2/catch.hpp>
#include <regex>

#include "cli/cli.h"

namespace {

using ddprun::elastic::Environment;
using ddprun::launcher::FileTimerPath;

ddprun::elastic::LaunchConfig Config(std::vector<std::string> args) {
  args.insert(args.end(), {"--no_python", "/bin/true"});
  const auto no_env = [](const std::string&) -> std::optional<std::string> { return {}; };
  const auto no_gpus = [] { return ddprun::cli::GpuCount{0, "no driver in tests"}; };
  return ddprun::cli::ParseCommandLine(args, no_env, no_gpus).config;
}

}  // namespace

TEST_CASE("the file timer is off unless TORCHELASTIC_ENABLE_FILE_TIMER is exactly 1",
          "[launcher][hang]") {
  CHECK(FileTimerPath({}).empty());
  CHECK(FileTimerPath({{"TORCHELASTIC_TIMER_FILE", "/t"}}).empty());
  for (const std::string value : {"0", "", "true", " 1", "01"}) {
    INFO(value);
    CHECK(FileTimerPath({{"TORCHELASTIC_ENABLE_FILE_TIMER", value}}).empty());
  }
}

TEST_CASE("the file timer: the user's TORCHELASTIC_TIMER_FILE, else a fresh temporary path",
          "[launcher][hang]") {
  const Environment given{{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"},
                          {"TORCHELASTIC_TIMER_FILE", "/run/job/timer"}};
  CHECK(FileTimerPath(given) == "/run/job/timer");
  const Environment drawn{{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"TMPDIR", "/scratch"}};
  const std::string first = FileTimerPath(drawn);
  CHECK(std::regex_match(first, std::regex("/scratch/ddprun-timer-[0-9a-f]{32}")));
  CHECK(FileTimerPath(drawn) != first);
  CHECK(FileTimerPath({{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"TEMP", "/t2"}})
            .starts_with("/t2/ddprun-timer-"));
  CHECK(FileTimerPath({{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"TORCHELASTIC_TIMER_FILE", ""}})
            .starts_with("/tmp/ddprun-timer-"));
}

TEST_CASE("the worker spec takes the hang timeout and the timer file", "[launcher][hang]") {
  const ddprun::launcher::backend::LaunchPlan plan;  // the spec's host name and CPUs
  const auto off = ddprun::launcher::MakeWorkerSpec(Config({}), plan, {}, "/l");
  CHECK_FALSE(off.hang.On());
  CHECK(off.max_no_progress_hangs == 3);
  CHECK(off.timer_file.empty());
  const Environment env{{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}, {"TMPDIR", "/s"}};
  const auto on = ddprun::launcher::MakeWorkerSpec(
      Config({"--hang-timeout=2.5", "--hang-startup-timeout=7", "--max-no-progress-hangs=4"}), plan,
      env, "/l");
  CHECK(on.hang.hang == std::chrono::milliseconds(2500));
  CHECK(on.hang.startup == std::chrono::milliseconds(7000));
  CHECK(on.max_no_progress_hangs == 4);
  CHECK(on.timer_file.starts_with("/s/ddprun-timer-"));
}
