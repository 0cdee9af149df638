// The agent's multi-node policy with the in-memory store, a fake process context and a fake
// peer monitor: ranks from the round, failure records, remote failures, restarts, lost nodes.
#include <catch2/catch.hpp>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "elastic/agent.h"
#include "store/in_memory_store.h"
#include "tests/unit/elastic/fake_monitor.h"
#include "tests/unit/elastic/fake_process_context.h"

using namespace ddprun;
using namespace ddprun::elastic;
using ddprun::elastic::testing::FakeMonitor;
using ddprun::elastic::testing::FakeProcessContext;

namespace {

// Node 1 of 2; node 0 (3 workers on "node0host") is simulated through the shared store.
class TwoNodeRendezvous : public rendezvous::RendezvousHandler {
 public:
  rendezvous::RendezvousInfo NextRendezvous() override {
    rendezvous::RendezvousInfo info;
    info.store = &store;
    info.group_rank = 1;
    info.group_world_size = 2;
    info.round = round++;
    info.master_addr = "10.0.0.1";
    info.master_port = 29500;
    info.use_agent_store = true;
    info.open_round_store = [this] { return store.Connect(); };
    return info;
  }
  void SetClosed() override {}
  void Shutdown() override {}
  std::string RunId() const override { return "job"; }

  store::InMemoryStore store{std::chrono::milliseconds{2000}};
  int round = 0;
};

WorkerSpec Spec(int max_restarts) {
  WorkerSpec spec;
  spec.local_world_size = 2;
  spec.max_restarts = max_restarts;
  spec.command = {"train"};
  spec.hostname = "node1host";
  return spec;
}

struct Harness {
  explicit Harness(int max_restarts = 0) {
    rendezvous.store.SetString(
        "torchelastic/role_info/0",
        R"({"role":"default","rank":0,"local_world_size":3,"host":"node0host"})");
    AgentOptions options;
    options.shutdown_timeout = std::chrono::milliseconds{500};
    options.exit_barrier_timeout = std::chrono::milliseconds{2000};
    options.failure_barrier_timeout = std::chrono::milliseconds{2000};
    agent.emplace(Spec(max_restarts), options, rendezvous, processes,
                  AgentLinks{nullptr, &monitor});
    agent->Run([this](const AgentResult& done) {
      REQUIRE_FALSE(result.has_value());
      result = done;
    });
  }
  // Node 0 arrives at barrier `name` (so that this agent's barrier completes at once).
  void PeerAtBarrier(const std::string& name) { rendezvous.store.Add(name + "/num_members", 1); }

  TwoNodeRendezvous rendezvous;
  FakeProcessContext processes;
  FakeMonitor monitor;
  std::optional<Agent> agent;
  std::optional<AgentResult> result;
};

NodeFailure RemoteFailure() {
  NodeFailure record;
  record.node_rank = 0;
  record.host = "node0host";
  record.failure.global_rank = 2;
  record.failure.local_rank = 2;
  record.failure.pid = 4242;
  record.failure.status = ExitStatus::Exited(7);
  record.failure.time = std::chrono::system_clock::now() - std::chrono::seconds{1};
  record.failure.error_file = "<N/A>";
  record.failure.message = "boom";
  return record;
}

}  // namespace

TEST_CASE("multi-node: ranks come from every node's role info in the round",
          "[elastic][agent][multinode]") {
  Harness h;
  REQUIRE(h.processes.attempts.size() == 1);
  CHECK(h.processes.Env(0, "RANK") == "3");
  CHECK(h.processes.Env(1, "RANK") == "4");
  CHECK(h.processes.Env(1, "WORLD_SIZE") == "5");
  CHECK(h.processes.Env(1, "ROLE_RANK") == "4");
  CHECK(h.processes.Env(1, "ROLE_WORLD_SIZE") == "5");
  CHECK(h.processes.Env(1, "GROUP_RANK") == "1");
  CHECK(h.processes.Env(1, "GROUP_WORLD_SIZE") == "2");
  CHECK(h.processes.Env(1, "LOCAL_WORLD_SIZE") == "2");
  CHECK(h.processes.Env(1, "MASTER_ADDR") == "10.0.0.1");
  CHECK(h.processes.Env(1, "TORCHELASTIC_USE_AGENT_STORE") == "True");
  CHECK(h.rendezvous.store.Check({"torchelastic/role_info/1"}));
  CHECK(h.monitor.watching);
}

TEST_CASE("multi-node: a local failure is published to the other node's inbox",
          "[elastic][agent][multinode]") {
  Harness h;
  h.PeerAtBarrier("ddprun/failure_barrier");
  h.processes.Exit(1, ExitStatus::Exited(3));
  CHECK_FALSE(h.monitor.watching);
  const NodeFailure record = DecodeNodeFailure(h.rendezvous.store.GetString(InboxKey(0)));
  CHECK(record.node_rank == 1);
  CHECK(record.host == "node1host");
  CHECK(record.failure.global_rank == 4);
  CHECK(record.failure.status.code == 3);
  h.processes.Exit(0, ExitStatus::Signaled(SIGTERM));
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->state == AgentResult::State::kFailed);
  CHECK(h.result->ExitCode() == 3);
  CHECK(h.result->root_cause_node == 1);
  CHECK(h.result->note.empty());
}

TEST_CASE("multi-node: a remote failure stops the local workers and becomes the root cause",
          "[elastic][agent][multinode]") {
  Harness h;
  h.PeerAtBarrier("ddprun/failure_barrier");
  h.monitor.events.on_remote_failure(RemoteFailure());
  REQUIRE(h.processes.stop_signals == std::vector<int>{SIGTERM});
  CHECK_FALSE(h.monitor.watching);
  h.processes.Exit(0, ExitStatus::Signaled(SIGTERM));
  h.processes.Exit(1, ExitStatus::Signaled(SIGTERM));
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->state == AgentResult::State::kFailed);
  CHECK(h.result->ExitCode() == 7);
  CHECK(h.result->failures[RootCauseIndex(h.result->failures)].global_rank == 2);
  CHECK(h.result->root_cause_node == 0);
  CHECK(h.result->root_cause_host == "node0host");
  CHECK(h.result->note.find("node 0 (host node0host)") != std::string::npos);
}

TEST_CASE("multi-node: a peer's hang asks this node's workers for their stacks before the stop",
          "[elastic][agent][multinode][hang]") {
  Harness h;
  h.PeerAtBarrier("ddprun/failure_barrier");
  NodeFailure record = RemoteFailure();
  record.failure.hang = true;
  record.failure.message = "hang: rank 2 ...\nrank 2 stuck at train.py:42 in step";
  h.monitor.events.on_remote_failure(record);
  CHECK(h.processes.DumpPending());
  CHECK(h.processes.stop_signals.empty());
  h.processes.Exit(0, ExitStatus::Signaled(SIGABRT));
  h.processes.Exit(1, ExitStatus::Signaled(SIGABRT));
  h.processes.CompleteDump();
  REQUIRE(h.processes.stop_signals == std::vector<int>{SIGTERM});
  h.processes.CompleteStop();
  REQUIRE(h.result);
  const ProcessFailure& root = h.result->failures[RootCauseIndex(h.result->failures)];
  CHECK(root.message.find("rank 2 stuck at train.py:42") != std::string::npos);
  CHECK(h.result->root_cause_node == 0);
}

TEST_CASE("multi-node: with restarts left every node restarts together in the next round",
          "[elastic][agent][multinode]") {
  Harness h(1);
  h.monitor.events.on_remote_failure(RemoteFailure());
  h.processes.CompleteStop();
  CHECK_FALSE(h.result);
  REQUIRE(h.processes.attempts.size() == 2);
  CHECK(h.processes.Env(0, "TORCHELASTIC_RESTART_COUNT") == "1");
  CHECK(h.processes.Env(0, "RANK") == "3");
  CHECK(h.monitor.watched_rounds == std::vector<int>{0, 1});
  CHECK(h.monitor.watching);
}

TEST_CASE("multi-node: a lost node stops the workers and fails with exit code 1",
          "[elastic][agent][multinode]") {
  Harness h(3);  // restarts cannot bring a lost node back
  h.monitor.events.on_node_lost(0, "no heartbeat for 3 s");
  REQUIRE(h.processes.stop_signals == std::vector<int>{SIGTERM});
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->state == AgentResult::State::kFailed);
  CHECK(h.result->ExitCode() == 1);
  CHECK(h.result->root_cause_node == 0);
  CHECK(h.result->note.find("node 0 (host node0host) was lost: no heartbeat") != std::string::npos);
}

TEST_CASE("multi-node: success waits in the exit barrier for the other node",
          "[elastic][agent][multinode]") {
  Harness h;
  h.PeerAtBarrier("ddprun/exit_barrier");
  h.processes.Exit(0, ExitStatus::Exited(0));
  h.processes.Exit(1, ExitStatus::Exited(0));
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->state == AgentResult::State::kSucceeded);
  CHECK(h.rendezvous.store.Check({"ddprun/exit_barrier/last_member"}));
  CHECK_FALSE(h.monitor.watching);
}

TEST_CASE("multi-node: a signal tells the other node and counts this node out of the barrier",
          "[elastic][agent][multinode]") {
  Harness h;
  h.agent->HandleSignal(SIGTERM);
  const NodeFailure record = DecodeNodeFailure(h.rendezvous.store.GetString(InboxKey(0)));
  CHECK(record.failure.status.Signaled());
  CHECK(record.failure.message.find("SIGTERM") != std::string::npos);
  CHECK(h.rendezvous.store.Add("ddprun/failure_barrier/num_members", 0) == 1);
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->ExitCode() == 128 + SIGTERM);
}

TEST_CASE("node failure records round-trip through JSON", "[elastic][multinode]") {
  NodeFailure record = RemoteFailure();
  record.failure.status = ExitStatus::Signaled(SIGKILL);
  const NodeFailure back = DecodeNodeFailure(EncodeNodeFailure(record));
  CHECK(back.node_rank == 0);
  CHECK(back.host == "node0host");
  CHECK(back.failure.status.Signaled());
  CHECK(back.failure.status.code == SIGKILL);
  CHECK(back.failure.pid == 4242);
  CHECK(back.failure.message == "boom");
  CHECK_FALSE(back.failure.hang);
  CHECK_FALSE(back.failure.hang_before_progress);
  record.failure.hang = true;
  record.failure.hang_before_progress = true;
  record.failure.hangs_before_progress = 2;
  const NodeFailure hung = DecodeNodeFailure(EncodeNodeFailure(record));
  CHECK(hung.failure.hang);
  CHECK(hung.failure.hang_before_progress);
  CHECK(hung.failure.hangs_before_progress == 2);
  CHECK_THROWS_AS(DecodeNodeFailure("stop"), std::invalid_argument);
}

TEST_CASE("multi-node: a peer's count of hangs before progress stops this node with it",
          "[elastic][agent][multinode][hang]") {
  Harness h(5);  // restarts left; this node joined late, its own count is 0
  h.PeerAtBarrier("ddprun/failure_barrier");
  NodeFailure record = RemoteFailure();
  record.failure.hang = true;
  record.failure.hang_before_progress = true;
  record.failure.hangs_before_progress = 3;  // the job's third in a row
  h.monitor.events.on_remote_failure(record);
  h.processes.CompleteDump();
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.processes.attempts.size() == 1);
  CHECK(h.result->state == AgentResult::State::kFailed);
  CHECK(h.result->note.find("the job hung 3 attempts in a row before any rank made progress") !=
        std::string::npos);
  CHECK(h.result->note.find("the root cause is on node 0") != std::string::npos);
}

TEST_CASE("multi-node: a node lost after the exit barrier completed is no failure",
          "[elastic][agent][multinode]") {
  Harness h;
  h.PeerAtBarrier("ddprun/exit_barrier");
  h.processes.Exit(0, ExitStatus::Exited(0));
  h.processes.Exit(1, ExitStatus::Exited(0));
  h.monitor.events.on_node_lost(0, "lost the connection to its store");  // node 0 already left
  h.processes.CompleteStop();
  REQUIRE(h.result);
  CHECK(h.result->state == AgentResult::State::kSucceeded);
}

TEST_CASE("multi-node: a node lost before the exit barrier completed fails it",
          "[elastic][agent][multinode]") {
  Harness h;  // node 0 never arrives at the barrier
  h.processes.Exit(0, ExitStatus::Exited(0));
  h.processes.Exit(1, ExitStatus::Exited(0));
  h.monitor.events.on_node_lost(0, "no heartbeat for 3 s");
  h.processes.CompleteStop();  // the barrier, cancelled before it started, does not wait
  REQUIRE(h.result);
  CHECK(h.result->state == AgentResult::State::kFailed);
  CHECK(h.result->ExitCode() == 1);
}

namespace {

// Runs each job on a thread of its own; continuations wait in a queue that the test thread
// (the agent's "event loop") runs with RunNext.
class QueueRunner : public BlockingRunner {
 public:
  ~QueueRunner() override {
    for (auto& thread : threads_) thread.join();
  }
  void Run(Work work, Then then) override {
    threads_.emplace_back([this, work = std::move(work), then = std::move(then)] {
      std::exception_ptr error;
      try {
        work();
      } catch (...) {
        error = std::current_exception();
      }
      std::lock_guard lock(mutex_);
      ready_.push_back([then, error] { then(error); });
      changed_.notify_all();
    });
  }
  // Runs the next continuation; false when none came within `timeout`.
  bool RunNext(std::chrono::milliseconds timeout) {
    std::function<void()> next;
    {
      std::unique_lock lock(mutex_);
      if (!changed_.wait_for(lock, timeout, [this] { return !ready_.empty(); })) return false;
      next = std::move(ready_.front());
      ready_.pop_front();
    }
    next();
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> ready_;
  std::vector<std::thread> threads_;
};

}  // namespace

TEST_CASE("multi-node: a node lost while the exit barrier waits ends the wait at once",
          "[elastic][agent][multinode]") {
  TwoNodeRendezvous rendezvous;
  rendezvous.store.SetString("torchelastic/role_info/0",
                             R"({"role":"default","rank":0,"local_world_size":3,"host":"h0"})");
  FakeProcessContext processes;
  FakeMonitor monitor;
  QueueRunner runner;
  AgentOptions options;
  options.exit_barrier_timeout = std::chrono::milliseconds{60'000};  // never waited out
  Agent agent(Spec(0), options, rendezvous, processes, AgentLinks{&runner, &monitor});
  std::optional<AgentResult> result;
  agent.Run([&](const AgentResult& done) { result = done; });
  REQUIRE(runner.RunNext(std::chrono::milliseconds{10'000}));  // the round formed
  processes.Exit(0, ExitStatus::Exited(0));
  processes.Exit(1, ExitStatus::Exited(0));
  processes.CompleteStop();  // the barrier job starts on its thread and blocks: node 0 is away
  rendezvous.store.Connect()->Wait({"ddprun/exit_barrier/num_members"},
                                   std::chrono::milliseconds{10'000});
  monitor.events.on_node_lost(0, "no heartbeat for 3 s");
  // The cancel interrupts the barrier's own connection: its continuation arrives at once, not
  // after the 60 s barrier timeout (nor a 1 s polling slice).
  REQUIRE(runner.RunNext(std::chrono::milliseconds{900}));
  REQUIRE(result);
  CHECK(result->state == AgentResult::State::kFailed);
  CHECK(result->ExitCode() == 1);
}

namespace {

// Node 1 of 2 with a QueueRunner: the failure record's write completes when the test says.
struct QueuedHarness {
  QueuedHarness() {
    rendezvous.store.SetString("torchelastic/role_info/0",
                               R"({"role":"default","rank":0,"local_world_size":3,"host":"h0"})");
    agent.emplace(Spec(0), AgentOptions{}, rendezvous, processes, AgentLinks{&runner, &monitor});
    agent->Run([this](const AgentResult& done) {
      REQUIRE_FALSE(result.has_value());
      result = done;
    });
    REQUIRE(runner.RunNext(std::chrono::milliseconds{10'000}));  // the round formed
    REQUIRE(monitor.watching);
  }
  // The record of this node's SIGTERM reached node 0's inbox and its continuation ran.
  void RecordWritten() {
    REQUIRE(runner.RunNext(std::chrono::milliseconds{10'000}));
    const NodeFailure record = DecodeNodeFailure(rendezvous.store.GetString(InboxKey(0)));
    CHECK(record.failure.message.find("SIGTERM") != std::string::npos);
  }
  // Finished as stopped by SIGTERM, its watch (and heartbeats) over.
  void CheckStopped() const {
    REQUIRE(result);
    CHECK(result->ExitCode() == 128 + SIGTERM);
    CHECK_FALSE(monitor.watching);
  }
  // Still running: its watch beats on.
  void CheckNotFinished() const {
    CHECK_FALSE(result);
    CHECK(monitor.watching);
  }

  TwoNodeRendezvous rendezvous;
  FakeProcessContext processes;
  FakeMonitor monitor;
  QueueRunner runner;  // its threads end before the store they write to goes
  std::optional<Agent> agent;
  std::optional<AgentResult> result;
};

}  // namespace

// The watch beats for this node: a peer that saw the beats stop before the record came would
// report "node 1 was lost: no heartbeat" instead of the signal (issue 27, seen under TSan).
TEST_CASE("multi-node: a signalled agent beats until the other node has its record",
          "[elastic][agent][multinode]") {
  QueuedHarness h;
  h.agent->HandleSignal(SIGTERM);
  h.processes.CompleteStop();  // the workers are gone before the record is written
  h.CheckNotFinished();
  h.RecordWritten();
  h.CheckStopped();
}

TEST_CASE(
    "multi-node: a signalled agent whose record is out first finishes when its workers are gone",
    "[elastic][agent][multinode]") {
  QueuedHarness h;
  h.agent->HandleSignal(SIGTERM);
  h.RecordWritten();
  h.CheckNotFinished();
  h.processes.CompleteStop();
  h.CheckStopped();
}

TEST_CASE("multi-node: a second signal or a lost peer ends the wait for the record",
          "[elastic][agent][multinode]") {
  QueuedHarness h;
  h.agent->HandleSignal(SIGTERM);
  SECTION("a second signal") {
    h.agent->HandleSignal(SIGTERM);
    CHECK(h.processes.stop_signals.back() == SIGKILL);
  }
  SECTION("the store's host lost") {
    h.monitor.events.on_node_lost(0, "lost the connection to its store");
  }
  h.processes.CompleteStop();
  h.CheckStopped();
  h.RecordWritten();  // arrives late and changes nothing
  h.CheckStopped();
}
