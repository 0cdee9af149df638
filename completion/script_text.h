// Text helpers shared by the script writers: shell-safe names and quoting.
#pragma once
#include <string>
#include <vector>

#include "completion/completion.h"

namespace ddprun::completion::text {

// "ddprun-allreduce-check" -> "ddprun_allreduce_check": usable in a shell function name.
std::string Identifier(const std::string& program);
// 'text' for bash and zsh ('\'' inside).
std::string ShQuote(const std::string& text);
// 'text' for fish (\' and \\ inside).
std::string FishQuote(const std::string& text);
// "a b c"
std::string Join(const std::vector<std::string>& words, const std::string& separator = " ");
// Every "--long" spelling of the command's own options, in table order.
std::vector<std::string> LongNames(const Command& command);
// The option spelled exactly `name`, or nullptr.
const Option* FindByName(const Command& command, const std::string& name);

}  // namespace ddprun::completion::text
