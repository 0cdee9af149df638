// Fuzz target: SLURM hostlist expansion (cli/env_presets.h). The input is one hostlist.
// std::invalid_argument is the documented rejection. Checked: an expanded list is not empty,
// holds at most 1,000,000 hosts, none empty or with a separator in it, and FirstSlurmHost
// (which expands nothing) agrees with its first host; a list rejected for any reason but its
// size is rejected by FirstSlurmHost too.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cli/env_presets.h"
#include "fuzz/fuzz_support.h"

namespace {

using ddprun::fuzz::Require;

std::optional<std::string> First(const std::string& hostlist) {
  try {
    return ddprun::cli::FirstSlurmHost(hostlist);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string hostlist = ddprun::fuzz::AsText(data, size);
  const std::optional<std::string> first = First(hostlist);
  try {
    const auto hosts = ddprun::cli::ExpandSlurmHostlist(hostlist);
    Require(!hosts.empty() && hosts.size() <= 1'000'000, "expanded list empty or too long");
    for (const std::string& host : hosts) {
      Require(!host.empty() && host.find_first_of(",[] \t\n") == std::string::npos,
              "an expanded host is empty or holds a separator", host);
    }
    Require(first.has_value() && *first == hosts.front(),
            "FirstSlurmHost differs from the first expanded host", first.value_or("(rejected)"));
  } catch (const std::invalid_argument& error) {
    const bool too_many = std::string(error.what()).starts_with("more than ");
    Require(too_many || !first, "FirstSlurmHost accepts a list ExpandSlurmHostlist rejects",
            error.what());
  }
  return 0;
}
