// The health endpoint's routes without sockets: status, content type and body per request.
#include "launcher/telemetry/http_routes.h"

#include <catch2/catch.hpp>

#include "tests/unit/common/fake_clock.h"

namespace ddprun::launcher::telemetry {
namespace {

TEST_CASE("routes: /healthz and /health answer the health JSON, 200 while healthy", "[telemetry]") {
  testing::FakeClock clock;
  AgentTelemetry telemetry(2, nullptr, clock);
  for (const char* target : {"/healthz", "/health", "/healthz?verbose=1"}) {
    const HttpAnswer answer = Answer("GET", target, telemetry);
    CHECK(answer.status == 200);
    CHECK(answer.content_type == "application/json");
    CHECK(nlohmann::json::parse(answer.body) == telemetry.HealthJson());
  }
}

TEST_CASE("routes: an unhealthy agent answers 503 with its reason", "[telemetry]") {
  testing::FakeClock clock;
  AgentTelemetry telemetry(2, nullptr, clock);
  telemetry.Record("finished", {{"state", "failed"}, {"exit_code", 3}, {"restart_count", 2}});
  const HttpAnswer answer = Answer("GET", "/healthz", telemetry);
  CHECK(answer.status == 503);
  CHECK(nlohmann::json::parse(answer.body)["reason"] == "the agent finished: failed (exit code 3)");
}

TEST_CASE("routes: /metrics is the Prometheus text format", "[telemetry]") {
  testing::FakeClock clock;
  AgentTelemetry telemetry(2, nullptr, clock);
  const HttpAnswer answer = Answer("GET", "/metrics", telemetry);
  CHECK(answer.status == 200);
  CHECK(answer.content_type == "text/plain; version=0.0.4; charset=utf-8");
  CHECK_THAT(answer.body, Catch::Contains("# TYPE ddprun_restarts_total counter"));
  CHECK_THAT(answer.body, Catch::Contains("\nddprun_restart_budget_remaining 2\n"));
}

TEST_CASE("routes: other paths are 404, other methods 405", "[telemetry]") {
  testing::FakeClock clock;
  AgentTelemetry telemetry(2, nullptr, clock);
  CHECK(Answer("GET", "/", telemetry).status == 404);
  CHECK(Answer("GET", "/healthzz", telemetry).status == 404);
  CHECK(Answer("POST", "/healthz", telemetry).status == 405);
  CHECK(Answer("DELETE", "/metrics", telemetry).status == 405);
  CHECK(Answer("POST", "/nowhere", telemetry).status == 404);
}

}  // namespace
}  // namespace ddprun::launcher::telemetry
