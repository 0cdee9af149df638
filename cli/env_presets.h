// --env_preset: a cluster platform's environment (AI Platform, AzureML, SLURM, SkyPilot) turned
// into node-level launcher options. A preset is chosen by name, never detected. It fills only
// what was given neither as a flag nor as PET_*: flag > PET_* > preset > default
// (docs/env_presets.md gives every preset's variables).
#pragma once
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/cli_internal.h"
#include "elastic/launch_config.h"

namespace ddprun::cli {

// The known preset names, sorted.
std::vector<std::string> EnvPresetNames();

// The options preset `preset` derives from `env`, in a fixed order, overridden_by empty.
// `given_as` ("--env_preset" or "PET_ENV_PRESET") starts every message. Throws UsageError
// "<given_as>=<preset>: <VARIABLE>...: expected <what>" for a missing or malformed variable, and
// "<given_as>=<preset>: unknown preset; known: ..." for an unknown name. Reads nothing else.
std::vector<elastic::EnvPresetSetting> ResolveEnvPreset(const std::string& preset,
                                                        const std::string& given_as,
                                                        const EnvLookup& env);

// SLURM hostlist syntax: comma-separated entries, each text with any number of bracket groups
// of numbers and ranges, expanded as a cartesian product in order; a range keeps the width of
// its low bound ("n[08-10]" -> n08 n09 n10). "node[01-02,07],gpu5" -> node01 node02 node07 gpu5.
// Throws std::invalid_argument with the reason for a malformed list or one over 1,000,000 hosts.
std::vector<std::string> ExpandSlurmHostlist(const std::string& hostlist);
// The first host of the list, without expanding the rest (which is still validated).
std::string FirstSlurmHost(const std::string& hostlist);

// `raw` with the preset named by its env_preset value (none when absent or empty) filling the
// options `raw` lacks. Records the preset name and each setting, applied or overridden (by the
// flag or PET_* name), in `config`. Validators name a preset value "<given_as>=<preset>: <VAR>".
RawValues ApplyEnvPreset(const RawValues& raw, const EnvLookup& env, elastic::LaunchConfig& config);

}  // namespace ddprun::cli
