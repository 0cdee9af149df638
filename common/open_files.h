// The open-file limit (RLIMIT_NOFILE) of the launcher and the store: raised from the soft to the
// hard limit at start (a 16k-rank start needs a descriptor per connection), and put back for the
// workers, so that their environment is what it was without ddprun (torchrun leaves it alone).
#pragma once
#include <sys/resource.h>

#include <cstdint>
#include <optional>
#include <string>

namespace ddprun {

struct OpenFileLimit {
  std::uint64_t soft = 0;
  std::uint64_t hard = 0;
};

// Raises this process's soft limit to its hard limit (once; later calls change nothing) and
// returns the limits in force afterwards.
OpenFileLimit RaiseOpenFileLimit();

// The soft limit this process started with, to hand to children (async-signal-safe to read
// after RaiseOpenFileLimit); nullopt when it was never raised.
const rlimit* OriginalOpenFileLimit();

// One line when serving `connections` (each one descriptor, plus `reserve` for everything else)
// cannot fit `limit`: `asked` (what asks for them, e.g. "--max-connections=5000"), the limits,
// and the fixes (raising the hard limit, or `smaller`); nullopt when it fits.
std::optional<std::string> ConnectionShortfall(const std::string& asked, std::uint64_t connections,
                                               OpenFileLimit limit, const std::string& smaller,
                                               std::uint64_t reserve = 64);

}  // namespace ddprun
