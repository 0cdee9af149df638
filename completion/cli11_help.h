// Reads the --help text of a program built on CLI11 (2.x's default formatter) into a Command,
// so that the companion programs' completion scripts come from the same option definitions as
// their --help and cannot drift from it. Understood: option lines "  -b,--minbytes TEXT=8  help"
// in every section but "Positionals:" (a type after the names means a value; "{a,b,c}" in the
// type gives its choices, as CLI::IsMember prints them; a type naming FILE or DIR completes
// paths), descriptions wrapped onto the next lines, and the "Subcommands:" section, whose own
// --help `help_of` returns.
#pragma once
#include <functional>
#include <string>

#include "completion/completion.h"

namespace ddprun::completion {

using HelpOf = std::function<std::string(const std::string& subcommand)>;

Command ParseCli11Help(const std::string& program, const std::string& help, const HelpOf& help_of);

}  // namespace ddprun::completion
