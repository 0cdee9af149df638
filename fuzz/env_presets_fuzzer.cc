// Fuzz target: --env_preset (cli/env_presets.h ResolveEnvPreset) over a fake environment.
// Input format: fuzz_support.h; the text before "@env" is the preset name, tried as given and
// then every known preset is resolved over the same environment. UsageError is the documented
// rejection. Checked: every setting names an option and a variable and has a value; nnodes and
// node_rank are in range (rank below nodes); slurm's master is the list's first host.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cli/env_presets.h"
#include "common/errors.h"
#include "fuzz/fuzz_support.h"

namespace {

using ddprun::cli::EnvLookup;
using ddprun::fuzz::Require;

long long Number(const std::string& text) {
  try {
    return std::stoll(text);
  } catch (const std::exception&) {
    Require(false, "a numeric setting is not a number", text);
    return 0;
  }
}

void CheckSettings(const std::string& preset,
                   const std::vector<ddprun::elastic::EnvPresetSetting>& settings,
                   const EnvLookup& env) {
  long long nodes = -1;
  long long rank = -1;
  for (const auto& setting : settings) {
    Require(!setting.option.empty() && !setting.variable.empty() && !setting.value.empty() &&
                setting.overridden_by.empty(),
            "a setting without option, variable or value", setting.option);
    if (setting.option == "nnodes") nodes = Number(setting.value);
    if (setting.option == "node_rank") rank = Number(setting.value);
    if (preset == "slurm" && setting.option == "master_addr") {
      // FirstSlurmHost is the first expanded host (checked by fuzz_slurm_hostlist, which
      // expands; expanding here would spend the run on million-host lists).
      // Inside a job step (srun) the step's list, else the job's.
      const auto list =
          env("SLURM_STEP_NODELIST") ? env("SLURM_STEP_NODELIST") : env("SLURM_JOB_NODELIST");
      Require(setting.value == ddprun::cli::FirstSlurmHost(*list),
              "slurm: the master is not the first host of the list");
    }
  }
  Require(nodes >= 1 && rank >= 0 && rank < nodes, "nnodes/node_rank out of range");
}

void Resolve(const std::string& preset, const EnvLookup& env) {
  try {
    CheckSettings(preset, ddprun::cli::ResolveEnvPreset(preset, "--env_preset", env), env);
  } catch (const ddprun::UsageError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = ddprun::fuzz::ParseCommandInput(ddprun::fuzz::AsText(data, size));
  const EnvLookup env = [&input](const std::string& name) -> std::optional<std::string> {
    const auto it = input.env.find(name);
    if (it == input.env.end()) return std::nullopt;
    return it->second;
  };
  std::string preset = input.command;
  while (!preset.empty() && preset.back() == '\n') preset.pop_back();
  Resolve(preset, env);
  for (const std::string& known : ddprun::cli::EnvPresetNames()) {
    if (known != preset) Resolve(known, env);
  }
  return 0;
}
