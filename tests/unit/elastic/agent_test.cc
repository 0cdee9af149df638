#include "elastic/agent.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <optional>

#include "common/errors.h"
#include "tests/unit/elastic/fake_process_context.h"
#include "tests/unit/elastic/single_node_rendezvous.h"

using namespace ddprun;
using namespace ddprun::elastic;
using ddprun::elastic::testing::FakeProcessContext;

namespace {

// A rendezvous whose every join throws `error`.
template <typename Error>
class FailingRendezvous : public rendezvous::SingleNodeRendezvous {
 public:
  explicit FailingRendezvous(Error error)
      : SingleNodeRendezvous("job", {}), error_(std::move(error)) {}
  rendezvous::RendezvousInfo NextRendezvous() override { throw error_; }

 private:
  Error error_;
};

WorkerSpec Spec(int workers, int max_restarts) {
  WorkerSpec spec;
  spec.local_world_size = workers;
  spec.max_restarts = max_restarts;
  spec.command = {"python3", "-u", "train.py", "--rank=${local_rank}"};
  spec.run_log_dir = "/logs/job_x";
  return spec;
}

// What a one-worker agent ends with when its rendezvous throws `error`; no worker may start.
template <typename Error>
AgentResult RunWithFailingRendezvous(Error error) {
  FailingRendezvous<Error> rendezvous(std::move(error));
  FakeProcessContext processes;
  Agent agent(Spec(1, 0), {}, rendezvous, processes);
  std::optional<AgentResult> result;
  agent.Run([&](const AgentResult& done) { result = done; });
  REQUIRE(result);
  CHECK(processes.attempts.empty());
  return *result;
}

rendezvous::RendezvousInfo Master() {
  rendezvous::RendezvousInfo info;
  info.master_addr = "localhost";
  info.master_port = 1234;
  return info;
}

struct Harness {
  explicit Harness(int workers, int max_restarts = 0)
      : rendezvous("job", Master()),
        agent(Spec(workers, max_restarts), {std::chrono::milliseconds{500}}, rendezvous,
              processes) {
    agent.Run([this](const AgentResult& done) {
      REQUIRE_FALSE(result.has_value());
      result = done;
    });
  }
  rendezvous::SingleNodeRendezvous rendezvous;
  FakeProcessContext processes;
  Agent agent;
  std::optional<AgentResult> result;
};

}  // namespace

TEST_CASE("the agent starts one worker per local rank with the planned command",
          "[elastic][agent]") {
  Harness h(3);
  REQUIRE(h.processes.attempts.size() == 1);
  const auto& attempt = h.processes.attempts[0];
  CHECK(attempt.attempt_dir == "/logs/job_x/attempt_0");
  REQUIRE(attempt.workers.size() == 3);
  CHECK(attempt.workers[2].argv ==
        std::vector<std::string>{"python3", "-u", "train.py", "--rank=2"});
  CHECK(attempt.workers[2].env.at("RANK") == "2");
  CHECK(attempt.workers[2].env.at("WORLD_SIZE") == "3");
  CHECK(attempt.workers[2].env.at("MASTER_PORT") == "1234");
  CHECK(attempt.workers[2].error_file == "/logs/job_x/attempt_0/2/error.json");
  CHECK_FALSE(h.result);
}

TEST_CASE("all workers exiting 0 is success after the group is cleaned up", "[elastic][agent]") {
  Harness h(2);
  h.processes.Exit(0, ExitStatus::Exited(0));
  CHECK(h.processes.stop_signals.empty());
  h.processes.Exit(1, ExitStatus::Exited(0));
  CHECK_FALSE(h.result);
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->state == AgentResult::State::kSucceeded);
  CHECK(h.result->ExitCode() == 0);
}

TEST_CASE("a failing worker stops the others and its code becomes the exit code",
          "[elastic][agent]") {
  Harness h(3);
  h.processes.Exit(1, ExitStatus::Exited(3));
  REQUIRE(h.processes.stop_signals == std::vector<int>{SIGTERM});
  CHECK(h.processes.last_grace == std::chrono::milliseconds{500});
  h.processes.Exit(0, ExitStatus::Signaled(SIGTERM));
  h.processes.Exit(2, ExitStatus::Exited(0));
  CHECK_FALSE(h.result);
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->state == AgentResult::State::kFailed);
  REQUIRE(h.result->failures.size() == 2);
  CHECK(h.result->failures[RootCauseIndex(h.result->failures)].local_rank == 1);
  CHECK(h.result->ExitCode() == 3);
}

TEST_CASE("a worker killed by a signal gives 128+N", "[elastic][agent]") {
  Harness h(1);
  h.processes.Exit(0, ExitStatus::Signaled(SIGKILL));
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->ExitCode() == 137);
}

TEST_CASE("failures restart the group up to max_restarts with a growing restart count",
          "[elastic][agent]") {
  Harness h(2, 2);
  for (int attempt = 0; attempt < 3; ++attempt) {
    REQUIRE(h.processes.attempts.size() == static_cast<std::size_t>(attempt + 1));
    CHECK(h.processes.RestartCountOfLastAttempt() == attempt);
    CHECK(h.processes.attempts.back().attempt_dir ==
          "/logs/job_x/attempt_" + std::to_string(attempt));
    CHECK(h.processes.attempts.back().workers[0].env.at("TORCHELASTIC_MAX_RESTARTS") == "2");
    h.processes.Exit(0, ExitStatus::Exited(7));
    h.processes.Exit(1, ExitStatus::Signaled(SIGTERM));
    h.processes.CompleteStop();
  }
  CHECK(h.processes.attempts.size() == 3);
  REQUIRE(h.result);
  CHECK(h.result->ExitCode() == 7);
  CHECK(h.result->restart_count == 2);
}

TEST_CASE("a restarted group that succeeds ends in success", "[elastic][agent]") {
  Harness h(1, 1);
  h.processes.Exit(0, ExitStatus::Exited(1));
  h.processes.CompleteStop();
  REQUIRE(h.processes.attempts.size() == 2);
  h.processes.Exit(0, ExitStatus::Exited(0));
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->state == AgentResult::State::kSucceeded);
}

TEST_CASE("a handled signal is forwarded and ends the run with 128+N", "[elastic][agent]") {
  Harness h(2, 3);
  h.agent.HandleSignal(SIGTERM);
  REQUIRE(h.processes.stop_signals == std::vector<int>{SIGTERM});
  h.processes.Exit(0, ExitStatus::Signaled(SIGTERM));
  h.processes.Exit(1, ExitStatus::Exited(0));
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->state == AgentResult::State::kStopped);
  CHECK(h.result->ExitCode() == 143);
  CHECK(h.processes.attempts.size() == 1);  // no restart after a signal
}

TEST_CASE("a second signal kills the workers at once", "[elastic][agent]") {
  Harness h(1);
  h.agent.HandleSignal(SIGINT);
  h.agent.HandleSignal(SIGINT);
  CHECK(h.processes.stop_signals == std::vector<int>{SIGINT, SIGKILL});
  CHECK(h.processes.last_grace == std::chrono::milliseconds{0});
  h.processes.Exit(0, ExitStatus::Signaled(SIGKILL));
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->ExitCode() == 130);
}

TEST_CASE("a signal during failure teardown wins over restarts", "[elastic][agent]") {
  Harness h(2, 5);
  h.processes.Exit(0, ExitStatus::Exited(4));
  h.agent.HandleSignal(SIGHUP);
  h.processes.Exit(1, ExitStatus::Signaled(SIGHUP));
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->ExitCode() == 128 + SIGHUP);
  CHECK(h.processes.attempts.size() == 1);
}

TEST_CASE("a rendezvous error ends the run with one line and exit code 1", "[elastic][agent]") {
  const AgentResult result = RunWithFailingRendezvous(
      rendezvous::RendezvousTimeoutError("rendezvous timed out after 600 s"));
  CHECK(result.state == AgentResult::State::kError);
  CHECK(result.error == "rendezvous timed out after 600 s");
  CHECK(result.ExitCode() == 1);
}

TEST_CASE("bad input found by the rendezvous (a UsageError) exits 2, as on the command line",
          "[elastic][agent]") {
  const AgentResult result =
      RunWithFailingRendezvous(UsageError("bind 10.0.0.9:29400: Cannot assign requested address"));
  CHECK(result.state == AgentResult::State::kError);
  CHECK(result.ExitCode() == 2);
}
