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
  void Start(const AttemptLaunch& attempt, WorkerEvents events) override {
    attempts.push_back(attempt);
    on_exit_ = events.on_exit;
    events_ = std::move(events);
  }
  void DumpStacks(std::chrono::milliseconds window, std::function<void()> done) override {
    dump_windows.push_back(window);
    on_dumped_ = std::move(done);
  }
  void Signal(int local_rank, int signal) override { signals.emplace_back(local_rank, signal); }
  void CompleteDump() {
    REQUIRE(on_dumped_);
    std::exchange(on_dumped_, nullptr)();
  }
  bool DumpPending() const { return static_cast<bool>(on_dumped_); }
  void Hang(const HangReport& report) { events_.on_hang(report); }
  void Unkillable(const std::string& line) { events_.on_unkillable(line); }
  void Learned(const LearnedHangTimeout& learned) { events_.on_hang_timeout_learned(learned); }
  void Stop(int signal, std::chrono::milliseconds grace,
            std::function<void()> on_stopped) override {
    stop_signals.push_back(signal);
    last_grace = grace;
    on_stopped_ = std::move(on_stopped);
  }
  void Exit(int local_rank, ExitStatus status, std::string stack_dump = {},
            std::string stderr_tail = {}) {
    WorkerExit exit;
    exit.local_rank = local_rank;
    exit.pid = 100 + local_rank;
    exit.status = status;
    exit.time = std::chrono::system_clock::now();
    exit.stack_dump = std::move(stack_dump);
    exit.stderr_tail = std::move(stderr_tail);
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
  std::vector<std::chrono::milliseconds> dump_windows;
  std::vector<std::pair<int, int>> signals;  // local rank, signal

 private:
  ExitCallback on_exit_;
  WorkerEvents events_;
  std::function<void()> on_stopped_;
  std::function<void()> on_dumped_;
};

}  // namespace ddprun::elastic::testing
