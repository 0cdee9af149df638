// The session keeper (docs/architecture.md, "No orphans"): a small process, started before the
// first worker, that outlives the launcher. Every worker is a session leader (spawn.h), so what
// it starts shares its session id (its pid) unless it calls setsid() itself. Each worker writes
// its pid to the keeper's pipe between fork and exec; when the pipe reaches end of file — the
// launcher ended in any way, SIGKILL included — the keeper SIGKILLs every process still in those
// sessions (elastic/session_sweep.h) and exits.
//
// With a job cgroup (job_cgroup.h), made by the launcher before the keeper starts, the keeper gets
// its directory as its only argument (argv[1]; none without one): each worker joins it before it
// writes its line, and says so on the line ("<pid> cgroup"). While every guarded session's
// worker joined, the keeper lists the job's processes from the cgroup (cgroup_table.h), else from
// all of /proc (proc_table.h); what it kills is the same either way. After its sweep it removes
// the directory. A launcher whose keeper cannot start makes no cgroup; one whose keeper was
// killed tries to remove it at its end. SIGKILL of both leaves an empty directory behind (the
// kernel removes no cgroup by itself), named ddprun-<pid>-<random>.
#pragma once
#include <sys/types.h>

#include <string>

#include "launcher/process/job_cgroup.h"

namespace ddprun::launcher::process {

// The keeper runs the ddprun executable with this argv[0] (and shows under this name in ps).
inline constexpr const char* kSessionKeeperName = "ddprun-session-keeper";

// The launcher's side: one per launch.
class SessionKeeper {
 public:
  // Makes the job cgroup (none when it cannot) and starts `executable` (ddprun itself) as the
  // keeper, in a session of its own. If the keeper cannot be started, warns and the launch goes
  // on without one and without a cgroup (WriteFd() and JobCgroupFd() are -1).
  explicit SessionKeeper(const std::string& executable = "/proc/self/exe");
  // Closes the pipe and waits (at most 10 s) for the keeper's sweep, so that a launcher that
  // returns has left nothing behind; then removes the job cgroup if the keeper did not (it was
  // killed, or is still sweeping: the directory is busy then and stays).
  ~SessionKeeper();
  SessionKeeper(const SessionKeeper&) = delete;
  SessionKeeper& operator=(const SessionKeeper&) = delete;

  // The pipe's write end for the spawner (close-on-exec, only the launcher holds it); -1 when
  // there is no keeper.
  int WriteFd() const { return write_fd_; }
  // The job cgroup's directory for the spawner (JobCgroup::DirFd); -1 when there is none.
  int JobCgroupFd() const { return cgroup_.DirFd(); }
  const std::string& JobCgroupPath() const { return cgroup_.Path(); }
  pid_t Pid() const { return pid_; }

 private:
  JobCgroup cgroup_;
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int write_fd_ = -1;
};

// True when this process was started as the keeper (argv[0] is kSessionKeeperName); checked
// before any command-line parsing.
bool IsSessionKeeper(int argc, char** argv);

// The keeper process: reads session ids from stdin until end of file, then sweeps them and
// removes the job cgroup argv[1] if given. Exits 0, or 1 (with one line on stderr) when some
// process survived the sweep's limits.
int RunSessionKeeper(int argc, char** argv);

}  // namespace ddprun::launcher::process
