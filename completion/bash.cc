// The bash script: it reads the line up to the cursor itself (COMP_LINE) instead of COMP_WORDS,
// so that "--opt=value" and bash's COMP_WORDBREAKS do not split what the program sees as one
// word, and it needs no bash-completion helper (it works when merely sourced).
#include <sstream>

#include "completion/completion.h"
#include "completion/script_text.h"

namespace ddprun::completion {
namespace {

using text::ShQuote;

const char* PositionalName(Positionals positionals) {
  switch (positionals) {
    case Positionals::kFiles:
      return "files";
    case Positionals::kScript:
      return "script";
    case Positionals::kNone:
      break;
  }
  return "none";
}

// The commands a context name ("" = the program itself) stands for.
std::vector<std::pair<std::string, const Command*>> Contexts(const Command& command) {
  std::vector<std::pair<std::string, const Command*>> contexts = {{"", &command}};
  for (const Command& sub : command.subcommands) contexts.emplace_back(sub.name, &sub);
  return contexts;
}

void WriteOptionFunction(std::ostream& out, const std::string& id, const Command& command) {
  out << "__" << id << "_option() {  # $1 subcommand (\"\" for none), $2 an option word: the key\n"
      << "  # of an option taking a value, - for a flag, nothing for an unknown word\n"
      << "  case \"$1 $2\" in\n";
  for (const auto& [context, cmd] : Contexts(command)) {
    for (const Option& option : cmd->options) {
      std::vector<std::string> patterns;
      for (const std::string& name : option.names)
        patterns.push_back(ShQuote(context + " " + name));
      out << "    " << text::Join(patterns, "|") << ") echo "
          << (option.TakesValue() ? ShQuote(option.key) : std::string("-")) << " ;;\n";
    }
  }
  if (command.abbreviations)
    out << "    *) [[ -z $1 && $3 != exact ]] && __" << id << "_prefix \"$2\" ;;\n";
  out << "  esac\n}\n\n";
  if (!command.abbreviations) return;
  out << "__" << id
      << "_prefix() {  # argparse: a unique prefix of one option ('-' and '_' equal)\n"
      << "  local word=\"${1#--}\" name canon hit=\"\" spelled=\"\"\n"
      << "  [[ $1 == --?* && $word != *=* ]] || return 0\n"
      << "  word=\"${word//-/_}\"\n"
      << "  for name in " << text::Join(text::LongNames(command)) << "; do\n"
      << "    canon=\"${name#--}\"\n"
      << "    canon=\"${canon//-/_}\"\n"
      << "    [[ $canon == \"$word\"* ]] || continue\n"
      << "    [[ -z $hit || $hit == \"$canon\" ]] || return 0  # ambiguous\n"
      << "    hit=\"$canon\"\n"
      << "    spelled=\"$name\"\n"
      << "  done\n"
      << "  [[ -n $spelled ]] && __" << id << "_option \"\" \"$spelled\" exact\n"
      << "}\n\n";
}

void WriteValuesFunction(std::ostream& out, const std::string& id, const Command& command) {
  out << "__" << id << "_values() {  # $1 subcommand, $2 option key, $3 the value so far\n"
      << "  case \"$1 $2\" in\n";
  for (const auto& [context, cmd] : Contexts(command)) {
    for (const Option& option : cmd->options) {
      const std::string pattern = ShQuote(context + " " + option.key);
      switch (option.value) {
        case ValueKind::kChoice:
          out << "    " << pattern << ") __" << id << "_words "
              << ShQuote(text::Join(option.choices)) << " \"$3\" ;;\n";
          break;
        case ValueKind::kFile:
          out << "    " << pattern << ") __" << id << "_files \"$3\" ;;\n";
          break;
        case ValueKind::kDirectory:
          out << "    " << pattern << ") __" << id << "_dirs \"$3\" ;;\n";
          break;
        case ValueKind::kNone:
          break;
      }
    }
  }
  out << "  esac\n}\n\n";
}

void WriteContextFunctions(std::ostream& out, const std::string& id, const Command& command) {
  out << "__" << id << "_names() {  # $1 subcommand: its options\n  case \"$1\" in\n";
  for (const auto& [context, cmd] : Contexts(command)) {
    std::vector<std::string> names;
    for (const Option& option : cmd->options) {
      names.insert(names.end(), option.names.begin(), option.names.end());
    }
    out << "    " << ShQuote(context) << ") echo " << ShQuote(text::Join(names)) << " ;;\n";
  }
  out << "  esac\n}\n\n";
  out << "__" << id << "_positional() {  # $1 subcommand: none, files or script\n"
      << "  case \"$1\" in\n";
  for (const auto& [context, cmd] : Contexts(command)) {
    out << "    " << ShQuote(context) << ") echo " << PositionalName(cmd->positionals) << " ;;\n";
  }
  out << "  esac\n}\n\n";
  out << "__" << id << "_words() { mapfile -t COMPREPLY < <(compgen -W \"$1\" -- \"$2\"); }\n"
      << "__" << id << "_files() {\n"
      << "  compopt -o filenames 2>/dev/null\n"
      << "  mapfile -t COMPREPLY < <(compgen -f -- \"$1\")\n}\n"
      << "__" << id << "_dirs() {\n"
      << "  compopt -o filenames 2>/dev/null\n"
      << "  mapfile -t COMPREPLY < <(compgen -d -- \"$1\")\n}\n\n";
}

void WriteMain(std::ostream& out, const std::string& id, const Command& command) {
  std::vector<std::string> subs;
  for (const Command& sub : command.subcommands) subs.push_back(sub.name);
  const std::string f = "__" + id;
  out << "_" << id << "() {\n"
      << "  local line=\"${COMP_LINE:0:COMP_POINT}\" cur=\"\" ctx=\"\" key=\"\" word i\n"
      << "  local -a words\n"
      << "  read -ra words <<< \"$line\"\n"
      << "  if [[ -n $line && $line != *[[:space:]] ]]; then\n"
      << "    cur=\"${words[${#words[@]}-1]}\"\n"
      << "    words=(\"${words[@]:0:${#words[@]}-1}\")\n"
      << "  fi\n"
      << "  COMPREPLY=()\n"
      << "  for ((i = 1; i < ${#words[@]}; i++)); do\n"
      << "    word=\"${words[i]}\"\n"
      << "    if [[ -n $key ]]; then key=\"\"; continue; fi  # the value of the option before\n"
      << "    case \"$word\" in\n"
      << "      --) [[ $(" << f << "_positional \"$ctx\") == none ]] || " << f
      << "_files \"$cur\"; return ;;\n"
      << "      --*=*) continue ;;\n"
      << "      -?*) key=\"$(" << f
      << "_option \"$ctx\" \"$word\")\"; [[ $key == - ]] && key=\"\"; "
      << "continue ;;\n"
      << "    esac\n";
  if (!subs.empty()) {
    out << "    if [[ -z $ctx && \" " << text::Join(subs) << " \" == *\" $word \"* ]]; then\n"
        << "      ctx=\"$word\"\n      continue\n    fi\n";
  }
  out << "    if [[ $(" << f << "_positional \"$ctx\") == script ]]; then " << f
      << "_files \"$cur\"; return; fi\n"
      << "  done\n"
      << "  if [[ -n $key ]]; then " << f << "_values \"$ctx\" \"$key\" \"$cur\"; return; fi\n"
      << "  if [[ $cur == --*=* ]]; then\n"
      << "    key=\"$(" << f << "_option \"$ctx\" \"${cur%%=*}\")\"\n"
      << "    [[ -n $key && $key != - ]] && " << f << "_values \"$ctx\" \"$key\" \"${cur#*=}\"\n"
      << "    # bash splits the word at '=' unless COMP_WORDBREAKS was changed\n"
      << "    [[ $COMP_WORDBREAKS == *=* ]] || COMPREPLY=(\"${COMPREPLY[@]/#/${cur%%=*}=}\")\n"
      << "    return\n"
      << "  fi\n"
      << "  if [[ $cur == -* ]]; then " << f << "_words \"$(" << f
      << "_names \"$ctx\")\" \"$cur\"; return; fi\n";
  if (!subs.empty()) {
    out << "  if [[ -z $ctx ]]; then " << f << "_words " << ShQuote(text::Join(subs))
        << " \"$cur\"; return; fi\n";
  }
  out << "  [[ $(" << f << "_positional \"$ctx\") == none ]] || " << f << "_files \"$cur\"\n"
      << "}\n\n"
      << "complete -F _" << id << " " << command.name << "\n";
}

}  // namespace

std::string WriteBash(const Command& command, const std::string& generator) {
  const std::string id = text::Identifier(command.name);
  std::ostringstream out;
  out << "# bash completion for " << command.name << ", generated by " << generator
      << "; do not edit.\n"
      << "# bash-completion loads it from its completions directory; it may also be sourced.\n\n";
  WriteOptionFunction(out, id, command);
  WriteValuesFunction(out, id, command);
  WriteContextFunctions(out, id, command);
  WriteMain(out, id, command);
  return out.str();
}

}  // namespace ddprun::completion
