// The agent's part of hang handling: a hang (or an expired file timer) asks the workers for
// their stacks before anything is stopped, fails the group with a root cause that says where
// each rank was, spends a restart like any failure; a worker that will not die ends the node.
#include <catch2/catch.hpp>
#include <csignal>
#include <optional>

#include "elastic/agent.h"
#include "elastic/learned_hang_timeout.h"
#include "store/in_memory_store.h"
#include "tests/unit/elastic/fake_process_context.h"
#include "tests/unit/elastic/recording_sink.h"
#include "tests/unit/elastic/single_node_rendezvous.h"

using namespace ddprun;
using namespace ddprun::elastic;
using Catch::Matchers::Contains;
using ddprun::elastic::testing::FakeProcessContext;
using ddprun::elastic::testing::RecordingSink;
using std::chrono::milliseconds;

namespace {

WorkerSpec Spec(int max_restarts, int max_no_progress_hangs = 3) {
  WorkerSpec spec;
  spec.max_no_progress_hangs = max_no_progress_hangs;
  spec.hang.hang = milliseconds{3000};
  spec.local_world_size = 2;
  spec.max_restarts = max_restarts;
  spec.command = {"python3", "train.py"};
  spec.run_log_dir = "/logs/job_x";
  return spec;
}

rendezvous::RendezvousInfo Master(store::Store* job_store = nullptr) {
  rendezvous::RendezvousInfo info;
  info.job_store = job_store;
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
  explicit Harness(int max_restarts, WorkerSpec spec = {}, store::Store* job_store = nullptr)
      : rendezvous("job", Master(job_store)),
        agent(spec.command.empty() ? Spec(max_restarts) : spec, Options(), rendezvous, processes,
              {nullptr, nullptr, &events}) {
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
  // A hang before any progress past start-up, then the stack dump and the stop it causes.
  void HangInStartup() {
    HangReport report = Silence(1);
    report.startup = true;
    report.cause = "no first progress within the start-up timeout of 2 s";
    HangAndStop(report);
  }
  void HangAndStop(const HangReport& report) {
    processes.Hang(report);
    DumpBoth();
    processes.CompleteStop();
  }
  RecordingSink events;
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
  CHECK(h.processes.dump_windows ==
        std::vector<std::chrono::milliseconds>{std::chrono::milliseconds{3000}});
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
  h.processes.Unkillable(
      "worker pid 101 (local rank 1) is still alive 10 s after SIGKILL, in "
      "state D (uninterruptible sleep)");
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.processes.attempts.size() == 1);  // restarts were left, none was started
  CHECK(h.result->state == AgentResult::State::kFailed);
  CHECK_THAT(h.result->note, Contains("state D"));
  CHECK(h.result->ExitCode() == 1);
}

TEST_CASE("hangs before any progress, attempts in a row, stop the job with restarts unspent",
          "[elastic][agent][hang]") {
  Harness h(5);
  h.HangInStartup();
  h.HangInStartup();
  REQUIRE_FALSE(h.result);
  CHECK(h.events.Last("hang").value("hangs_before_progress", 0) == 2);
  CHECK(h.events.Last("hang").value("startup", false));
  h.HangInStartup();
  REQUIRE(h.result);
  CHECK(h.processes.attempts.size() == 3);
  CHECK(h.result->state == AgentResult::State::kFailed);
  CHECK(h.result->restart_count == 2);
  CHECK_THAT(h.result->note, Contains("the job hung 3 attempts in a row before any rank made "
                                      "progress past start-up (--max-no-progress-hangs=3)"));
  CHECK_THAT(h.result->note, Contains("3 of 5 restarts left unspent"));
  CHECK(h.result->ExitCode() == 128 + SIGABRT);  // the hung rank's, as for any hang
  CHECK(h.events.Count("no_progress_stop") == 1);
}

TEST_CASE("a hang after progress, or a crash, starts the count of hangs before progress again",
          "[elastic][agent][hang]") {
  Harness h(6);
  h.HangInStartup();
  HangReport late = h.Silence(1);
  late.progressed = true;  // the group trained a while, then hung
  h.HangAndStop(late);
  CHECK(h.events.Last("hang").value("hangs_before_progress", -1) == 0);
  h.HangInStartup();
  h.HangInStartup();
  h.processes.Exit(0, ExitStatus::Exited(1));  // a crash: the job got somewhere, or failed
  h.processes.CompleteStop();
  h.HangInStartup();
  REQUIRE_FALSE(h.result);
  CHECK(h.processes.attempts.size() == 7);
  h.HangInStartup();
  REQUIRE(h.result);  // the sixth restart's attempt was the last one allowed anyway
  CHECK(h.result->note.empty());
}

TEST_CASE("max-no-progress-hangs 0: restarts after hangs before progress until none is left",
          "[elastic][agent][hang]") {
  Harness h(3, Spec(3, /*max_no_progress_hangs=*/0));
  for (int attempt = 0; attempt < 4; ++attempt) h.HangInStartup();
  REQUIRE(h.result);
  CHECK(h.processes.attempts.size() == 4);
  CHECK(h.result->note.empty());
  CHECK(h.events.Count("no_progress_stop") == 0);
}

TEST_CASE("a learned hang timeout is logged, kept for the next attempt and the job's store",
          "[elastic][agent][hang]") {
  store::InMemoryStore job_store;
  WorkerSpec spec = Spec(2);
  spec.hang.hang = milliseconds{0};
  spec.hang.learn = true;
  Harness h(2, spec, &job_store);
  CHECK_FALSE(h.processes.attempts.back().learned_hang_timeout);
  CHECK(h.events.Last("workers_started").value("hang_timeout_learned", false));
  CHECK(h.events.Last("workers_started").at("hang_timeout_s").is_null());
  h.processes.Learned({milliseconds{2500}, milliseconds{500}});
  CHECK(h.events.Count("hang_timeout_learned") == 1);
  CHECK(h.events.Last("hang_timeout_learned").value("timeout_s", 0.0) == 2.5);
  CHECK(h.events.Last("hang_timeout_learned").value("longest_interval_s", 0.0) == 0.5);
  CHECK(ShareLearnedHangTimeout(job_store, std::nullopt) == milliseconds{2500});
  h.processes.Learned({milliseconds{2000}, milliseconds{400}});  // lower: not news
  CHECK(h.events.Count("hang_timeout_learned") == 1);
  job_store.SetString(kLearnedHangTimeoutKey, "4000");  // another node learned more
  h.processes.Exit(0, ExitStatus::Exited(1));
  h.processes.CompleteStop();
  REQUIRE(h.processes.attempts.size() == 2);
  CHECK(h.processes.attempts.back().learned_hang_timeout == milliseconds{4000});
  CHECK(h.events.Last("workers_started").value("hang_timeout_s", 0.0) == 4.0);
}

TEST_CASE("the job's learned hang timeout is the largest, raised by compare-and-set",
          "[elastic][hang]") {
  store::InMemoryStore store;
  CHECK_FALSE(ShareLearnedHangTimeout(store, std::nullopt));
  CHECK(ShareLearnedHangTimeout(store, milliseconds{3000}) == milliseconds{3000});
  CHECK(ShareLearnedHangTimeout(store, milliseconds{2000}) == milliseconds{3000});
  CHECK(ShareLearnedHangTimeout(store, std::nullopt) == milliseconds{3000});
  CHECK(ShareLearnedHangTimeout(store, milliseconds{5000}) == milliseconds{5000});
  CHECK(store.GetString(kLearnedHangTimeoutKey) == "5000");
  store.SetString(kLearnedHangTimeoutKey, "garbage");  // replaced, not trusted
  CHECK(ShareLearnedHangTimeout(store, milliseconds{1000}) == milliseconds{1000});
  CHECK(store.GetString(kLearnedHangTimeoutKey) == "1000");
}
