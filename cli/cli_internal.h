// Internals of the command line, shared by the cli_*.cc files and unit-tested directly: the
// option table, argv normalisation (prefixes, spellings, "--"), and the value validators.
// Every validator takes the value and the name it came from ("--nnodes" or "PET_NNODES") and
// throws UsageError "<name>=<value>: <what is accepted>".
#pragma once
#include <chrono>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cli/cli.h"
#include "completion/completion.h"
#include "elastic/launch_config.h"

namespace ddprun::cli {

// One launcher option. `dest` is argparse's dest (first long name, '-' -> '_'); every
// multi-word option is spelled both --a_b and --a-b.
struct OptionSpec {
  const char* dest;
  char short_name;      // 0: none
  const char* metavar;  // nullptr: a flag without value
  bool pet;             // has a PET_<DEST> environment default
  const char* group;
  const char* help;
  // The values it accepts, space-separated, when they form a closed list ("static c10d"): the
  // shell completion offers them; options whose values are only these are checked against them.
  const char* choices = nullptr;
};

std::span<const OptionSpec> Options();
const OptionSpec* FindOption(const std::string& dest);
std::vector<std::string> Choices(const OptionSpec& spec);  // empty without a list
std::vector<std::string> Choices(const std::string& dest);
std::string PetName(const OptionSpec& spec);  // "PET_NPROC_PER_NODE"
std::vector<std::string> LongNames(
    const OptionSpec& spec);  // "--nproc_per_node", "--nproc-per-node"

// argv split at the training script, launcher options rewritten to their canonical form:
// "--dest" for a flag, "--dest", "<value>" (two elements) for an option with a value.
struct SplitArgs {
  std::vector<std::string> options;
  std::optional<std::string> script;
  std::vector<std::string> script_args;
};
// Expands unambiguous prefixes and short options, drops argparse's lone "--". Throws UsageError
// for an unknown or ambiguous option or a missing or unexpected value.
SplitArgs NormaliseArgs(const std::vector<std::string>& args);

// An option's value after the command line and its PET_* default, with the name messages show:
// "--nnodes" when given on the command line, "PET_NNODES" when taken from the environment.
struct Given {
  std::string text;
  std::string name;
};
struct RawValues {
  std::map<std::string, Given> values;  // by dest; options neither given nor in PET_* are absent
  std::map<std::string, bool> flags;    // by dest; flags neither given nor in PET_* are absent
  const Given* Find(const std::string& dest) const;
  bool On(const std::string& dest) const;
};

// Calls `apply(text, name)` when the option was given on the command line or in PET_*.
template <class Apply>
void IfGiven(const RawValues& raw, const char* dest, Apply&& apply) {
  if (const Given* given = raw.Find(dest)) apply(given->text, given->name);
}

// The command line as shell completion sees it: every option and spelling, values, the training
// script (cli_completion.cc). `program`: the name the script completes (ddprun, or ddprun-launch,
// the same options under torch.distributed.launch's personality).
completion::Command CompletionCommand(const std::string& program = "ddprun");
// `ddprun --print-completion SHELL`'s script; throws UsageError for a shell it has none for.
std::string CompletionScript(const std::string& shell, const std::string& given_as,
                             const std::string& program = "ddprun");

// Validates and resolves everything into a LaunchConfig (cli_config.cc).
elastic::LaunchConfig BuildConfig(const RawValues& raw, const SplitArgs& split,
                                  const EnvLookup& env, const GpuCounter& gpus,
                                  Personality personality = Personality::kTorchrun);

// The rendezvous decisions (cli_rendezvous.cc), shared by the launch and --dry_run.
// --rdzv_conf values with torchrun's defaults; a bad value throws UsageError naming the key.
elastic::RendezvousSettings ReadRendezvousSettings(const elastic::LaunchConfig& config);
// Static backend with --rdzv_endpoint HOST:PORT: the master is that endpoint (torchrun reads
// --master_addr/--master_port only when no endpoint is given).
void UseStaticEndpointAsMaster(elastic::LaunchConfig& config);
// The job's token, if any (rdzv_token.h), into config.rdzv_settings.auth.
void ReadAuthentication(elastic::LaunchConfig& config, const EnvLookup& env);
// Throws UsageError (exit 2) for a backend or node layout this build cannot launch.
void CheckLaunchable(const elastic::LaunchConfig& config);

// --hang-timeout and the options that go with it (cli_hang.cc).
void FillHangDetection(const RawValues& raw, elastic::LaunchConfig& config);

// Validators (cli_validate.cc).
std::pair<int, int> ParseNnodes(const std::string& text, const std::string& name);
int ParseIntInRange(const std::string& text, const std::string& name, long long min, long long max,
                    const std::string& accepted);
double ParsePositiveSeconds(const std::string& text, const std::string& name);
// Seconds >= 0 (fractions allowed, at most 1e9) as milliseconds, rounded; 0 means off, and a
// positive value is at least 1 ms. `what_off` names what 0 turns off, for the message.
std::chrono::milliseconds ParseSecondsOrOff(const std::string& text, const std::string& name,
                                            const std::string& what_off);
elastic::StreamSelection ParseStreamSelection(const std::string& text, const std::string& name);
std::vector<int> ParseLocalRanksFilter(const std::string& text, const std::string& name);
std::map<std::string, std::string> ParseRdzvConf(const std::string& text, const std::string& name);
std::vector<std::string> ParseSignals(const std::string& text, const std::string& name);
std::vector<std::string> ParseFilters(const std::string& text);
// --warm-preload: dotted Python module names separated by commas; empty: none.
std::vector<std::string> ParseModuleList(const std::string& text, const std::string& name);
void RequireChoice(const std::string& text, const std::string& name,
                   const std::vector<std::string>& choices);
bool ParseEnvFlag(const std::string& text, const std::string& name);
std::string RandomUuid4();

}  // namespace ddprun::cli
