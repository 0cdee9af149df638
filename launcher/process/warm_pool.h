// The warm pool (--warm-restart, docs/warm-restart.md): one preloaded Python interpreter per
// node, started through the spawning policy (spawn.h: its own session, the session keeper told,
// death with the launcher), that imports torch and --warm-preload's modules once and then forks
// one worker per request. Its program is warm_pool.py (compiled in); the two talk over an
// AF_UNIX SOCK_SEQPACKET socket, the pool's descriptor 3, one JSON message per datagram:
//   pool → launcher: {"ready": true, "preload_s", "preloaded", ...} or {"ready": false,
//     "reason"}; {"forked": pid, "id"} or {"fork_failed": reason, "id"} in reply to a fork;
//     {"exit": pid, "status": raw wait status} once it reaped a forked worker.
//   launcher → pool: {"fork": {"id", "argv", "env", "mode", "target", "cpus"}} with the worker's
//     stdin, stdout and stderr attached (SCM_RIGHTS); end of file: the pool exits.
// A forked worker is the pool's child, not the launcher's: its exit status comes from the pool
// (OnExit); the launcher still watches it through a pidfd and signals its process group.
// Once the pool cannot serve (not ready, dead, a reply late or malformed), it says why once and
// every later worker is exec'd: Failed() is final.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/asio.h"
#include "elastic/process_context.h"
#include "launcher/process/spawn.h"

namespace ddprun::launcher::process {

struct WarmPoolOptions {
  std::string python;                      // the workers' interpreter
  std::vector<std::string> preload;        // imported in this order (torch first)
  std::string path0;                       // sys.path[0] while preloading (the script's dir)
  std::map<std::string, std::string> env;  // the workers' base environment
  int session_keeper_fd = -1;              // SessionKeeper::WriteFd(), or -1
  int job_cgroup_fd = -1;                  // SessionKeeper::JobCgroupFd(): the pool joins it
  std::string job_cgroup_dir;              // its directory ("": none), for the workers' lines
  std::chrono::milliseconds reply_timeout{10'000};  // a fork request is answered within
  // On by default, not asked for: a job whose Python has no torch says why on the info level
  // only (any other reason still warns).
  bool quiet_without_torch = false;
};

class WarmPool {
 public:
  // A worker the pool forked exited with this raw wait status.
  using ExitHandler = std::function<void(pid_t pid, int wait_status)>;
  // The pool will never serve again (the reason is logged once as it happens).
  using GoneHandler = std::function<void()>;

  // Starts the pool now; it preloads while the caller goes on (Ready() turns true later, from
  // the event loop). A pool that cannot even be started is Failed() at once.
  WarmPool(asio::io_context& io, WarmPoolOptions options, ExitHandler on_exit, GoneHandler on_gone);
  // Closes the socket, SIGKILLs and reaps the pool (its forked workers die with it).
  ~WarmPool();
  WarmPool(const WarmPool&) = delete;
  WarmPool& operator=(const WarmPool&) = delete;

  bool Ready() const { return ready_ && !failed_; }
  bool Failed() const { return failed_; }
  const std::string& Failure() const { return failure_; }
  std::optional<double> PreloadSeconds() const { return preload_s_; }

  // Forks one worker (the pool must be Ready()): waits at most reply_timeout for the pool's
  // answer. On failure the pool is Failed() and pid < 0: exec the worker instead.
  SpawnResult Fork(const elastic::WarmEntry& entry, const std::map<std::string, std::string>& env,
                   const std::vector<int>& cpus, int stdout_fd, int stderr_fd);

 private:
  void WatchSocket();
  void WatchPool();
  // Reads what the pool sent; false at its end of file (or once Failed()).
  bool Drain();
  // One message from the pool; returns the fork reply it is, if it is one.
  std::optional<std::string> Dispatch(const std::string& datagram);
  // Logs `why` once (a warning; `quiet`: info) and tells on_gone.
  void Fail(const std::string& why, bool quiet = false);

  asio::io_context& io_;
  WarmPoolOptions options_;
  ExitHandler on_exit_;
  GoneHandler on_gone_;
  pid_t pid_ = -1;
  int socket_fd_ = -1;
  std::unique_ptr<asio::posix::stream_descriptor> socket_watch_;
  std::unique_ptr<asio::posix::stream_descriptor> pool_watch_;  // the pool's pidfd
  bool ready_ = false;
  bool failed_ = false;
  std::string failure_;
  std::optional<double> preload_s_;
  int next_id_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // guards posted handlers
};

}  // namespace ddprun::launcher::process
