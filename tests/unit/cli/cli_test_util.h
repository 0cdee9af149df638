// The command-line tests' helpers: a directory of scripts to name, a fake environment and GPU
// count, ParseCommandLine's outcome as a config or as its one-line error (as ddprun or as
// ddprun-launch), and the workers' command lines as --dry_run shows them.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "launcher/dry_run.h"
#include "tests/unit/cli/one_line_usage_error.h"

namespace ddprun::cli::testing {

using Args = std::vector<std::string>;
using Env = std::map<std::string, std::string>;

// A directory with train.py, an executable "trainer", an executable "tool.py" and a plain file.
class Scripts {
 public:
  Scripts() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "ddprun_cli_test_XXXXXX").string();
    dir_ = ::mkdtemp(pattern.data());
    Write("train.py", 0644);
    Write("trainer", 0755);
    Write("tool.py", 0755);
    Write("data", 0644);
  }
  ~Scripts() { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Dir() const { return dir_.string(); }

 private:
  void Write(const std::string& name, mode_t mode) const {
    std::ofstream(dir_ / name) << "#!/bin/sh\n";
    ::chmod(Path(name).c_str(), mode);
  }
  std::filesystem::path dir_;
};

inline const Scripts& Files() {
  static const Scripts scripts;
  return scripts;
}

inline std::string Train() { return Files().Path("train.py"); }

inline EnvLookup FakeEnv(Env vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional(it->second);
  };
}

inline GpuCounter Gpus(int count) {
  return [count] { return GpuCount{count, count > 0 ? "" : "no driver in tests"}; };
}

inline CliResult Parse(const Args& args, const Env& env = {}, int gpus = 0) {
  return ParseCommandLine(args, FakeEnv(env), Gpus(gpus));
}

inline elastic::LaunchConfig Config(const Args& args, const Env& env = {}, int gpus = 0) {
  const CliResult result = Parse(args, env, gpus);
  REQUIRE(result.action == CliResult::Action::kRun);
  return result.config;
}

// Options then the training script.
inline elastic::LaunchConfig ConfigWith(Args options, const Env& env = {}) {
  options.push_back(Train());
  return Config(options, env);
}

inline std::string ErrorOf(const Args& args, const Env& env = {}) {
  return cli::testing::OneLineUsageError([&] { Parse(args, env); });
}

inline std::string ErrorWith(Args options, const Env& env = {}) {
  options.push_back(Train());
  return ErrorOf(options, env);
}

// As ddprun-launch (torch.distributed.launch's stand-in).
inline elastic::LaunchConfig LegacyConfig(const Args& args, const Env& env = {}) {
  const CliResult result =
      ParseCommandLine(args, FakeEnv(env), Gpus(0), Personality::kLegacyLaunch);
  REQUIRE(result.action == CliResult::Action::kRun);
  return result.config;
}

inline std::string LegacyError(const Args& args) {
  return OneLineUsageError(
      [&] { ParseCommandLine(args, FakeEnv({}), Gpus(0), Personality::kLegacyLaunch); });
}

// Each worker's command line (by local rank) as --dry_run shows it.
inline std::vector<std::string> DryRunCommands(const elastic::LaunchConfig& config) {
  std::ostringstream out;
  launcher::PrintDryRun(out, config, {}, {});
  std::vector<std::string> commands;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("  command: ")) commands.push_back(line.substr(11));
  }
  return commands;
}

}  // namespace ddprun::cli::testing
