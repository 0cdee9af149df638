#include "elastic/torchelastic_events.h"

#include <catch2/catch.hpp>

#include "tests/unit/common/fake_clock.h"

using namespace ddprun::elastic;
using nlohmann::json;

namespace {

struct Told {
  ddprun::testing::FakeClock clock;
  std::vector<json> lines;
  std::vector<std::string> raw;
  TorchelasticEvents events{{"job7", "c10d", "/usr/bin/python3"},
                            [this](const std::string& line) {
                              raw.push_back(line);
                              lines.push_back(json::parse(line));
                            },
                            clock};

  void Record(const std::string& event, json fields) {
    fields["role"] = "trainer";
    fields["host"] = "node-a";
    fields["restart_count"] = 1;
    if (event != "rendezvous_started") fields["group_rank"] = 1;
    events.Record(event, fields);
  }

  // A round of 2 nodes, world size 4, this node's ranks 2 and 3 (pids 41, 42).
  void StartRound() {
    Record("rendezvous_started", {});
    clock.Advance(std::chrono::milliseconds{250});
    Record("round_formed", {{"group_world_size", 2}, {"world_size", 4}, {"base_global_rank", 2}});
    Record("workers_started", {{"ranks", {2, 3}}, {"pids", {41, 42}}});
  }

  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& line : lines) names.push_back(line["name"].get<std::string>());
    return names;
  }
};

json Inner(const json& line) {
  return json::parse(line["metadata"]["metadata"].get<std::string>());
}

}  // namespace

TEST_CASE("console events: a round, its workers' starts, their success, the agent's") {
  Told told;
  told.StartRound();
  told.clock.Advance(std::chrono::seconds{3});
  told.Record("worker_exited",
              {{"local_rank", 0}, {"rank", 2}, {"pid", 41}, {"exitcode", 0}, {"expected", false}});
  told.Record("worker_exited",
              {{"local_rank", 1}, {"rank", 3}, {"pid", 42}, {"exitcode", 0}, {"expected", false}});
  told.Record("finished", {{"state", "succeeded"}, {"exit_code", 0}});
  CHECK(told.Names() ==
        std::vector<std::string>{
            "torchelastic.worker.status.RENDEZVOUS", "torchelastic.worker.status.START",
            "torchelastic.worker.status.START", "torchelastic.worker.status.SUCCEEDED",
            "torchelastic.worker.status.SUCCEEDED", "torchelastic.worker.status.SUCCEEDED"});
  const json& rendezvous = told.lines.at(0);
  CHECK(rendezvous["source"] == "AGENT");
  CHECK(rendezvous["metadata"]["duration_ms"].get<double>() == Approx(250.0));
  CHECK(rendezvous["metadata"]["global_rank"].is_null());
  const json& worker = told.lines.at(4)["metadata"];
  CHECK(told.lines.at(4)["source"] == "WORKER");
  CHECK(worker["run_id"] == "job7");
  CHECK(worker["global_rank"] == 3);
  CHECK(worker["group_rank"] == 1);
  CHECK(worker["worker_id"] == "42");
  CHECK(worker["role"] == "trainer");
  CHECK(worker["hostname"] == "node-a");
  CHECK(worker["state"] == "SUCCEEDED");
  CHECK(worker["total_run_time"] == 3);
  CHECK(worker["rdzv_backend"] == "c10d");
  CHECK(worker["raw_error"].is_null());
  CHECK(worker["agent_restarts"] == 1);
  CHECK(Inner(told.lines.at(4)) ==
        json::parse(R"({"group_world_size": 2, "entry_point": "/usr/bin/python3",
                        "local_rank": [1], "role_rank": [3], "role_world_size": [4],
                        "exit_code": [null], "worker_pid": [null]})"));
  CHECK(told.lines.at(5)["source"] == "AGENT");
  CHECK(told.lines.at(5)["metadata"]["worker_id"].is_null());
  // torch's key order: name, source, timestamp, metadata.
  const std::string& line = told.raw.at(4);
  CHECK(line.find("\"name\"") < line.find("\"source\""));
  CHECK(line.find("\"timestamp\"") < line.find("\"metadata\""));
}

TEST_CASE("console events: a failed group names its failed, stopped and terminated workers") {
  Told told;
  told.Record("rendezvous_started", {});
  told.Record("round_formed", {{"group_world_size", 1}, {"world_size", 3}});
  told.Record("workers_started", {{"ranks", {0, 1, 2}}, {"pids", {41, 42, 43}}});
  told.Record("worker_exited",
              {{"local_rank", 0}, {"rank", 0}, {"pid", 41}, {"exitcode", 0}, {"expected", false}});
  told.Record("worker_exited", {{"local_rank", 1},
                                {"rank", 1},
                                {"pid", 42},
                                {"exitcode", 3},
                                {"expected", false},
                                {"error_file", R"({"message": "boom"})"}});
  told.Record("worker_exited",
              {{"local_rank", 2}, {"rank", 2}, {"pid", 43}, {"exitcode", -15}, {"expected", true}});
  told.Record("finished", {{"state", "failed"}, {"exit_code", 3}});
  REQUIRE(told.lines.size() == 8);
  const json& terminated = told.lines.at(4);  // exited 0 before the failure
  CHECK(terminated["name"] == "torchelastic.worker.status.TERMINATED");
  CHECK(terminated["metadata"]["raw_error"].is_null());
  CHECK(Inner(terminated)["exit_code"] == json::parse("[null]"));
  const json& failed = told.lines.at(5);
  CHECK(failed["name"] == "torchelastic.worker.status.FAILED");
  CHECK(failed["metadata"]["raw_error"] == R"({"message": "boom"})");
  CHECK(Inner(failed)["exit_code"] == json::parse("[3]"));
  CHECK(Inner(failed)["worker_pid"] == json::parse("[42]"));
  // Stopped by the agent's SIGTERM: a failure as torch 2.x reports it.
  const json& stopped = told.lines.at(6);
  CHECK(stopped["name"] == "torchelastic.worker.status.FAILED");
  CHECK(Inner(stopped)["exit_code"] == json::parse("[-15]"));
  // torchrun records the agent's run as SUCCEEDED even when its workers failed.
  CHECK(told.lines.at(7)["name"] == "torchelastic.worker.status.SUCCEEDED");
}

TEST_CASE("console events: a failure without an error file gets torch's placeholder") {
  Told told;
  told.StartRound();
  told.Record("worker_exited",
              {{"local_rank", 0}, {"rank", 2}, {"pid", 41}, {"exitcode", 1}, {"expected", false}});
  told.Record("finished", {{"state", "failed"}, {"exit_code", 1}});
  const json raw = json::parse(told.lines.at(3)["metadata"]["raw_error"].get<std::string>());
  CHECK(raw["message"] == "<NONE>");
  CHECK(raw["errorTraits"]["category"] == "system_terminated_error");
}

TEST_CASE("console events: a run ended by a signal tells only the agent's failure") {
  Told told;
  told.StartRound();
  told.Record("finished", {{"state", "stopped"}, {"exit_code", 143}});
  REQUIRE(told.lines.size() == 4);
  CHECK(told.lines.at(3)["name"] == "torchelastic.worker.status.FAILED");
  CHECK(told.lines.at(3)["source"] == "AGENT");
  CHECK(told.lines.at(3)["metadata"]["raw_error"] == "stopped (exit code 143)");
}

TEST_CASE("console events: a restart tells a new round and new starts, the end only the last") {
  Told told;
  told.StartRound();
  told.Record("worker_exited",
              {{"local_rank", 0}, {"rank", 2}, {"pid", 41}, {"exitcode", 1}, {"expected", false}});
  told.Record("restart", {{"cause", "failure"}});
  told.Record("rendezvous_started", {});
  told.Record("round_formed", {{"group_world_size", 1}, {"world_size", 2}});
  told.Record("workers_started", {{"ranks", {0, 1}}, {"pids", {51, 52}}});
  told.Record("worker_exited", {{"local_rank", 0}, {"rank", 0}, {"pid", 51}, {"exitcode", 0}});
  told.Record("worker_exited", {{"local_rank", 1}, {"rank", 1}, {"pid", 52}, {"exitcode", 0}});
  told.Record("finished", {{"state", "succeeded"}, {"exit_code", 0}});
  REQUIRE(told.lines.size() == 9);  // 3 + RENDEZVOUS, 2 START, 2 SUCCEEDED, agent
  CHECK(told.lines.at(3)["name"] == "torchelastic.worker.status.RENDEZVOUS");
  CHECK(told.lines.at(6)["metadata"]["worker_id"] == "51");
  CHECK(Inner(told.lines.at(7))["role_world_size"] == json::parse("[2]"));
}
