// The real ProcessContext: spawns workers with the spawning policy (spawn.h), watches each
// through a pidfd on the event loop (no polling), routes their output, and tears the group
// down with signal -> shared deadline -> SIGKILL -> a bounded wait for workers that will not
// die. Watched streams pass through the launcher (a pseudo-terminal where the console is one),
// feeding the hang watchdog (worker_watchdog.h), the stderr tail and the stack dumps.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "common/asio.h"
#include "elastic/process_context.h"
#include "launcher/process/output_sink.h"
#include "launcher/process/warm_pool.h"

namespace ddprun::launcher::process {

class WorkerWatchdog;

// How the context signals processes: the real one calls kill(2)/killpg(2); a test's fake can
// drop signals to simulate a worker that will not die.
class ProcessSignaller {
 public:
  virtual ~ProcessSignaller() = default;
  virtual void Kill(pid_t pid, int signal) = 0;
  virtual void KillGroup(pid_t group, int signal) = 0;
};

ProcessSignaller& RealSignaller();

struct LocalProcessOptions {
  int session_keeper_fd = -1;  // SessionKeeper::WriteFd(), or -1 (no keeper)
  int job_cgroup_fd = -1;      // SessionKeeper::JobCgroupFd(), or -1 (no job cgroup)
  // How long a worker may stay alive after SIGKILL before the stop completes without it.
  std::chrono::milliseconds unkillable_wait{10'000};
  ProcessSignaller* signaller = &RealSignaller();  // not owned
  // --warm-restart: the pool started beside the first attempt whose workers have a WarmEntry;
  // later attempts fork those workers from it once it is ready. None: every worker is exec'd.
  std::optional<WarmPoolOptions> warm_pool{};
};

class LocalProcessContext : public elastic::ProcessContext {
 public:
  // `session_keeper_fd`: SessionKeeper::WriteFd(), or -1 (no keeper).
  explicit LocalProcessContext(asio::io_context& io, int session_keeper_fd = -1);
  LocalProcessContext(asio::io_context& io, LocalProcessOptions options);
  // SIGKILLs and reaps whatever is still running: no worker outlives the context (one that
  // would not die even then is left to the session keeper, not waited for).
  ~LocalProcessContext() override;

  std::vector<pid_t> Pids() const override;
  std::vector<std::string> StartKinds() const override;
  // When a worker last showed progress: bytes on a watched stream (stderr always, stdout with
  // --hang-timeout), a pulse, a file-timer request; none since the first start.
  std::optional<std::chrono::steady_clock::time_point> LastActivity() const;
  void Start(const elastic::AttemptLaunch& attempt, elastic::WorkerEvents events) override;
  void DumpStacks(std::chrono::milliseconds window, std::function<void()> done) override;
  void Signal(int local_rank, int signal) override;
  void Stop(int signal, std::chrono::milliseconds grace, std::function<void()> on_stopped) override;

 private:
  struct Worker;

  void StartWorker(const elastic::WorkerLaunch& launch);
  void WatchExit(const std::shared_ptr<Worker>& worker);
  void OnExit(const std::shared_ptr<Worker>& worker, int wait_status);
  void OnStderr(Worker& worker, std::string_view chunk);
  void ReportSpawnFailure(const std::shared_ptr<Worker>& worker, int code, const std::string& why);
  void KillAlive(int signal);
  void OnKillDeadline(int signal);
  void GiveUpOnUnkillable();
  void MaybeFinishDump();
  void MaybeFinishStop();
  void PrepareAttemptDir(const elastic::AttemptLaunch& attempt);
  SpawnResult Spawn(const elastic::WorkerLaunch& launch, int stdout_fd, int stderr_fd, bool& warm);
  void MaybeStartPool(const elastic::AttemptLaunch& attempt);
  void OnPoolExit(pid_t pid, int wait_status);
  void OnPoolGone();

  asio::io_context& io_;
  LocalProcessOptions options_;
  asio::steady_timer kill_timer_;
  asio::steady_timer unkillable_timer_;
  asio::steady_timer dump_timer_;
  std::vector<std::shared_ptr<Worker>> workers_;
  std::unique_ptr<WorkerWatchdog> watchdog_;
  std::unique_ptr<WarmPool> pool_;  // after the workers: destroyed first would orphan none
  std::optional<std::chrono::steady_clock::time_point> last_output_;  // of any attempt
  elastic::WorkerEvents events_;
  std::function<void()> on_stopped_;
  std::function<void()> on_dumped_;
  bool stopping_ = false;
  bool deadline_armed_ = false;
  std::vector<std::string> stdout_filters_;
  std::vector<std::string> stderr_filters_;
  std::shared_ptr<OutputFile> filtered_stdout_;
  std::shared_ptr<OutputFile> filtered_stderr_;
};

}  // namespace ddprun::launcher::process
