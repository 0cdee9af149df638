// A ProcessContext for agent tests: records what the agent starts and stops; the test decides
// when workers exit (pid = 100 + local rank) and when a stop completes.
#pragma once
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "elastic/process_context.h"

namespace ddprun::elastic::testing {

class FakeProcessContext : public ProcessContext {
 public:
  void Start(const AttemptLaunch& attempt, ExitCallback on_exit) override {
    attempts.push_back(attempt);
    on_exit_ = std::move(on_exit);
  }
  void Stop(int signal, std::chrono::milliseconds grace, std::function<void()> on_stopped) override {
    stop_signals.push_back(signal);
    last_grace = grace;
    on_stopped_ = std::move(on_stopped);
  }
  void Exit(int local_rank, ExitStatus status) {
    WorkerExit exit;
    exit.local_rank = local_rank;
    exit.pid = 100 + local_rank;
    exit.status = status;
    exit.time = std::chrono::system_clock::now();
    on_exit_(exit);
  }
  void CompleteStop() {
    REQUIRE(on_stopped_);
    std::exchange(on_stopped_, nullptr)();
  }
  // A variable of a worker of the last attempt.
  std::string Env(int local_rank, const std::string& name) const {
    return attempts.back().workers.at(local_rank).env.at(name);
  }
  int RestartCountOfLastAttempt() const { return std::stoi(Env(0, "TORCHELASTIC_RESTART_COUNT")); }

  std::vector<AttemptLaunch> attempts;
  std::vector<int> stop_signals;
  std::chrono::milliseconds last_grace{-1};

 private:
  ExitCallback on_exit_;
  std::function<void()> on_stopped_;
};

}  // namespace ddprun::elastic::testing
