#include "launcher/process/cgroup_table.h"

#include <utility>

#include "launcher/process/cgroup_paths.h"

namespace ddprun::launcher::process {

CgroupProcessTable::CgroupProcessTable(std::string cgroup)
    : procs_path_(std::move(cgroup) + "/cgroup.procs") {}

// Listed first, each read after, as the /proc table: a child forked after the listing by a
// parent gone before its reading is in neither (elastic::SessionSweep::Prune says why that is
// safe). A zombie is no longer listed: it has left the cgroup.
std::vector<elastic::ProcessInfo> CgroupProcessTable::Snapshot(const std::set<int>& sessions) {
  std::vector<elastic::ProcessInfo> table;
  if (sessions.empty()) return table;
  const auto procs = ReadKernelFile(procs_path_);
  if (!procs) return ProcProcessTable::Snapshot(sessions);
  for (const int pid : ParsePidList(*procs)) {
    const auto process = ReadProcStat(pid);
    if (process && sessions.count(process->session)) table.push_back(*process);
  }
  return table;
}

}  // namespace ddprun::launcher::process
