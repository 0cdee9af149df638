// The real ProcessContext: spawns workers with the spawning policy (spawn.h), watches each
// through a pidfd on the event loop (no polling), routes their output, and tears the group
// down with signal -> shared deadline -> SIGKILL.
#pragma once
#include <memory>
#include <vector>

#include "common/asio.h"
#include "elastic/process_context.h"
#include "launcher/process/output_sink.h"

namespace ddprun::launcher::process {

class LocalProcessContext : public elastic::ProcessContext {
 public:
  // `session_keeper_fd`: SessionKeeper::WriteFd(), or -1 (no keeper).
  explicit LocalProcessContext(asio::io_context& io, int session_keeper_fd = -1);
  // SIGKILLs and reaps whatever is still running: no worker outlives the context.
  ~LocalProcessContext() override;

  void Start(const elastic::AttemptLaunch& attempt, elastic::WorkerEvents events) override;
  void DumpStacks(std::chrono::milliseconds window, std::function<void()> done) override;
  void Signal(int local_rank, int signal) override;
  void Stop(int signal, std::chrono::milliseconds grace,
            std::function<void()> on_stopped) override;

 private:
  struct Worker;

  void StartWorker(const elastic::WorkerLaunch& launch);
  void WatchExit(const std::shared_ptr<Worker>& worker);
  void OnExit(const std::shared_ptr<Worker>& worker, int wait_status);
  void ReportSpawnFailure(const std::shared_ptr<Worker>& worker, int code, const std::string& why);
  void KillAlive(int signal);
  void MaybeFinishStop();
  void PrepareAttemptDir(const elastic::AttemptLaunch& attempt);

  asio::io_context& io_;
  int session_keeper_fd_;
  asio::steady_timer kill_timer_;
  std::vector<std::shared_ptr<Worker>> workers_;
  ExitCallback on_exit_;
  std::function<void()> on_stopped_;
  bool stopping_ = false;
  bool deadline_armed_ = false;
  std::vector<std::string> stdout_filters_;
  std::vector<std::string> stderr_filters_;
  std::shared_ptr<OutputFile> filtered_stdout_;
  std::shared_ptr<OutputFile> filtered_stderr_;
};

}  // namespace ddprun::launcher::process
