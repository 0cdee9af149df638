#include "completion/cli11_help.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace ddprun::completion {
namespace {

std::string Trim(const std::string& text) {
  const auto begin = text.find_first_not_of(' ');
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(' ') - begin + 1);
}

std::size_t Indent(const std::string& line) {
  const auto first = line.find_first_not_of(' ');
  return first == std::string::npos ? line.size() : first;
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, separator);) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

// "TEXT:{auto,cpu,nccl}=auto" -> choices, metavar "TEXT"; ":FILE"/":DIR" -> paths.
void ReadType(const std::string& type, Option& option) {
  option.metavar = type.substr(0, type.find_first_of(":= "));
  if (option.metavar.empty()) option.metavar = "VALUE";
  const auto open = type.find('{');
  const auto close = type.find('}', open);
  if (open != std::string::npos && close != std::string::npos) {
    option.choices = Split(type.substr(open + 1, close - open - 1), ',');
    option.value = ValueKind::kChoice;
  } else if (type.find("DIR") != std::string::npos) {
    option.value = ValueKind::kDirectory;
  } else if (type.find("FILE") != std::string::npos) {
    option.value = ValueKind::kFile;
  }
}

// "  -b,--minbytes TEXT=8        smallest size" (the help may be on the next line).
Option ReadOption(const std::string& line) {
  Option option;
  const std::string body = line.substr(Indent(line));
  const auto names_end = std::min(body.find(' '), body.size());
  option.names = Split(body.substr(0, names_end), ',');
  std::string rest = body.substr(names_end);
  if (rest.size() > 1 && rest[0] == ' ' && rest[1] != ' ') {  // one space, then the type
    const auto gap = rest.find("  ", 1);
    ReadType(rest.substr(1, gap == std::string::npos ? std::string::npos : gap - 1), option);
    rest = gap == std::string::npos ? "" : rest.substr(gap);
  }
  option.help = Trim(rest);
  for (const std::string& name : option.names) {
    if (name.starts_with("--")) {
      option.key = name.substr(2);
      break;
    }
  }
  if (option.key.empty() && !option.names.empty()) option.key = option.names.front().substr(1);
  return option;
}

void AppendHelp(std::string& help, const std::string& more) {
  help += (help.empty() ? "" : " ") + Trim(more);
}

}  // namespace

Command ParseCli11Help(const std::string& program, const std::string& help, const HelpOf& help_of) {
  Command command;
  command.name = program;
  std::string section;
  std::string* last_help = nullptr;  // where a wrapped description continues
  std::stringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    if (Trim(line).empty()) continue;
    if (Indent(line) == 0) {
      if (line.back() == ':') section = line.substr(0, line.size() - 1);
      if (command.help.empty() && !line.starts_with("Usage:")) command.help = Trim(line);
      last_help = nullptr;
    } else if (section == "Positionals") {
      last_help = nullptr;
    } else if (Indent(line) > 2 && last_help != nullptr) {
      AppendHelp(*last_help, line);
    } else if (section == "Subcommands") {
      const std::string name = Split(Trim(line), ' ').front();
      // One level: a subcommand's own subcommands are not looked for.
      Command sub = ParseCli11Help(name, help_of(name), [](const std::string&) { return ""; });
      sub.help = Trim(line.substr(Indent(line) + name.size()));
      command.subcommands.push_back(std::move(sub));
      last_help = &command.subcommands.back().help;
    } else if (Trim(line).starts_with("-")) {
      command.options.push_back(ReadOption(line));
      last_help = &command.options.back().help;
    }
  }
  return command;
}

}  // namespace ddprun::completion
