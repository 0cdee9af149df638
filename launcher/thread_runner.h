// The launcher's BlockingRunner: one thread runs the jobs in order; each job's continuation is
// posted back to the agent's io_context (which is kept from running out of work meanwhile).
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "common/asio.h"
#include "elastic/blocking_runner.h"

namespace ddprun::launcher {

class ThreadRunner : public elastic::BlockingRunner {
 public:
  explicit ThreadRunner(asio::io_context& io);
  // Runs what is queued (jobs must end by themselves: deadlines or cancel flags), then joins.
  // Continuations posted after io.run() has returned never run.
  ~ThreadRunner() override;
  ThreadRunner(const ThreadRunner&) = delete;
  ThreadRunner& operator=(const ThreadRunner&) = delete;

  void Run(Work work, Then then) override;

 private:
  using Guard = asio::executor_work_guard<asio::io_context::executor_type>;
  struct Job {
    Work work;
    Then then;
    Guard guard;
  };
  void Loop();

  asio::io_context& io_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ddprun::launcher
