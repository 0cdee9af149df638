// The launch-plan tests' command lines: a LaunchConfig as the CLI makes it from `args` (plus
// two workers of /bin/true) and `env`, on a machine without GPUs.
#pragma once
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "elastic/launch_config.h"

namespace ddprun::test {

using Args = std::vector<std::string>;

inline elastic::LaunchConfig Config(Args args, const std::map<std::string, std::string>& env = {}) {
  args.insert(args.end(), {"--nproc_per_node=2", "--no_python", "/bin/true"});
  const auto lookup = [&env](const std::string& name) -> std::optional<std::string> {
    const auto found = env.find(name);
    if (found == env.end()) return std::nullopt;
    return found->second;
  };
  const auto no_gpus = [] { return cli::GpuCount{0, "no driver in tests"}; };
  const cli::CliResult result = cli::ParseCommandLine(args, lookup, no_gpus);
  REQUIRE(result.action == cli::CliResult::Action::kRun);
  return result.config;
}

}  // namespace ddprun::test
