// Fuzz target: the command line (cli/cli.h ParseCommandLine), as main() calls it, with a
// fake environment (PET_* and the other variables it reads) and 4 fake GPUs. Input format:
// fuzz_support.h ("<argv words>\n@env\nNAME=VALUE..."). UsageError is the documented rejection;
// anything else escaping is a bug. An accepted configuration must be one ddprun can launch
// (the invariants below), and --dry_run's printout of it must not fail other than by UsageError
// (jobs of at most 16 workers per node, to keep the printout short).
#include <cstdint>
#include <sstream>
#include <string>

#include "cli/cli.h"
#include "common/env_names.h"
#include "common/errors.h"
#include "elastic/worker_env.h"
#include "fuzz/fuzz_support.h"
#include "launcher/dry_run.h"

namespace {

using ddprun::elastic::LaunchConfig;
using ddprun::fuzz::Require;

void CheckConfig(const LaunchConfig& config) {
  Require(config.min_nodes >= 1 && config.min_nodes <= config.max_nodes, "nnodes out of range");
  Require(config.nproc_per_node >= 1, "nproc_per_node below 1");
  Require(config.node_rank >= 0, "negative node rank");
  Require(config.master_port >= 0 && config.master_port <= 65535,
          "master port unresolved or out of range");
  Require(config.rdzv_backend == "static" || config.rdzv_backend == "c10d" ||
              config.rdzv_backend == "etcd" || config.rdzv_backend == "etcd-v2",
          "a backend that cannot be launched", config.rdzv_backend);
  Require(!config.Etcd() || !config.rdzv_endpoint.empty(), "etcd without endpoints");
  Require(config.rdzv_backend != "static" || config.node_rank < config.max_nodes,
          "static node rank not below nnodes");
  Require(config.rdzv_conf.contains("timeout"), "rdzv_conf has no timeout");
  Require(config.redirects.all >= 0 && config.redirects.all <= 3 && config.tee.all >= 0 &&
              config.tee.all <= 3,
          "stream selection out of range");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = ddprun::fuzz::ParseCommandInput(ddprun::fuzz::AsText(data, size));
  const std::vector<std::string> args = ddprun::fuzz::SplitWords(input.command);
  ddprun::elastic::Environment env(input.env.begin(), input.env.end());
  const ddprun::cli::EnvLookup lookup =
      [&env](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  const ddprun::cli::GpuCounter gpus = [] { return ddprun::cli::GpuCount{4, ""}; };
  try {
    const auto result = ddprun::cli::ParseCommandLine(args, lookup, gpus);
    if (result.action == ddprun::cli::CliResult::Action::kPrintAndExit) {
      Require(!result.text.empty(), "--help or --version printed nothing");
      return 0;
    }
    CheckConfig(result.config);
    if (result.config.nproc_per_node > 16) return 0;
    ddprun::elastic::Environment launcher_env = env;
    ddprun::elastic::ApplyOmpDefault(launcher_env, result.config.nproc_per_node);  // as run.cc
    std::string signals;
    for (const std::string& name : result.config.signals_to_handle) signals += name + ",";
    launcher_env[ddprun::env::kSignalsToHandle] = signals.substr(0, signals.size() - 1);
    std::ostringstream out;
    ddprun::launcher::PrintDryRun(out, result.config, env, launcher_env);
  } catch (const ddprun::UsageError&) {
  }
  return 0;
}
