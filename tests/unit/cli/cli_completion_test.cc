// ddprun --print-completion and the option table's value lists (OptionSpec::choices).
#include <catch2/catch.hpp>
#include <map>
#include <optional>

#include "cli/cli.h"
#include "cli/cli_internal.h"
#include "cli/env_presets.h"
#include "common/errors.h"

namespace {

using ddprun::cli::CliResult;
using Args = std::vector<std::string>;
namespace cli = ddprun::cli;
namespace completion = ddprun::completion;

CliResult Parse(const Args& args) {
  return ddprun::cli::ParseCommandLine(
      args, [](const std::string&) -> std::optional<std::string> { return std::nullopt; },
      [] { return ddprun::cli::GpuCount{}; });
}

}  // namespace

TEST_CASE("option --print-completion prints each shell's script and exits", "[cli][completion]") {
  const std::map<std::string, std::string> markers = {{"bash", "complete -F _ddprun ddprun"},
                                                      {"zsh", "#compdef ddprun"},
                                                      {"fish", "complete -c ddprun"}};
  for (const auto& [shell, marker] : markers) {
    for (const Args& args : {Args{"--print-completion", shell}, Args{"--print_completion=" + shell},
                             Args{"--print-comp", shell}}) {
      const CliResult result = Parse(args);
      REQUIRE(result.action == CliResult::Action::kPrintAndExit);
      CHECK_THAT(result.text, Catch::Contains(marker));
      CHECK_THAT(result.text, Catch::Contains("--nproc-per-node"));
      CHECK_THAT(result.text, Catch::Contains("--nproc_per_node"));
    }
  }
}

TEST_CASE("ddprun-launch --print-completion completes ddprun-launch", "[cli][completion]") {
  // Under torch.distributed.launch's personality the script registers for the link's name (the
  // shells look it up by the command typed), with ddprun's options; ddprun's own does not.
  const std::map<std::string, std::string> markers = {
      {"bash", "complete -F _ddprun_launch ddprun-launch\n"},
      {"zsh", "#compdef ddprun-launch\n"},
      {"fish", "complete -c ddprun-launch "}};
  for (const auto& [shell, marker] : markers) {
    const CliResult result = ddprun::cli::ParseCommandLine(
        {"--print-completion", shell},
        [](const std::string&) -> std::optional<std::string> { return std::nullopt; },
        [] { return ddprun::cli::GpuCount{}; }, cli::Personality::kLegacyLaunch);
    REQUIRE(result.action == CliResult::Action::kPrintAndExit);
    CHECK_THAT(result.text, Catch::Contains(marker));
    CHECK_THAT(result.text, Catch::Contains("--nproc-per-node"));
    CHECK_THAT(result.text, Catch::Contains("ddprun-launch --print-completion " + shell));
    CHECK_THAT(Parse({"--print-completion", shell}).text, !Catch::Contains(marker));
  }
}

TEST_CASE("option --print-completion refuses a shell it has no script for", "[cli][completion]") {
  try {
    Parse({"--print-completion", "tcsh"});
    FAIL("no UsageError");
  } catch (const ddprun::UsageError& error) {
    CHECK_THAT(error.what(), Catch::Contains("--print_completion=tcsh"));
    CHECK_THAT(error.what(), Catch::Contains("bash, zsh or fish"));
  }
}

TEST_CASE("the completion describes every option of the table", "[cli][completion]") {
  const completion::Command command = cli::CompletionCommand();
  REQUIRE(command.options.size() == cli::Options().size());
  CHECK(command.positionals == completion::Positionals::kScript);
  CHECK(command.abbreviations);
  for (std::size_t i = 0; i < command.options.size(); ++i) {
    const cli::OptionSpec& spec = cli::Options()[i];
    const completion::Option& option = command.options[i];
    INFO(spec.dest);
    CHECK(option.key == spec.dest);
    for (const std::string& name : cli::LongNames(spec)) {
      CHECK(std::find(option.names.begin(), option.names.end(), name) != option.names.end());
    }
    CHECK(option.TakesValue() == (spec.metavar != nullptr));
    CHECK(option.choices == cli::Choices(spec));
  }
  const auto by_key = [&](const std::string& key) {
    for (const completion::Option& option : command.options) {
      if (option.key == key) return option;
    }
    FAIL("no option " << key);
    return completion::Option{};
  };
  CHECK(by_key("log_dir").value == completion::ValueKind::kDirectory);
  CHECK(by_key("event_log").value == completion::ValueKind::kFile);
  CHECK(by_key("rdzv_backend").value == completion::ValueKind::kChoice);
  CHECK(by_key("module").names == std::vector<std::string>{"-m", "--module"});
}

TEST_CASE("value lists: env presets, checked choices", "[cli][completion]") {
  CHECK(cli::Choices("env_preset") == ddprun::cli::EnvPresetNames());
  CHECK(cli::Choices("rdzv_backend") ==
        std::vector<std::string>{"static", "c10d", "etcd", "etcd-v2"});
  CHECK(cli::Choices("nnodes").empty());
  CHECK(cli::Choices("no_such_option").empty());
  // Values checked against the table's list (cli_config.cc).
  for (const std::string dest : {"start_method", "event_log_handler", "numa_binding"}) {
    for (const std::string& value : cli::Choices(dest)) {
      INFO(dest << "=" << value);
      CHECK(Parse({"--" + dest, value, "--no_python", "true"}).action == CliResult::Action::kRun);
    }
  }
}
