// The agent's health and metrics, fed by its events: an EventSink decorator that keeps the
// health state (state, round, world size, restarts, last worker activity) and the Prometheus
// series, and forwards every event to the next sink (--event_log's) when there is one.
// Single-threaded: Record and the readers run on the agent's event loop. prometheus-cpp is
// confined to this folder (docs/architecture.md).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/clock.h"
#include "elastic/event_sink.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace ddprun::launcher::telemetry {

// The load of the store server this agent hosts, read at scrape time (the server keeps plain
// atomic counters): open client connections and requests executed since it started.
struct StoreLoad {
  std::uint64_t connections = 0;
  std::uint64_t requests = 0;
};
using StoreLoadReader = std::function<std::optional<StoreLoad>()>;  // none: serves none now
// When a worker last showed progress (output, a pulse, a file-timer request), read at each
// probe and scrape; none: nothing seen yet.
using ActivityReader = std::function<std::optional<Clock::TimePoint>()>;

// What the agent knows of itself, as /healthz shows it.
struct HealthState {
  std::string state = "init";  // init, rendezvous, healthy, restarting, stopping, succeeded, ...
  std::optional<int> round, world_size, group_world_size, group_rank;
  int restart_count = 0;
  int max_restarts = 0;
  int workers_running = 0;
  // The last worker event (started, exited); the ActivityReader adds output and pulses.
  std::optional<Clock::TimePoint> last_progress;
  std::string reason;  // why unhealthy; "" when healthy
  // Hang detection: the timeout between signs of progress now in force (none: off, or still
  // being learned), whether it is learned (--hang-timeout=auto), the start-up timeout.
  std::optional<double> hang_timeout_s;
  bool hang_timeout_learned = false;
  std::optional<double> hang_startup_timeout_s;
};

class AgentTelemetry : public elastic::EventSink {
 public:
  AgentTelemetry(int max_restarts, elastic::EventSink* next, Clock& clock = RealClock());
  ~AgentTelemetry() override;
  AgentTelemetry(const AgentTelemetry&) = delete;
  AgentTelemetry& operator=(const AgentTelemetry&) = delete;

  void Record(const std::string& event, const nlohmann::json& fields) override;
  void SetStoreLoad(StoreLoadReader reader) { store_ = std::move(reader); }
  void SetActivity(ActivityReader reader) { activity_ = std::move(reader); }

  const HealthState& State() const { return state_; }
  bool Healthy() const { return state_.reason.empty(); }
  // /healthz's body: {state, round, world_size, group_rank, restart_count, max_restarts,
  // last_progress_age_s, uptime_s, hang_timeout_s, hang_timeout_learned,
  // hang_startup_timeout_s} (+ reason when unhealthy); nulls before the first round (and the
  // hang timeouts while hang detection is off, the first while it is being learned).
  nlohmann::json HealthJson();
  // /metrics's body: the Prometheus text exposition format (version 0.0.4).
  std::string MetricsText();

 private:
  struct Series;
  void Apply(const std::string& event, const nlohmann::json& fields);
  void RefreshGauges();
  std::optional<Clock::TimePoint> LastProgress();

  elastic::EventSink* next_;
  Clock& clock_;
  Clock::TimePoint started_;
  HealthState state_;
  StoreLoadReader store_;
  ActivityReader activity_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<Series> series_;
};

}  // namespace ddprun::launcher::telemetry
