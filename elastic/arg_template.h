// Python string.Template.safe_substitute semantics, which torchrun applies to every worker
// argument (${local_rank}) and to log-line prefix templates (${role_name}, ${rank}, ...).
#pragma once
#include <map>
#include <string>

namespace ddprun::elastic {

// Replaces $name and ${name} found in `values`, turns $$ into $, and leaves every other
// $-sequence untouched (identifiers are [_a-zA-Z][_a-zA-Z0-9]*, as Python's idpattern).
std::string SafeSubstitute(const std::string& text,
                           const std::map<std::string, std::string>& values);

}  // namespace ddprun::elastic
