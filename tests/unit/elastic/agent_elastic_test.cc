// The agent's elastic policy with a scripted elastic rendezvous, a fake process context, a fake
// monitor and an in-memory event sink: membership changes spend no restart, failures spend the
// job-wide budget, MIN not reached ends the job, every transition is an event.
#include <catch2/catch.hpp>
#include <csignal>
#include <deque>
#include <optional>

#include "elastic/agent.h"
#include "store/in_memory_store.h"
#include "tests/unit/elastic/fake_monitor.h"
#include "tests/unit/elastic/fake_process_context.h"
#include "tests/unit/elastic/recording_sink.h"

using namespace ddprun;
using namespace ddprun::elastic;
using ddprun::elastic::testing::FakeMonitor;
using ddprun::elastic::testing::FakeProcessContext;
using ddprun::elastic::testing::RecordingSink;

namespace {

// One round per NextRendezvous from a script: each entry is (group rank, nodes, restart count)
// or an error to throw. Rounds are this node's view; the store holds the round's agent keys.
class ScriptedElasticRendezvous : public rendezvous::RendezvousHandler {
 public:
  struct Round {
    int group_rank = 0;
    int nodes = 1;
    int restart_count = 0;
    std::string error;  // non-empty: NextRendezvous throws RendezvousTimeoutError(error)
  };

  rendezvous::RendezvousInfo NextRendezvous() override {
    REQUIRE_FALSE(script.empty());
    const Round next = script.front();
    script.pop_front();
    if (!next.error.empty()) throw rendezvous::RendezvousTimeoutError(next.error);
    rendezvous::RendezvousInfo info;
    info.store = &store;
    info.group_rank = next.group_rank;
    info.group_world_size = next.nodes;
    info.round = round++;
    info.master_addr = "node" + std::to_string(round) + "host";
    info.master_port = 40000 + info.round;
    info.use_agent_store = true;
    info.base_global_rank = next.group_rank * 2;
    info.global_world_size = next.nodes * 2;
    info.restart_count = next.restart_count;
    return info;
  }
  void SetClosed() override {}
  void Shutdown() override {}
  std::string RunId() const override { return "job"; }
  bool Elastic() const override { return true; }
  void AnnounceRoundEnd(const rendezvous::RoundEnd& end) override { announced.push_back(end); }

  std::deque<Round> script;
  std::vector<rendezvous::RoundEnd> announced;
  store::InMemoryStore store{std::chrono::milliseconds{2000}};
  int round = 0;
};

ScriptedElasticRendezvous::Round R(int group_rank, int nodes, int restart_count,
                                   std::string error = "") {
  return {group_rank, nodes, restart_count, std::move(error)};
}

struct Harness {
  Harness(std::deque<ScriptedElasticRendezvous::Round> script, int max_restarts) {
    rendezvous.script = std::move(script);
    WorkerSpec spec;
    spec.local_world_size = 2;
    spec.max_restarts = max_restarts;
    spec.command = {"train"};
    spec.hostname = "me";
    AgentOptions options;
    options.shutdown_timeout = std::chrono::milliseconds{500};
    options.exit_barrier_timeout = std::chrono::milliseconds{2000};
    options.failure_barrier_timeout = std::chrono::milliseconds{2000};
    agent.emplace(spec, options, rendezvous, processes, AgentLinks{nullptr, &monitor, &sink});
    agent->Run([this](const AgentResult& done) {
      REQUIRE_FALSE(result.has_value());
      result = done;
    });
  }
  // The other members arrive at barrier `name` (so that this agent's completes at once).
  void PeersAtBarrier(const std::string& name, int peers) {
    rendezvous.store.Add(name + "/num_members", peers);
  }
  void FailWorker(int code) { processes.Exit(0, ExitStatus::Exited(code)); }

  ScriptedElasticRendezvous rendezvous;
  FakeProcessContext processes;
  FakeMonitor monitor;
  RecordingSink sink;
  std::optional<Agent> agent;
  std::optional<AgentResult> result;
};

NodeFailure RemoteFailure(int node) {
  NodeFailure record;
  record.node_rank = node;
  record.host = "peer";
  record.failure.global_rank = node * 2;
  record.failure.status = ExitStatus::Exited(7);
  record.failure.time = std::chrono::system_clock::now();
  record.failure.error_file = "<N/A>";
  record.failure.message = "boom";
  return record;
}

}  // namespace

TEST_CASE("elastic: ranks, world size and restart count come from the round",
          "[elastic][agent][elastic_agent]") {
  Harness h({R(1, 3, 0)}, 3);
  REQUIRE(h.processes.attempts.size() == 1);
  CHECK(h.processes.Env(0, "RANK") == "2");
  CHECK(h.processes.Env(1, "RANK") == "3");
  CHECK(h.processes.Env(1, "WORLD_SIZE") == "6");
  CHECK(h.processes.Env(1, "GROUP_RANK") == "1");
  CHECK(h.processes.Env(1, "GROUP_WORLD_SIZE") == "3");
  CHECK(h.processes.Env(1, "MASTER_ADDR") == "node1host");
  CHECK(h.processes.Env(1, "MASTER_PORT") == "40000");
  CHECK(h.monitor.watching);
  CHECK(h.sink.names ==
        std::vector<std::string>{"rendezvous_started", "round_formed", "workers_started"});
  CHECK(h.sink.all[1]["world_size"] == 6);
  CHECK(h.sink.all[1]["round"] == 0);
}

TEST_CASE("elastic: a job shrunk to one node still watches for newcomers",
          "[elastic][agent][elastic_agent]") {
  Harness h({R(0, 1, 0), R(0, 2, 0)}, 0);
  CHECK(h.monitor.watching);  // keyed on the job's mode, not the round's size
  h.monitor.events.on_membership_change("node host9 is waiting to join");
  CHECK(h.processes.stop_signals == std::vector<int>{SIGTERM});
  h.processes.CompleteStop();
  REQUIRE(h.processes.attempts.size() == 2);
  CHECK(h.processes.Env(0, "GROUP_WORLD_SIZE") == "2");
  CHECK(h.processes.RestartCountOfLastAttempt() == 0);
  CHECK_FALSE(h.result.has_value());
  CHECK(h.sink.Count("membership_changed") == 1);
}

TEST_CASE("elastic: a lost node restarts the group at the smaller size without a restart",
          "[elastic][agent][elastic_agent]") {
  Harness h({R(0, 3, 0), R(0, 2, 0)}, 0);  // max_restarts 0: a spent restart would end the job
  h.monitor.events.on_node_lost(2, "host host2, heartbeats stopped 3.0 s ago");
  CHECK(h.monitor.watching);  // until the next round's watch replaces it
  CHECK(h.processes.stop_signals == std::vector<int>{SIGTERM});
  h.processes.CompleteStop();
  REQUIRE(h.processes.attempts.size() == 2);
  CHECK(h.processes.Env(0, "WORLD_SIZE") == "4");
  CHECK(h.processes.RestartCountOfLastAttempt() == 0);
  CHECK(h.monitor.watched_rounds == std::vector<int>{0, 1});
  CHECK_FALSE(h.result.has_value());
  CHECK(h.rendezvous.announced.empty());
  CHECK(h.sink.Count("node_lost") == 1);
  CHECK(h.sink.all[h.sink.names.size() - 4]["cause"] == "membership");  // restart event
}

TEST_CASE("elastic: a lost store stops the workers and is told at the next arrival, no restart",
          "[elastic][agent][elastic_agent]") {
  Harness h({R(1, 3, 0), R(1, 3, 0)}, 0);
  h.monitor.events.on_node_lost(-1, "lost the rendezvous store (no reply from h0:29500)");
  CHECK(h.processes.stop_signals == std::vector<int>{SIGTERM});
  REQUIRE(h.rendezvous.announced.size() == 1);  // before the next arrival (the same runner)
  CHECK(h.rendezvous.announced[0].kind == rendezvous::RoundEnd::Kind::kStoreLost);
  CHECK_THAT(h.rendezvous.announced[0].record, Catch::Contains("no reply from h0:29500"));
  h.processes.CompleteStop();
  REQUIRE(h.processes.attempts.size() == 2);
  CHECK(h.processes.RestartCountOfLastAttempt() == 0);
  CHECK(h.sink.Count("store_unreachable") == 1);
}

TEST_CASE("elastic: a worker failure is announced and spends one job-wide restart",
          "[elastic][agent][elastic_agent]") {
  Harness h({R(1, 2, 0), R(1, 2, 1)}, 1);
  h.FailWorker(3);
  REQUIRE(h.rendezvous.announced.size() == 1);
  CHECK(h.rendezvous.announced[0].kind == rendezvous::RoundEnd::Kind::kFailure);
  const NodeFailure record = DecodeNodeFailure(h.rendezvous.announced[0].record);
  CHECK(record.node_rank == 1);
  CHECK(record.failure.status.TorchrunCode() == 3);
  h.processes.CompleteStop();
  REQUIRE(h.processes.attempts.size() == 2);
  CHECK(h.processes.RestartCountOfLastAttempt() == 1);  // from the round, not counted here
  CHECK(h.agent->RestartCount() == 1);
}

TEST_CASE("elastic: the restart budget exhausted ends the job on every node",
          "[elastic][agent][elastic_agent]") {
  // Every member rejoins after a failure; the round's job-wide restart count (2 > 1) says the
  // budget is spent, so each ends with the root cause it knows.
  SECTION("local failure") {
    Harness h({R(0, 2, 1), R(0, 2, 2)}, 1);
    h.PeersAtBarrier("ddprun/failure_barrier", 1);
    h.FailWorker(5);
    h.processes.CompleteStop();
    REQUIRE(h.result.has_value());
    CHECK(h.result->state == AgentResult::State::kFailed);
    CHECK(h.result->ExitCode() == 5);
    CHECK(h.processes.attempts.size() == 1);
    CHECK(h.rendezvous.announced.size() == 1);
  }
  SECTION("remote failure") {
    Harness h({R(0, 2, 1), R(0, 2, 2)}, 1);
    h.PeersAtBarrier("ddprun/failure_barrier", 1);
    h.monitor.events.on_remote_failure(RemoteFailure(1));
    h.processes.CompleteStop();
    REQUIRE(h.result.has_value());
    CHECK(h.result->ExitCode() == 7);
    CHECK(h.result->root_cause_node == 1);
    CHECK(h.result->root_cause_host == "peer");
    CHECK(h.sink.names.back() == "finished");
    CHECK(h.sink.all.back()["exit_code"] == 7);
  }
  SECTION("a failure the round does not count (a node was lost) keeps the job going") {
    Harness h({R(0, 3, 1), R(0, 2, 1)}, 1);
    h.FailWorker(1);  // collateral: its peer's node died
    h.processes.CompleteStop();
    CHECK_FALSE(h.result.has_value());
    REQUIRE(h.processes.attempts.size() == 2);
    CHECK(h.processes.RestartCountOfLastAttempt() == 1);
  }
}

TEST_CASE("elastic: a node arriving during a restart joins the next round",
          "[elastic][agent][elastic_agent]") {
  Harness h({R(0, 2, 0), R(0, 3, 1)}, 2);
  h.FailWorker(1);
  h.monitor.events.on_membership_change("node host9 is waiting to join");  // ignored: stopping
  CHECK(h.processes.stop_signals == std::vector<int>{SIGTERM});
  h.processes.CompleteStop();
  REQUIRE(h.processes.attempts.size() == 2);
  CHECK(h.processes.Env(0, "GROUP_WORLD_SIZE") == "3");
  CHECK(h.processes.RestartCountOfLastAttempt() == 1);
  CHECK(h.sink.Count("membership_changed") == 0);
}

TEST_CASE("elastic: MIN not reached ends the job with the rendezvous' reason",
          "[elastic][agent][elastic_agent]") {
  Harness h({R(0, 3, 0), R(0, 0, 0, "only 1 of the minimum 2 nodes joined round 1")}, 3);
  h.monitor.events.on_node_lost(1, "host b, heartbeats stopped");
  h.processes.CompleteStop();
  REQUIRE(h.result.has_value());
  CHECK(h.result->state == AgentResult::State::kError);
  CHECK(h.result->error == "only 1 of the minimum 2 nodes joined round 1");
  CHECK(h.result->ExitCode() == 1);
}

TEST_CASE("elastic: a signal tells the others this node leaves, then stops",
          "[elastic][agent][elastic_agent]") {
  Harness h({R(0, 2, 0)}, 3);
  h.agent->HandleSignal(SIGTERM);
  REQUIRE(h.rendezvous.announced.size() == 1);
  CHECK(h.rendezvous.announced[0].kind == rendezvous::RoundEnd::Kind::kLeaving);
  CHECK_THAT(h.rendezvous.announced[0].record, Catch::Contains("received SIGTERM"));
  h.processes.CompleteStop();
  REQUIRE(h.result.has_value());
  CHECK(h.result->state == AgentResult::State::kStopped);
  CHECK(h.result->ExitCode() == 128 + SIGTERM);
}

TEST_CASE("elastic: a node lost during the exit barrier does not fail this node",
          "[elastic][agent][elastic_agent]") {
  Harness h({R(0, 2, 0)}, 0);
  h.processes.Exit(0, ExitStatus::Exited(0));
  h.processes.Exit(1, ExitStatus::Exited(0));
  // The barrier runs inline here: with no peer it would wait out its 2 s; the peer arrives.
  h.PeersAtBarrier("ddprun/exit_barrier", 1);
  h.processes.CompleteStop();
  REQUIRE(h.result.has_value());
  CHECK(h.result->state == AgentResult::State::kSucceeded);
  h.monitor.events.on_node_lost(1, "late");  // after the end: ignored
  CHECK(h.result->state == AgentResult::State::kSucceeded);
}
