// ddprun's shell completion comes from the option table, like --help, so the two cannot drift:
// every spelling, the closed value lists (OptionSpec::choices), paths for DIR/FILE/PATH values,
// argparse's prefixes, and the training script after which everything is the script's.
#include <string>

#include "cli/cli_internal.h"
#include "common/errors.h"

namespace ddprun::cli {
namespace {

completion::ValueKind ValueKindOf(const OptionSpec& spec) {
  const std::string metavar = spec.metavar == nullptr ? "" : spec.metavar;
  if (spec.choices != nullptr) return completion::ValueKind::kChoice;
  if (metavar == "DIR") return completion::ValueKind::kDirectory;
  if (metavar == "FILE" || metavar == "PATH") return completion::ValueKind::kFile;
  return completion::ValueKind::kNone;
}

completion::Option CompletionOption(const OptionSpec& spec) {
  completion::Option option;
  option.key = spec.dest;
  if (spec.short_name != 0) option.names.push_back(std::string("-") + spec.short_name);
  for (const std::string& name : LongNames(spec)) option.names.push_back(name);
  option.metavar = spec.metavar == nullptr ? "" : spec.metavar;
  option.value = ValueKindOf(spec);
  option.choices = Choices(spec);
  option.help = spec.help;
  return option;
}

}  // namespace

completion::Command CompletionCommand(const std::string& program) {
  completion::Command command;
  command.name = program;
  command.help = "launch distributed PyTorch training (torchrun)";
  for (const OptionSpec& spec : Options()) command.options.push_back(CompletionOption(spec));
  command.positionals = completion::Positionals::kScript;
  command.abbreviations = true;
  return command;
}

std::string CompletionScript(const std::string& shell, const std::string& given_as,
                             const std::string& program) {
  RequireChoice(shell, given_as, Choices("print_completion"));
  return completion::WriteScript(*completion::ParseShell(shell), CompletionCommand(program),
                                 program + " --print-completion " + shell);
}

}  // namespace ddprun::cli
