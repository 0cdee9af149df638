#include "common/open_files.h"

#include <mutex>

namespace ddprun {
namespace {

rlimit original{};
bool raised = false;
std::once_flag raise_once;

}  // namespace

OpenFileLimit RaiseOpenFileLimit() {
  std::call_once(raise_once, [] {
    if (::getrlimit(RLIMIT_NOFILE, &original) != 0) return;
    raised = true;
    if (original.rlim_cur == original.rlim_max) return;
    rlimit wanted = original;
    wanted.rlim_cur = original.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &wanted);
  });
  rlimit now{};
  ::getrlimit(RLIMIT_NOFILE, &now);
  return {static_cast<std::uint64_t>(now.rlim_cur), static_cast<std::uint64_t>(now.rlim_max)};
}

const rlimit* OriginalOpenFileLimit() { return raised ? &original : nullptr; }

std::optional<std::string> ConnectionShortfall(const std::string& asked, std::uint64_t connections,
                                               OpenFileLimit limit, const std::string& smaller,
                                               std::uint64_t reserve) {
  const std::uint64_t needed = connections + reserve;
  if (needed <= limit.soft) return std::nullopt;
  return asked + " needs about " + std::to_string(needed) + " open files, but the limit is " +
         std::to_string(limit.soft) + " (hard limit " + std::to_string(limit.hard) +
         "), so not every connection can be served: raise the hard limit (ulimit -Hn, systemd "
         "LimitNOFILE=, /etc/security/limits.conf) or " +
         smaller;
}

}  // namespace ddprun
