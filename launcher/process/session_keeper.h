// The session keeper (docs/architecture.md, "No orphans"): a small process, started before the
// first worker, that outlives the launcher. Every worker is a session leader (spawn.h), so what
// it starts shares its session id (its pid) unless it calls setsid() itself. Each worker writes
// its pid to the keeper's pipe between fork and exec; when the pipe reaches end of file — the
// launcher ended in any way, SIGKILL included — the keeper SIGKILLs every process still in those
// sessions (elastic/session_sweep.h) and exits.
#pragma once
#include <sys/types.h>

#include <string>

namespace ddprun::launcher::process {

// The keeper runs the ddprun executable with this argv[0] (and shows under this name in ps).
inline constexpr const char* kSessionKeeperName = "ddprun-session-keeper";

// The launcher's side: one per launch.
class SessionKeeper {
 public:
  // Starts `executable` (ddprun itself) as the keeper, in a session of its own. If it cannot be
  // started, warns and the launch goes on without one (WriteFd() is -1).
  explicit SessionKeeper(const std::string& executable = "/proc/self/exe");
  // Closes the pipe and waits (at most 10 s) for the keeper's sweep, so that a launcher that
  // returns has left nothing behind.
  ~SessionKeeper();
  SessionKeeper(const SessionKeeper&) = delete;
  SessionKeeper& operator=(const SessionKeeper&) = delete;

  // The pipe's write end for the spawner (close-on-exec, only the launcher holds it); -1 when
  // there is no keeper.
  int WriteFd() const { return write_fd_; }
  pid_t Pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int write_fd_ = -1;
};

// True when this process was started as the keeper (argv[0] is kSessionKeeperName); checked
// before any command-line parsing.
bool IsSessionKeeper(int argc, char** argv);

// The keeper process: reads session ids from stdin until end of file, then sweeps them. Exits 0,
// or 1 (with one line on stderr) when some process survived the sweep's limits.
int RunSessionKeeper();

}  // namespace ddprun::launcher::process
