#include "completion/completion.h"

#include <algorithm>

#include "completion/script_text.h"

namespace ddprun::completion {

std::string WriteBash(const Command& command, const std::string& generator);  // bash.cc
std::string WriteZsh(const Command& command, const std::string& generator);   // zsh.cc
std::string WriteFish(const Command& command, const std::string& generator);  // fish.cc

std::string WriteScript(Shell shell, const Command& command, const std::string& generator) {
  switch (shell) {
    case Shell::kBash:
      return WriteBash(command, generator);
    case Shell::kZsh:
      return WriteZsh(command, generator);
    case Shell::kFish:
      break;
  }
  return WriteFish(command, generator);
}

const std::vector<std::string>& ShellNames() {
  static const std::vector<std::string> names = {"bash", "zsh", "fish"};
  return names;
}

std::optional<Shell> ParseShell(const std::string& name) {
  if (name == "bash") return Shell::kBash;
  if (name == "zsh") return Shell::kZsh;
  if (name == "fish") return Shell::kFish;
  return std::nullopt;
}

std::vector<std::string> AllOptionNames(const Command& command) {
  std::vector<std::string> names;
  for (const Option& option : command.options) {
    names.insert(names.end(), option.names.begin(), option.names.end());
  }
  for (const Command& sub : command.subcommands) {
    for (const std::string& name : AllOptionNames(sub)) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}

namespace text {

std::string Identifier(const std::string& program) {
  std::string id = program;
  for (char& c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!ok) c = '_';
  }
  return id;
}

std::string ShQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string FishQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return quoted + "'";
}

std::string Join(const std::vector<std::string>& words, const std::string& separator) {
  std::string joined;
  for (const std::string& word : words) joined += (joined.empty() ? "" : separator) + word;
  return joined;
}

std::vector<std::string> LongNames(const Command& command) {
  std::vector<std::string> names;
  for (const Option& option : command.options) {
    for (const std::string& name : option.names) {
      if (name.starts_with("--")) names.push_back(name);
    }
  }
  return names;
}

const Option* FindByName(const Command& command, const std::string& name) {
  for (const Option& option : command.options) {
    if (std::find(option.names.begin(), option.names.end(), name) != option.names.end()) {
      return &option;
    }
  }
  return nullptr;
}

}  // namespace text
}  // namespace ddprun::completion
