// CLI11 parses the argv that cli_abbrev.cc has already normalised (canonical names, no script);
// it contributes help formatting and option bookkeeping. Values stay strings until
// cli_config.cc validates them, so that PET_* values get the same checks and messages.
#include "cli/cli.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <utility>

#include "cli/cli_internal.h"
#include "common/errors.h"
#include "common/version.h"

namespace ddprun::cli {
namespace {

using cli::OptionSpec;

constexpr const char* kDescription =
    "ddprun: a native drop-in replacement for torchrun (Torch Distributed Elastic Training "
    "Launcher).";
constexpr const char* kFooter =
    "Options come before the training script; everything after it goes to the script.\n"
    "Multi-word options are spelled both --a_b and --a-b; unambiguous prefixes are accepted.\n"
    "[PET_X] marks the environment variable that gives the option's default.";

constexpr const char* kLegacyFooter =
    "\nAs ddprun-launch (torch.distributed.launch's stand-in), every worker also gets\n"
    "--local_rank=N right after the script, unless --use_env (--pass_local_rank: its spelling).";

class HelpFormatter : public CLI::Formatter {
 public:
  explicit HelpFormatter(std::string program) : program_(std::move(program)) {}
  std::string make_usage(const CLI::App*, std::string) const override {
    return "usage: " + program_ + " [options] training_script [training_script_args...]\n";
  }

 private:
  std::string program_;
};

std::string CliNames(const OptionSpec& spec) {
  std::string names = spec.short_name != 0 ? std::string("-") + spec.short_name + "," : "";
  for (const std::string& name : cli::LongNames(spec)) names += name + ",";
  names.pop_back();
  return names;
}

std::string HelpText(const OptionSpec& spec) {
  return spec.pet ? std::string(spec.help) + " [" + cli::PetName(spec) + "]" : spec.help;
}

std::string OneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

// The CLI11 application over the option table, with string storage for every value.
class Parser {
 public:
  explicit Parser(Personality personality)
      : app_(kDescription, "ddprun"),
        program_(personality == Personality::kLegacyLaunch ? kLegacyLaunchName : "ddprun") {
    const bool legacy = personality == Personality::kLegacyLaunch;
    app_.formatter(std::make_shared<HelpFormatter>(program_));
    app_.get_formatter()->column_width(46);
    app_.footer(legacy ? std::string(kFooter) + kLegacyFooter : std::string(kFooter));
    app_.prefix_command();
    app_.set_help_flag();
    for (const OptionSpec& spec : cli::Options()) Add(spec);
  }

  // Returns the --help or --version text, or std::nullopt to run.
  std::optional<std::string> Parse(std::vector<std::string> options) {
    std::reverse(options.begin(), options.end());
    try {
      app_.parse(options);
    } catch (const CLI::CallForHelp&) {
      return app_.help();
    } catch (const CLI::ParseError& error) {
      throw UsageError(OneLine(error.what()));
    }
    RejectRemaining();
    if (options_.at("version")->count() > 0) return VersionLine("ddprun") + "\n";
    if (options_.at("print_completion")->count() > 0) {
      return cli::CompletionScript(values_.at("print_completion"), "--print_completion", program_);
    }
    return std::nullopt;
  }

  cli::RawValues Collect(const EnvLookup& env) const {
    cli::RawValues raw;
    for (const OptionSpec& spec : cli::Options()) {
      const std::string dest = spec.dest;
      const bool given = options_.at(dest)->count() > 0;
      const auto from_env = !given && spec.pet ? env(cli::PetName(spec)) : std::nullopt;
      if (spec.metavar == nullptr) {
        if (given) raw.flags[dest] = true;
        if (from_env) raw.flags[dest] = cli::ParseEnvFlag(*from_env, cli::PetName(spec));
      } else if (given) {
        raw.values[dest] = {values_.at(dest), "--" + dest};
      } else if (from_env) {
        raw.values[dest] = {*from_env, cli::PetName(spec)};
      }
    }
    return raw;
  }

 private:
  void Add(const OptionSpec& spec) {
    CLI::Option* option = nullptr;
    std::string help = HelpText(spec);
    if (std::string(spec.dest) == "help") {
      option = app_.set_help_flag(CliNames(spec), help);
    } else if (spec.metavar == nullptr) {
      option = app_.add_flag(CliNames(spec))->description(help);
    } else {
      option = app_.add_option(CliNames(spec), values_[spec.dest], help);
      option->type_name(spec.metavar)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
    option->group(spec.group);
    options_[spec.dest] = option;
  }

  // With prefix_command(), CLI11 leaves an unknown option and all that follows in remaining().
  void RejectRemaining() const {
    const std::vector<std::string> remaining = app_.remaining();
    if (remaining.empty()) return;
    throw UsageError("unrecognized argument " + remaining.front() + "; see ddprun --help");
  }

  CLI::App app_;
  std::string program_;  // ddprun, or ddprun-launch (torch.distributed.launch's personality)
  std::map<std::string, std::string> values_;
  std::map<std::string, CLI::Option*> options_;
};

}  // namespace

const Given* RawValues::Find(const std::string& dest) const {
  const auto it = values.find(dest);
  return it == values.end() ? nullptr : &it->second;
}

bool RawValues::On(const std::string& dest) const {
  const auto it = flags.find(dest);
  return it != flags.end() && it->second;
}

Personality PersonalityOf(const char* argv0) {
  if (argv0 == nullptr) return Personality::kTorchrun;
  const std::string_view path(argv0);
  const std::size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  return name == kLegacyLaunchName ? Personality::kLegacyLaunch : Personality::kTorchrun;
}

CliResult ParseCommandLine(const std::vector<std::string>& args, const EnvLookup& env,
                           const GpuCounter& gpus, Personality personality) {
  const cli::SplitArgs split = cli::NormaliseArgs(args);
  Parser parser(personality);
  if (auto text = parser.Parse(split.options)) {
    return {CliResult::Action::kPrintAndExit, {}, std::move(*text)};
  }
  return {CliResult::Action::kRun,
          cli::BuildConfig(parser.Collect(env), split, env, gpus, personality), ""};
}

CliResult ParseCommandLine(const std::vector<std::string>& args, const EnvLookup& env,
                           Personality personality) {
  return ParseCommandLine(args, env, CudaDeviceCount, personality);
}

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

}  // namespace ddprun::cli
