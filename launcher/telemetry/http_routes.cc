#include "launcher/telemetry/http_routes.h"

namespace ddprun::launcher::telemetry {
namespace {

constexpr const char* kJson = "application/json";
constexpr const char* kText = "text/plain; charset=utf-8";
constexpr const char* kPrometheus = "text/plain; version=0.0.4; charset=utf-8";

std::string_view PathOf(std::string_view target) {
  return target.substr(0, target.find_first_of("?#"));
}

}  // namespace

HttpAnswer Answer(std::string_view method, std::string_view target, AgentTelemetry& telemetry) {
  const std::string_view path = PathOf(target);
  const bool known = path == "/healthz" || path == "/health" || path == "/metrics";
  if (!known) return {404, kText, "not found: try /healthz or /metrics\n"};
  if (method != "GET") return {405, kText, "method not allowed: GET only\n"};
  if (path == "/metrics") return {200, kPrometheus, telemetry.MetricsText()};
  return {telemetry.Healthy() ? 200 : 503, kJson, telemetry.HealthJson().dump() + "\n"};
}

}  // namespace ddprun::launcher::telemetry
