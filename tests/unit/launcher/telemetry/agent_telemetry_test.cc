// AgentTelemetry: the agent's events in (as elastic::Agent emits them), exact /healthz JSON and
// Prometheus values out, on a fake clock; every event forwarded to the next sink.
#include "launcher/telemetry/agent_telemetry.h"

#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <vector>

#include "tests/unit/common/fake_clock.h"

namespace ddprun::launcher::telemetry {
namespace {

using nlohmann::json;

struct RecordingSink : elastic::EventSink {
  void Record(const std::string& event, const json& fields) override {
    events.emplace_back(event, fields);
  }
  std::vector<std::pair<std::string, json>> events;
};

// "name{labels} value" lines of the text format, comments skipped.
std::map<std::string, double> Samples(const std::string& text) {
  std::map<std::string, double> samples;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    samples[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return samples;
}

json Context(int round, int restart_count) {
  return {{"role", "default"},
          {"host", "h"},
          {"restart_count", restart_count},
          {"round", round},
          {"group_rank", 1}};
}

json With(json fields, const json& more) {
  fields.update(more);
  return fields;
}

// One healthy round of 2 nodes x 2 workers (world size 4), this node group rank 1.
void FormRound(AgentTelemetry& telemetry, int round, int restart_count) {
  telemetry.Record("rendezvous_started", {{"restart_count", restart_count}});
  telemetry.Record("round_formed", With(Context(round, restart_count),
                                        {{"group_world_size", 2}, {"world_size", 4}}));
  telemetry.Record("workers_started", With(Context(round, restart_count), {{"ranks", {2, 3}}}));
}

TEST_CASE("telemetry: before any round, nulls and state init, healthy", "[telemetry]") {
  testing::FakeClock clock;
  AgentTelemetry telemetry(3, nullptr, clock);
  clock.Advance(std::chrono::milliseconds(1500));
  CHECK(telemetry.Healthy());
  CHECK(telemetry.HealthJson() == json{{"state", "init"},
                                       {"round", nullptr},
                                       {"world_size", nullptr},
                                       {"group_rank", nullptr},
                                       {"restart_count", 0},
                                       {"max_restarts", 3},
                                       {"last_progress_age_s", nullptr},
                                       {"uptime_s", 1.5},
                                       {"hang_timeout_s", nullptr},
                                       {"hang_timeout_learned", false},
                                       {"hang_startup_timeout_s", nullptr}});
  const auto samples = Samples(telemetry.MetricsText());
  CHECK(samples.at("ddprun_round") == -1);
  CHECK(samples.at("ddprun_restart_budget_remaining") == 3);
  CHECK(samples.at("ddprun_uptime_seconds") == 1.5);
  CHECK(samples.at("ddprun_healthy") == 1);
  CHECK(samples.at("ddprun_last_progress_timestamp_seconds") == 0);
}

TEST_CASE("telemetry: a running round shows its round, world size, rank and progress age",
          "[telemetry]") {
  testing::FakeClock clock;
  AgentTelemetry telemetry(3, nullptr, clock);
  FormRound(telemetry, 0, 0);
  clock.Advance(std::chrono::milliseconds(2250));
  CHECK(telemetry.HealthJson() == json{{"state", "healthy"},
                                       {"round", 0},
                                       {"world_size", 4},
                                       {"group_rank", 1},
                                       {"restart_count", 0},
                                       {"max_restarts", 3},
                                       {"last_progress_age_s", 2.25},
                                       {"uptime_s", 2.25},
                                       {"hang_timeout_s", nullptr},
                                       {"hang_timeout_learned", false},
                                       {"hang_startup_timeout_s", nullptr}});
  const auto samples = Samples(telemetry.MetricsText());
  CHECK(samples.at("ddprun_rounds_joined_total") == 1);
  CHECK(samples.at("ddprun_round") == 0);
  CHECK(samples.at("ddprun_world_size") == 4);
  CHECK(samples.at("ddprun_workers_running") == 2);
  CHECK(samples.at("ddprun_last_progress_timestamp_seconds") == 1'700'000'000.0);
}

TEST_CASE("telemetry: the hang timeouts in force, a learned one once it is learned",
          "[telemetry][hang]") {
  testing::FakeClock clock;
  AgentTelemetry telemetry(3, nullptr, clock);
  telemetry.Record("workers_started", {{"ranks", {0, 1}},
                                       {"hang_timeout_s", nullptr},
                                       {"hang_timeout_learned", true},
                                       {"hang_startup_timeout_s", 600.0}});
  auto health = telemetry.HealthJson();
  CHECK(health.at("hang_timeout_s").is_null());  // being learned
  CHECK(health.at("hang_timeout_learned") == true);
  CHECK(health.at("hang_startup_timeout_s") == 600.0);
  CHECK(Samples(telemetry.MetricsText()).at("ddprun_hang_timeout_seconds") == 0);
  telemetry.Record("hang_timeout_learned", {{"timeout_s", 2.5}, {"longest_interval_s", 0.5}});
  CHECK(telemetry.HealthJson().at("hang_timeout_s") == 2.5);
  CHECK(Samples(telemetry.MetricsText()).at("ddprun_hang_timeout_seconds") == 2.5);
  telemetry.Record("workers_started", {{"ranks", {0, 1}},
                                       {"hang_timeout_s", 4.0},
                                       {"hang_timeout_learned", true},
                                       {"hang_startup_timeout_s", 600.0}});
  CHECK(telemetry.HealthJson().at("hang_timeout_s") == 4.0);  // the next attempt starts with it
}

TEST_CASE("telemetry: worker output or a pulse after the start is progress", "[telemetry]") {
  testing::FakeClock clock;
  AgentTelemetry telemetry(3, nullptr, clock);
  std::optional<Clock::TimePoint> seen;
  telemetry.SetActivity([&seen] { return seen; });
  FormRound(telemetry, 0, 0);
  clock.Advance(std::chrono::seconds(10));
  seen = clock.Now();  // a line on stderr, say, 10 s after the start
  clock.Advance(std::chrono::milliseconds(500));
  CHECK(telemetry.HealthJson().at("last_progress_age_s") == 0.5);
  CHECK(Samples(telemetry.MetricsText()).at("ddprun_last_progress_timestamp_seconds") ==
        1'700'000'010.0);
  seen = clock.Now() - std::chrono::seconds(60);  // older than the start: the start counts
  CHECK(telemetry.HealthJson().at("last_progress_age_s") == 10.5);
}

TEST_CASE("telemetry: a lost node, a failure and a hang move their counters by one each",
          "[telemetry]") {
  testing::FakeClock clock;
  AgentTelemetry telemetry(2, nullptr, clock);
  FormRound(telemetry, 0, 0);
  telemetry.Record("node_lost", With(Context(0, 0), {{"node", 0}, {"reason", "silent"}}));
  telemetry.Record("worker_exited",
                   With(Context(0, 0), {{"local_rank", 0}, {"exitcode", -15}, {"expected", true}}));
  telemetry.Record("worker_exited",
                   With(Context(0, 0), {{"local_rank", 1}, {"exitcode", 0}, {"expected", true}}));
  telemetry.Record("restart", With(Context(0, 0), {{"cause", "membership"}}));
  CHECK(telemetry.HealthJson()["state"] == "restarting");
  CHECK(telemetry.Healthy());  // a restart is the agent doing its job
  FormRound(telemetry, 1, 0);
  telemetry.Record("hang", With(Context(1, 0), {{"kind", "no_progress"}}));
  telemetry.Record("worker_exited",
                   With(Context(1, 0), {{"local_rank", 1}, {"exitcode", 1}, {"expected", false}}));
  telemetry.Record("worker_exited",
                   With(Context(1, 0), {{"local_rank", 0}, {"exitcode", -15}, {"expected", true}}));
  telemetry.Record("restart", With(Context(1, 0), {{"cause", "failure"}}));
  FormRound(telemetry, 2, 1);
  const auto samples = Samples(telemetry.MetricsText());
  CHECK(samples.at("ddprun_node_losses_total") == 1);
  CHECK(samples.at("ddprun_restarts_total{cause=\"membership\"}") == 1);
  CHECK(samples.at("ddprun_restarts_total{cause=\"failure\"}") == 1);
  CHECK(samples.at("ddprun_worker_failures_total") == 1);  // the expected exits do not count
  CHECK(samples.at("ddprun_hangs_total") == 1);
  CHECK(samples.at("ddprun_rounds_joined_total") == 3);
  CHECK(samples.at("ddprun_round") == 2);
  CHECK(samples.at("ddprun_restart_budget_remaining") == 1);
  CHECK(telemetry.HealthJson()["restart_count"] == 1);
}

TEST_CASE("telemetry: a signal or a failed finish answers unhealthy with a reason", "[telemetry]") {
  testing::FakeClock clock;
  AgentTelemetry telemetry(0, nullptr, clock);
  FormRound(telemetry, 0, 0);
  SECTION("signal") {
    telemetry.Record("signal", With(Context(0, 0), {{"signal", "SIGTERM"}}));
    CHECK_FALSE(telemetry.Healthy());
    CHECK(telemetry.HealthJson()["state"] == "stopping");
    CHECK(telemetry.HealthJson()["reason"] == "received SIGTERM; stopping");
  }
  SECTION("failed") {
    telemetry.Record("finished", With(Context(0, 0), {{"state", "failed"}, {"exit_code", 1}}));
    CHECK_FALSE(telemetry.Healthy());
    CHECK(telemetry.HealthJson()["reason"] == "the agent finished: failed (exit code 1)");
    CHECK(Samples(telemetry.MetricsText()).at("ddprun_healthy") == 0);
  }
  SECTION("succeeded") {
    telemetry.Record("finished", With(Context(0, 0), {{"state", "succeeded"}, {"exit_code", 0}}));
    CHECK(telemetry.Healthy());
    CHECK_FALSE(telemetry.HealthJson().contains("reason"));
  }
}

TEST_CASE("telemetry: every event reaches the next sink unchanged", "[telemetry]") {
  testing::FakeClock clock;
  RecordingSink next;
  AgentTelemetry telemetry(1, &next, clock);
  FormRound(telemetry, 0, 0);
  telemetry.Record("odd", {{"round", "not a number"}});
  REQUIRE(next.events.size() == 4);
  CHECK(next.events[1].first == "round_formed");
  CHECK(next.events[1].second["world_size"] == 4);
  CHECK(next.events[3] == std::make_pair(std::string("odd"), json{{"round", "not a number"}}));
}

TEST_CASE("telemetry: the hosted store's counters are read at scrape time", "[telemetry]") {
  testing::FakeClock clock;
  AgentTelemetry telemetry(1, nullptr, clock);
  std::optional<StoreLoad> load;
  telemetry.SetStoreLoad([&load] { return load; });
  CHECK(Samples(telemetry.MetricsText()).at("ddprun_store_connections") == 0);
  load = StoreLoad{3, 10};
  CHECK(Samples(telemetry.MetricsText()).at("ddprun_store_requests_total") == 10);
  load = StoreLoad{1, 25};
  const auto samples = Samples(telemetry.MetricsText());
  CHECK(samples.at("ddprun_store_connections") == 1);
  CHECK(samples.at("ddprun_store_requests_total") == 25);
}

}  // namespace
}  // namespace ddprun::launcher::telemetry
