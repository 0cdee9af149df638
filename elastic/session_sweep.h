// What the session keeper kills when the launcher is gone (docs/architecture.md, "No orphans"):
// every live process whose session is one of the workers' (a worker is a session leader, so its
// session id is its pid), SIGKILLed pass after pass until none is left or the limits are hit.
// Pure policy over the ProcessTable seam; launcher/process/proc_table.* is the real table.
#pragma once
#include <chrono>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::elastic {

// One process as the table lists it.
struct ProcessInfo {
  int pid = 0;
  int session = 0;
  bool dead = false;  // a zombie (or exiting): nothing left to kill
  char state = 0;     // /proc/<pid>/stat's state letter: R, S, D, T, Z, …
};

class ProcessTable {
 public:
  virtual ~ProcessTable() = default;
  // The processes of `sessions` now, dead ones included; a table may list others too (only the
  // guarded sessions' are looked at), so that the real one need not read every process.
  virtual std::vector<ProcessInfo> Snapshot(const std::set<int>& sessions) = 0;
  // SIGKILLs `process` if it still exists and is still in its session (no pid-reuse victims).
  virtual void Kill(const ProcessInfo& process) = 0;
  // Waits before the next pass (killed processes take a moment to die).
  virtual void Pause(std::chrono::milliseconds duration) = 0;
  virtual std::chrono::steady_clock::time_point Now() = 0;
};

struct SweepLimits {
  int max_passes = 50;
  std::chrono::milliseconds max_time{5000};
  std::chrono::milliseconds max_pause{100};  // pauses double from 1 ms up to this
};

struct SweepReport {
  int passes = 0;              // table snapshots taken
  int killed = 0;              // distinct processes signalled
  std::vector<int> survivors;  // still alive when the limits were hit; empty on success
};

// The launcher's line for one worker (launcher/process/spawn.cc): "<pid>\n", or
// "<pid> cgroup\n" when the worker joined the job cgroup (launcher/process/job_cgroup.h) before
// it wrote the line, so that everything its session will hold is in that cgroup.
inline constexpr std::string_view kInCgroupFlag = " cgroup";

class SessionSweep {
 public:
  // Reads the launcher's messages: one line per worker, its session id in decimal, followed by
  // kInCgroupFlag when the worker joined the job cgroup (a partial line is kept for the next
  // call). Ids below 2 and malformed lines are ignored.
  void Feed(std::string_view bytes);
  // Guards `session`; `in_cgroup`: its worker joined the job cgroup.
  void Guard(int session, bool in_cgroup = false);
  const std::set<int>& Sessions() const { return sessions_; }
  // Whether every guarded session's worker joined the job cgroup (true with none guarded): then
  // the cgroup lists every process of those sessions, and a table of its processes suffices.
  bool EverySessionInCgroup() const { return outside_cgroup_.empty(); }

  // Forgets the sessions with no live process in two successive snapshots of `table`: a
  // session id is free for reuse once its last member has gone, and a stranger's new session
  // must never be killed. One snapshot is not enough: it lists /proc first and reads each entry
  // after, so a child forked after the listing by a parent that has exited by its reading is in
  // neither (the session looks empty while its child lives); the second listing starts after
  // the first snapshot ends, and has that child.
  void Prune(ProcessTable& table);
  // The live processes of the guarded sessions, in table order.
  std::vector<ProcessInfo> Targets(const std::vector<ProcessInfo>& table) const;
  // Kills the targets pass after pass until two successive snapshots show none (Prune says
  // why one is not enough), or the limits are hit.
  SweepReport Sweep(ProcessTable& table, const SweepLimits& limits = {}) const;

 private:
  void FeedLine(std::string_view line);
  std::set<int> sessions_;
  std::set<int> outside_cgroup_;  // the guarded sessions whose worker did not join the cgroup
  std::string partial_;
};

}  // namespace ddprun::elastic
