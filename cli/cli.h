// The ddprun command line: torchrun's flags, spellings, prefix abbreviations and PET_*
// environment defaults, turned into a validated, resolved elastic::LaunchConfig. Any bad input
// (flag, PET_* variable, missing script) throws UsageError with one line naming the flag or
// variable, the value and what is accepted; the caller prints "ddprun: error: <msg>", exits 2.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/nproc.h"
#include "elastic/launch_config.h"

namespace ddprun::cli {

// Reads one environment variable; std::nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

struct CliResult {
  enum class Action { kRun, kPrintAndExit };
  Action action = Action::kRun;
  elastic::LaunchConfig config;  // valid when kRun
  std::string text;              // --help / --version text when kPrintAndExit (stdout, exit 0)
};

// Which launcher ddprun stands in for, from the name it was started under (argv[0]):
// torchrun (`ddprun`, any other name), or torch.distributed.launch (`ddprun-launch`, installed
// as a link to ddprun), whose workers get --local_rank=N after the script unless --use_env.
enum class Personality { kTorchrun, kLegacyLaunch };
inline constexpr const char* kLegacyLaunchName = "ddprun-launch";
Personality PersonalityOf(const char* argv0);  // by the basename of argv[0]

// Parses `args` (argv without argv[0]); `env` supplies PET_* and the other variables read.
// Resolves as torchrun's run(): standalone switch, master port 29500, static endpoint
// master_addr:master_port, rdzv_conf rank/timeout, nproc_per_node (GPUs counted by `gpus`).
CliResult ParseCommandLine(const std::vector<std::string>& args, const EnvLookup& env,
                           const GpuCounter& gpus,
                           Personality personality = Personality::kTorchrun);
// Same, counting GPUs through the CUDA driver.
CliResult ParseCommandLine(const std::vector<std::string>& args, const EnvLookup& env,
                           Personality personality = Personality::kTorchrun);

// The process environment (getenv).
EnvLookup ProcessEnv();

}  // namespace ddprun::cli
