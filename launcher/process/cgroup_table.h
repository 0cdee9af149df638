// The ProcessTable of a launch with a job cgroup (job_cgroup.h): a snapshot lists the job
// cgroup's cgroup.procs, the job's processes only (and whatever they started, in any session),
// and reads /proc/<pid>/stat of those; its cost follows the job, not the machine. Kill, Pause and
// Now are the /proc table's (a pidfd, the session checked again). The session keeper uses it
// only while every guarded session's worker joined the cgroup (elastic/session_sweep.h): a
// session outside it would have processes that this table does not list.
#pragma once
#include <string>

#include "launcher/process/proc_table.h"

namespace ddprun::launcher::process {

class CgroupProcessTable : public ProcProcessTable {
 public:
  // `cgroup`: the job cgroup's directory.
  explicit CgroupProcessTable(std::string cgroup);
  // The processes of `sessions` among the cgroup's; when cgroup.procs cannot be read, the /proc
  // table's snapshot instead (never an empty one that would end a sweep too early).
  std::vector<elastic::ProcessInfo> Snapshot(const std::set<int>& sessions) override;

 private:
  std::string procs_path_;
};

}  // namespace ddprun::launcher::process
