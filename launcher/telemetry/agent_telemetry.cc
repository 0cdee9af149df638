#include "launcher/telemetry/agent_telemetry.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <sstream>

namespace ddprun::launcher::telemetry {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::Counter;
using prometheus::Gauge;

double Seconds(Clock::TimePoint::duration span) {
  return std::chrono::duration<double>(span).count();
}

template <typename Builder>
auto& Add(Builder builder, prometheus::Registry& registry, const char* name, const char* help) {
  return builder.Name(name).Help(help).Register(registry).Add({});
}

std::optional<int> IntField(const nlohmann::json& fields, const char* name) {
  const auto found = fields.find(name);
  if (found == fields.end() || !found->is_number_integer()) return std::nullopt;
  return found->get<int>();
}

std::optional<double> DoubleField(const nlohmann::json& fields, const char* name) {
  const auto found = fields.find(name);
  if (found == fields.end() || !found->is_number()) return std::nullopt;
  return found->get<double>();
}

template <typename T>
nlohmann::json OrNull(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// Brings a Prometheus counter up to a total kept elsewhere (a new server after a failover
// starts from 0 again: the counter then waits until that one's total passes it).
void CatchUp(Counter& counter, double total) {
  if (total > counter.Value()) counter.Increment(total - counter.Value());
}

}  // namespace

struct AgentTelemetry::Series {
  explicit Series(prometheus::Registry& r)
      : rounds(Add(BuildCounter(), r, "ddprun_rounds_joined_total",
                   "Rendezvous rounds this agent joined")),
        restarts(BuildCounter()
                     .Name("ddprun_restarts_total")
                     .Help("Worker group restarts by cause: failure (may spend a restart) or "
                           "membership (a node joined or was lost; spends none)")
                     .Register(r)),
        restarts_failure(restarts.Add({{"cause", "failure"}})),
        restarts_membership(restarts.Add({{"cause", "membership"}})),
        node_losses(Add(BuildCounter(), r, "ddprun_node_losses_total",
                        "Peer nodes this agent declared lost")),
        worker_failures(
            Add(BuildCounter(), r, "ddprun_worker_failures_total",
                "Local workers that exited with a failure while the group was healthy")),
        hangs(Add(BuildCounter(), r, "ddprun_hangs_total",
                  "Hangs this agent found (--hang_timeout, file timer)")),
        hang_timeout(Add(BuildGauge(), r, "ddprun_hang_timeout_seconds",
                         "The hang timeout in force, fixed or learned (0: off, or being learned)")),
        workers_running(Add(BuildGauge(), r, "ddprun_workers_running",
                            "Local worker processes started and not yet exited")),
        round(Add(BuildGauge(), r, "ddprun_round", "The current rendezvous round (-1: none yet)")),
        world_size(Add(BuildGauge(), r, "ddprun_world_size",
                       "Workers in the current round, every node (0: none yet)")),
        budget(Add(BuildGauge(), r, "ddprun_restart_budget_remaining",
                   "--max_restarts minus the job's restart count")),
        last_progress(Add(
            BuildGauge(), r, "ddprun_last_progress_timestamp_seconds",
            "Epoch seconds of the last worker progress: start, exit, output, pulse (0: none yet)")),
        healthy(Add(BuildGauge(), r, "ddprun_healthy", "1 while /healthz answers 200, else 0")),
        uptime(Add(BuildGauge(), r, "ddprun_uptime_seconds", "Seconds since the agent started")),
        store_connections(Add(BuildGauge(), r, "ddprun_store_connections",
                              "Open client connections of the store this agent hosts")),
        store_requests(Add(BuildCounter(), r, "ddprun_store_requests_total",
                           "Requests served by the store this agent hosts")) {}

  Counter& rounds;
  prometheus::Family<Counter>& restarts;
  Counter& restarts_failure;
  Counter& restarts_membership;
  Counter& node_losses;
  Counter& worker_failures;
  Counter& hangs;
  Gauge& hang_timeout;
  Gauge& workers_running;
  Gauge& round;
  Gauge& world_size;
  Gauge& budget;
  Gauge& last_progress;
  Gauge& healthy;
  Gauge& uptime;
  Gauge& store_connections;
  Counter& store_requests;
};

AgentTelemetry::AgentTelemetry(int max_restarts, elastic::EventSink* next, Clock& clock)
    : next_(next),
      clock_(clock),
      started_(clock.Now()),
      registry_(std::make_shared<prometheus::Registry>()),
      series_(std::make_unique<Series>(*registry_)) {
  state_.max_restarts = max_restarts;
  series_->round.Set(-1);
  RefreshGauges();
}

AgentTelemetry::~AgentTelemetry() = default;

void AgentTelemetry::Record(const std::string& event, const nlohmann::json& fields) {
  try {
    Apply(event, fields);
  } catch (const std::exception&) {  // a malformed field never stops the agent (the seam's rule)
  }
  if (next_ != nullptr) next_->Record(event, fields);
}

void AgentTelemetry::Apply(const std::string& event, const nlohmann::json& fields) {
  if (const auto count = IntField(fields, "restart_count")) state_.restart_count = *count;
  if (event == "rendezvous_started") {
    state_.state = "rendezvous";
  } else if (event == "round_formed") {
    series_->rounds.Increment();
    state_.round = IntField(fields, "round");
    state_.group_rank = IntField(fields, "group_rank");
    state_.world_size = IntField(fields, "world_size");
    state_.group_world_size = IntField(fields, "group_world_size");
  } else if (event == "workers_started") {
    state_.state = "healthy";
    state_.workers_running =
        static_cast<int>(fields.value("ranks", nlohmann::json::array()).size());
    state_.last_progress = clock_.Now();
    if (fields.contains("hang_startup_timeout_s")) {
      state_.hang_timeout_s = DoubleField(fields, "hang_timeout_s");
      state_.hang_timeout_learned = fields.value("hang_timeout_learned", false);
      state_.hang_startup_timeout_s = DoubleField(fields, "hang_startup_timeout_s");
    }
  } else if (event == "hang_timeout_learned") {
    state_.hang_timeout_s = DoubleField(fields, "timeout_s");
  } else if (event == "worker_exited") {
    state_.workers_running = std::max(0, state_.workers_running - 1);
    state_.last_progress = clock_.Now();
    if (fields.value("exitcode", 0) != 0 && !fields.value("expected", false)) {
      series_->worker_failures.Increment();
    }
  } else if (event == "node_lost") {
    series_->node_losses.Increment();
  } else if (event == "hang") {
    series_->hangs.Increment();
  } else if (event == "restart") {
    state_.state = "restarting";
    (fields.value("cause", "") == "membership" ? series_->restarts_membership
                                               : series_->restarts_failure)
        .Increment();
  } else if (event == "signal") {
    state_.state = "stopping";
    state_.reason = "received " + fields.value("signal", std::string("a signal")) + "; stopping";
  } else if (event == "finished") {
    state_.state = fields.value("state", std::string("finished"));
    state_.workers_running = 0;
    if (state_.state != "succeeded") {
      state_.reason = "the agent finished: " + state_.state + " (exit code " +
                      std::to_string(fields.value("exit_code", 1)) + ")";
    }
  }
  RefreshGauges();
}

void AgentTelemetry::RefreshGauges() {
  series_->workers_running.Set(state_.workers_running);
  if (state_.round) series_->round.Set(*state_.round);
  series_->world_size.Set(state_.world_size.value_or(0));
  series_->budget.Set(std::max(0, state_.max_restarts - state_.restart_count));
  series_->healthy.Set(Healthy() ? 1 : 0);
  series_->hang_timeout.Set(state_.hang_timeout_s.value_or(0.0));
}

// The later of the last worker event and the last activity the process side saw.
std::optional<Clock::TimePoint> AgentTelemetry::LastProgress() {
  std::optional<Clock::TimePoint> last = state_.last_progress;
  if (const auto seen = activity_ ? activity_() : std::nullopt) {
    if (!last || *seen > *last) last = seen;
  }
  return last;
}

nlohmann::json AgentTelemetry::HealthJson() {
  const Clock::TimePoint now = clock_.Now();
  nlohmann::json body{{"state", state_.state},
                      {"round", OrNull(state_.round)},
                      {"world_size", OrNull(state_.world_size)},
                      {"group_rank", OrNull(state_.group_rank)},
                      {"restart_count", state_.restart_count},
                      {"max_restarts", state_.max_restarts},
                      {"last_progress_age_s", nullptr},
                      {"uptime_s", Seconds(now - started_)},
                      {"hang_timeout_s", OrNull(state_.hang_timeout_s)},
                      {"hang_timeout_learned", state_.hang_timeout_learned},
                      {"hang_startup_timeout_s", OrNull(state_.hang_startup_timeout_s)}};
  if (const auto last = LastProgress()) body["last_progress_age_s"] = Seconds(now - *last);
  if (!Healthy()) body["reason"] = state_.reason;
  return body;
}

std::string AgentTelemetry::MetricsText() {
  const Clock::TimePoint now = clock_.Now();
  series_->uptime.Set(Seconds(now - started_));
  if (const auto last = LastProgress()) {  // as wall time, from its age on the steady clock
    series_->last_progress.Set(static_cast<double>(WallClockMs(clock_)) / 1000.0 -
                               Seconds(now - *last));
  }
  const std::optional<StoreLoad> load = store_ ? store_() : std::nullopt;
  series_->store_connections.Set(load ? static_cast<double>(load->connections) : 0.0);
  if (load) CatchUp(series_->store_requests, static_cast<double>(load->requests));
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace ddprun::launcher::telemetry
