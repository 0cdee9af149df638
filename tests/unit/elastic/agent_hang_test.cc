// The agent's part of hang handling: a hang (or an expired file timer) asks the workers for
// their stacks before anything is stopped, fails the group with a root cause that says where
// each rank was, spends a restart like any failure; a worker that will not die ends the node.
#include <catch2/catch.hpp>
#include <csignal>
#include <optional>

#include "elastic/agent.h"
#include "tests/unit/elastic/fake_process_context.h"
#include "tests/unit/elastic/single_node_rendezvous.h"

using namespace ddprun;
using namespace ddprun::elastic;
using Catch::Matchers::Contains;
using ddprun::elastic::testing::FakeProcessContext;

namespace {

WorkerSpec Spec(int max_restarts) {
  WorkerSpec spec;
  spec.local_world_size = 2;
  spec.max_restarts = max_restarts;
  spec.command = {"python3", "train.py"};
  spec.run_log_dir = "/logs/job_x";
  return spec;
}

rendezvous::RendezvousInfo Master() {
  rendezvous::RendezvousInfo info;
  info.master_addr = "localhost";
  info.master_port = 1234;
  return info;
}

// What faulthandler writes: rank 0 waits in all_reduce, rank 1 sleeps in its own code.
const char* kWaitingStack =
    "step 3\nFatal Python error: Aborted\n\n"
    "Current thread 0x00007f0000000002 (most recent call first):\n"
    "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1536 "
    "in all_reduce\n"
    "  File \"/work/train.py\", line 50 in step\n"
    "  File \"/work/train.py\", line 60 in <module>\n";
const char* kSleepingStack =
    "Fatal Python error: Aborted\n\n"
    "Current thread 0x00007f0000000001 (most recent call first):\n"
    "  File \"/work/train.py\", line 42 in step\n"
    "  File \"/work/train.py\", line 60 in <module>\n";

struct Harness {
  explicit Harness(int max_restarts)
      : rendezvous("job", Master()),
        agent(Spec(max_restarts), Options(), rendezvous, processes) {
    agent.Run([this](const AgentResult& done) {
      REQUIRE_FALSE(result.has_value());
      result = done;
    });
  }
  static AgentOptions Options() {
    AgentOptions options;
    options.shutdown_timeout = std::chrono::milliseconds{500};
    options.stack_dump_window = std::chrono::milliseconds{3000};
    return options;
  }
  HangReport Silence(int local_rank) const {
    HangReport report;
    report.local_rank = local_rank;
    report.pid = 100 + local_rank;
    report.time = std::chrono::system_clock::now() - std::chrono::seconds(1);
    report.cause = "no progress for 3.0 s";
    return report;
  }
  // Both workers die of the SIGABRT that asked for their stacks.
  void DumpBoth() {
    REQUIRE(processes.DumpPending());
    processes.Exit(0, ExitStatus::Signaled(SIGABRT), kWaitingStack);
    processes.Exit(1, ExitStatus::Signaled(SIGABRT), kSleepingStack);
    processes.CompleteDump();
  }
  rendezvous::SingleNodeRendezvous rendezvous;
  FakeProcessContext processes;
  Agent agent;
  std::optional<AgentResult> result;
};

}  // namespace

TEST_CASE("a hang asks for stacks first, then fails the group naming the stuck rank",
          "[elastic][agent][hang]") {
  Harness h(0);
  h.processes.Hang(h.Silence(0));  // rank 0 went silent first, but rank 1 is the odd one
  CHECK(h.processes.dump_windows == std::vector<std::chrono::milliseconds>{std::chrono::milliseconds{3000}});
  CHECK(h.processes.stop_signals.empty());  // nothing is stopped before the stacks are in
  h.DumpBoth();
  REQUIRE(h.processes.stop_signals == std::vector<int>{SIGTERM});
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->state == AgentResult::State::kFailed);
  const ProcessFailure& root = h.result->failures[RootCauseIndex(h.result->failures)];
  CHECK(root.hang);
  CHECK(root.global_rank == 1);
  CHECK_THAT(root.message, Contains("hang: rank 0 (local rank 0, pid 100): no progress"));
  CHECK_THAT(root.message, Contains("rank 1 stuck at train.py:42"));
  CHECK_THAT(root.message, Contains("all_reduce at train.py:50"));
  CHECK(h.result->ExitCode() == 128 + SIGABRT);
}

TEST_CASE("a hang spends a restart like any failure", "[elastic][agent][hang]") {
  Harness h(1);
  h.processes.Hang(h.Silence(1));
  h.DumpBoth();
  h.processes.CompleteStop();
  REQUIRE_FALSE(h.result);
  REQUIRE(h.processes.attempts.size() == 2);
  CHECK(h.processes.RestartCountOfLastAttempt() == 1);
  // The new attempt is watched afresh: a second hang is acted on again.
  h.processes.Hang(h.Silence(0));
  CHECK(h.processes.dump_windows.size() == 2);
}

TEST_CASE("an expired file timer sends the requested signal after the stacks",
          "[elastic][agent][hang]") {
  Harness h(0);
  HangReport report = h.Silence(1);
  report.kind = HangReport::Kind::kTimerExpired;
  report.scope = "train_step";
  report.signal = SIGKILL;
  report.cause = "file timer expired: scope \"train_step\"";
  h.processes.Hang(report);
  CHECK(h.processes.signals.empty());
  h.processes.Exit(0, ExitStatus::Signaled(SIGABRT), kWaitingStack);
  h.processes.CompleteDump();  // rank 1 did not answer (not Python): it gets the timer's signal
  CHECK(h.processes.signals == std::vector<std::pair<int, int>>{{1, SIGKILL}});
  h.processes.Exit(1, ExitStatus::Signaled(SIGKILL));
  h.processes.CompleteStop();
  REQUIRE(h.result);
  const ProcessFailure& root = h.result->failures[RootCauseIndex(h.result->failures)];
  CHECK_THAT(root.message, Contains("scope \"train_step\""));
  CHECK_THAT(root.message, Contains("rank 1: no Python stack"));
}

TEST_CASE("a hang reported while the group already stops is ignored", "[elastic][agent][hang]") {
  Harness h(0);
  h.processes.Exit(0, ExitStatus::Exited(3));
  h.processes.Hang(h.Silence(1));
  CHECK(h.processes.dump_windows.empty());
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->ExitCode() == 3);
}

TEST_CASE("a signal during the stack dump stops the agent, and the late dump changes nothing",
          "[elastic][agent][hang]") {
  Harness h(1);
  h.processes.Hang(h.Silence(1));
  h.agent.HandleSignal(SIGTERM);
  REQUIRE(h.processes.stop_signals == std::vector<int>{SIGTERM});
  h.processes.CompleteDump();
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->state == AgentResult::State::kStopped);
  CHECK(h.processes.attempts.size() == 1);
}

TEST_CASE("a worker that will not die ends the node instead of a restart",
          "[elastic][agent][hang]") {
  Harness h(3);
  h.processes.Exit(0, ExitStatus::Exited(1));
  h.processes.Unkillable("worker pid 101 (local rank 1) is still alive 10 s after SIGKILL, in "
                         "state D (uninterruptible sleep)");
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.processes.attempts.size() == 1);  // restarts were left, none was started
  CHECK(h.result->state == AgentResult::State::kFailed);
  CHECK_THAT(h.result->note, Contains("state D"));
  CHECK(h.result->ExitCode() == 1);
}
