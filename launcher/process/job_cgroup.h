// The job cgroup (docs/architecture.md, "No orphans"): a cgroup v2 directory made for one launch,
// <this process's v2 cgroup>/ddprun-<pid>-<random>. Every worker joins it between vfork and exec
// (spawn.h), before it registers with the session keeper, so that all it starts is in it too (a
// child inherits its parent's cgroup); the keeper then lists the job's processes from its
// cgroup.procs (cgroup_table.h) instead of all of /proc, and removes the directory after its
// sweep. Best effort: with no cgroup2 mount, no right to make the directory (a user without
// delegation: the common case, not an error), a read-only /sys/fs/cgroup (a container), no room
// (cgroup.max.descendants), ... there is none, one debug line says why, and the keeper scans
// /proc as before.
//
// DDPRUN_JOB_CGROUP: unset or empty, the directory is made in this process's own cgroup; "off",
// none is made; an absolute path, it is made there instead (a delegated subtree).
#pragma once
#include <string>
#include <utility>

namespace ddprun::launcher::process {

inline constexpr const char* kJobCgroupVariable = "DDPRUN_JOB_CGROUP";

class JobCgroup {
 public:
  JobCgroup() = default;  // none
  // Makes the job cgroup and opens its cgroup.procs; none when it cannot (one debug line).
  static JobCgroup Create();
  JobCgroup(JobCgroup&& other) noexcept;
  JobCgroup& operator=(JobCgroup&& other) noexcept;
  // Closes cgroup.procs; the directory stays (the keeper removes it, or Remove()).
  ~JobCgroup();

  bool Exists() const { return !path_.empty(); }
  const std::string& Path() const { return path_; }  // "" when none
  // cgroup.procs, write-only and close-on-exec: a child that writes "0" to it joins the cgroup
  // (async-signal-safe: one write(2)). -1 when none.
  int ProcsFd() const { return procs_fd_; }
  // The directory (O_PATH, close-on-exec), for clone3's CLONE_INTO_CGROUP (spawn.h); -1 when
  // none.
  int DirFd() const { return dir_fd_; }
  // Closes cgroup.procs and removes the directory if it is empty now (no wait); none after.
  void Remove();

 private:
  JobCgroup(std::string path, int procs_fd, int dir_fd)
      : path_(std::move(path)), procs_fd_(procs_fd), dir_fd_(dir_fd) {}
  void Close();
  std::string path_;
  int procs_fd_ = -1;
  int dir_fd_ = -1;
};

// Removes job cgroup `path` once its processes have gone: rmdir, and while the kernel says busy
// although cgroup.procs lists no process (the last killed ones are still exiting), waits for
// cgroup.events to say "populated 0" (pollable), a bounded number of times. True when the
// directory is gone. False, leaving it, when it holds a live process: one that left its
// worker's session (setsid), which the sweep does not kill either; or after the bound.
bool RemoveJobCgroup(const std::string& path);

}  // namespace ddprun::launcher::process
