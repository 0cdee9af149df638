// The real ProcessTable (elastic/session_sweep.h): the guarded sessions' processes from /proc
// (getsid(2) for each listed pid, /proc/<pid>/stat for theirs), and
// kills through a pidfd after checking again that the pid still names a process of the same
// session, so that a pid reused between the snapshot and the kill is never signalled.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "elastic/session_sweep.h"

namespace ddprun::launcher::process {

// Parses the text of /proc/<pid>/stat: pid, session (field 6) and whether the process is dead
// (state Z or X). The command name in parentheses may hold spaces and parentheses itself.
std::optional<elastic::ProcessInfo> ParseProcStat(std::string_view stat);

// /proc/<pid>/stat of one process, parsed; nullopt once it is gone (or unreadable).
std::optional<elastic::ProcessInfo> ReadProcStat(int pid);

// A /proc or cgroup file read whole (the kernel makes its text on read: stat gives no size);
// nullopt when it cannot be opened or read.
std::optional<std::string> ReadKernelFile(const std::string& path);

class ProcProcessTable : public elastic::ProcessTable {
 public:
  std::vector<elastic::ProcessInfo> Snapshot(const std::set<int>& sessions) override;
  void Kill(const elastic::ProcessInfo& process) override;
  void Pause(std::chrono::milliseconds duration) override;
  std::chrono::steady_clock::time_point Now() override;
};

}  // namespace ddprun::launcher::process
