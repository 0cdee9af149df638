// Pure parsing for the job cgroup (job_cgroup.h): where this process's cgroup v2 directory is,
// from the texts of /proc/self/mountinfo and /proc/self/cgroup, and what a cgroup's files say
// (cgroup.procs, cgroup.events). Text in, value out: no file is read here.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::launcher::process {

// A cgroup2 mount: the hierarchy's directory it shows (`root`, "/" unless a subtree is bind
// mounted or a cgroup namespace's) at `mount_point`.
struct Cgroup2Mount {
  std::string root;
  std::string mount_point;
  bool operator==(const Cgroup2Mount&) const = default;
};

// The cgroup2 mounts of a mountinfo text (filesystem type "cgroup2", after the " - "
// separator), in order, with their octal escapes (\040 for a space, ...) decoded. A hybrid host
// has one at /sys/fs/cgroup/unified, a pure v2 host at /sys/fs/cgroup; a v1-only host none.
std::vector<Cgroup2Mount> Cgroup2Mounts(std::string_view mountinfo);

// This process's v2 cgroup from a /proc/<pid>/cgroup text: the path of its "0::<path>" line.
// None without that line, for a path that is not absolute, that goes up ("/.." : a cgroup
// outside this cgroup namespace) or that was removed (" (deleted)").
std::optional<std::string> Cgroup2PathOf(std::string_view proc_cgroup);

// The directory of cgroup `path` under one of `mounts`: the first whose root holds the path.
// None when no mount shows it.
std::optional<std::string> CgroupDirectory(const std::vector<Cgroup2Mount>& mounts,
                                           std::string_view path);

// Where a job cgroup goes (job_cgroup.h), or why none: `setting` is DDPRUN_JOB_CGROUP's value
// (null when unset): "off" for none, an absolute path for that directory, unset or empty for
// this process's own cgroup directory (found in `mountinfo` and `proc_cgroup`).
struct JobCgroupPlace {
  std::optional<std::string> parent;  // the directory to make the job cgroup in
  std::string why_none;               // when there is none: one phrase, for a debug line
};
JobCgroupPlace JobCgroupParent(const char* setting, std::string_view mountinfo,
                               std::string_view proc_cgroup);

// The pids of a cgroup.procs text, one decimal per line; malformed lines and pids below 1 (a
// process outside the reader's pid namespace shows as 0) are skipped.
std::vector<int> ParsePidList(std::string_view procs);

// Whether a cgroup.events text says "populated 1"; none when it has no "populated" line.
std::optional<bool> ParsePopulated(std::string_view events);

}  // namespace ddprun::launcher::process
