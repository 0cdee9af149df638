// --health_port: an HTTP/1.1 server on the agent's own event loop (so that a wedged agent loop
// fails the probe: that is the point) answering http_routes.h's requests. Bounded: a request's
// size, a per-connection deadline to read each request, a cap on open connections (one more is
// accepted and closed at once); keep-alive when the client asks for it. Closed on destruction
// (or Stop); a connection in progress is cut.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "common/asio.h"
#include "launcher/telemetry/agent_telemetry.h"

namespace ddprun::launcher::telemetry {

struct HealthServerLimits {
  std::size_t max_request_bytes = 8192;          // header and body together, about
  std::chrono::milliseconds read_timeout{5000};  // to read one request, from its first byte on
  int max_connections = 16;
};

class HealthServer {
 public:
  // Binds host:port (0: ephemeral) and listens; throws UsageError naming `given_as` when it
  // cannot ("--health_port=80: bind 127.0.0.1:80: Permission denied; ...").
  HealthServer(asio::io_context& io, const std::string& host, int port, AgentTelemetry& telemetry,
               const std::string& given_as, HealthServerLimits limits = {});
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  std::string Host() const;
  int Port() const;
  void Stop();  // idempotent

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace ddprun::launcher::telemetry
