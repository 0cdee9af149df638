// What the health endpoint answers, without sockets: a request's method and target in, a
// status, content type and body out. GET /healthz (and /health): 200 while the agent is
// healthy, 503 (with a reason) when it is not, JSON either way; GET /metrics: the Prometheus
// text format; 404 for other paths, 405 (Allow: GET) for other methods.
#pragma once
#include <string>
#include <string_view>

#include "launcher/telemetry/agent_telemetry.h"

namespace ddprun::launcher::telemetry {

struct HttpAnswer {
  int status = 200;
  std::string content_type;
  std::string body;
};

HttpAnswer Answer(std::string_view method, std::string_view target, AgentTelemetry& telemetry);

}  // namespace ddprun::launcher::telemetry
