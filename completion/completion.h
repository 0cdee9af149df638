// Shell completion scripts (bash, zsh, fish) written from a description of a command line: its
// options, their spellings, whether they take a value and which values they accept, and its
// subcommands. ddprun describes itself from its option table (cli/cli_completion.cc); the
// companion programs are described from their CLI11 --help text (cli11_help.h). The scripts
// need nothing but the shell (bash-completion, zsh's compsys and fish load them when installed,
// or they can be sourced).
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace ddprun::completion {

enum class Shell { kBash, kZsh, kFish };

// What a value (or a positional word) completes to.
enum class ValueKind {
  kNone,       // free text: nothing is offered
  kChoice,     // one of Option::choices
  kFile,       // a path
  kDirectory,  // a directory
};

struct Option {
  std::string key;                 // unique within its command: "nproc_per_node", "host"
  std::vector<std::string> names;  // every spelling, dashes included: "--nproc-per-node", "-m"
  std::string metavar;             // empty: a flag without value
  ValueKind value = ValueKind::kNone;
  std::vector<std::string> choices;  // ValueKind::kChoice
  std::string help;                  // one line

  bool TakesValue() const { return !metavar.empty(); }
};

// How positional words are completed. kScript: the first one is a program (a path) and every
// word after it belongs to that program (ddprun's training script and its arguments): options
// are no longer offered and plain file completion takes over.
enum class Positionals { kNone, kFiles, kScript };

struct Command {
  std::string name;  // the program ("ddprun") or the subcommand ("get")
  std::string help;  // one line
  std::vector<Option> options;
  std::vector<Command> subcommands;  // one level: a program's subcommands
  Positionals positionals = Positionals::kNone;
  // argparse's unambiguous prefixes ("--nproc" for "--nproc-per-node"), '-' and '_' equal.
  bool abbreviations = false;
};

// The completion script of `command` (a program) for `shell`. `generator` is named in the
// script's header comment ("ddprun --print-completion bash").
std::string WriteScript(Shell shell, const Command& command, const std::string& generator);

// "bash", "zsh", "fish" -> Shell; std::nullopt for anything else.
std::optional<Shell> ParseShell(const std::string& name);
// The shells' names, in the order above.
const std::vector<std::string>& ShellNames();

// Every spelling of every option of `command` and of its subcommands, for tests and checks.
std::vector<std::string> AllOptionNames(const Command& command);

}  // namespace ddprun::completion
