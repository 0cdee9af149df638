#include "launcher/backend/elastic_backend.h"

#include <memory>

#include "common/host_port.h"
#include "common/logging.h"
#include "launcher/backend/elastic_monitor.h"
#include "launcher/backend/etcd_liveness.h"
#include "launcher/backend/etcd_store_site.h"
#include "launcher/backend/free_port.h"
#include "launcher/backend/tcp_store_site.h"

namespace ddprun::launcher::backend {
namespace {

using std::chrono::milliseconds;

// Serves each round's worker store on a thread of its own, on an ephemeral port of `host`.
class ThreadWorkerStoreHost : public rendezvous::WorkerStoreHost {
 public:
  explicit ThreadWorkerStoreHost(std::string host) : host_(std::move(host)) {}
  int Serve() override {
    server_.reset();
    store::ServerOptions options;
    options.host = host_;
    server_ = std::make_unique<store::StoreServerThread>(
        options, store::StoreThreadOptions{.announce = true});
    return server_->Port();
  }
  void Stop() override { server_.reset(); }

 private:
  std::string host_;
  std::unique_ptr<store::StoreServerThread> server_;
};

// An authenticated rendezvous: rank 0's worker serves the workers' store itself, on a port of
// `host` free when the round forms.
class OwnWorkerStore : public rendezvous::WorkerStoreHost {
 public:
  explicit OwnWorkerStore(std::string host) : host_(std::move(host)) {}
  int Serve() override { return PickFreePort(host_); }
  void Stop() override {}
  bool AgentServes() const override { return false; }

 private:
  std::string host_;
};

rendezvous::DynamicRendezvousOptions RendezvousOptions(const LaunchPlan& plan,
                                                       const elastic::WorkerSpec& spec) {
  const LaunchTimeouts& timeouts = plan.timeouts;
  rendezvous::DynamicRendezvousOptions options;
  options.run_id = plan.run_id;
  options.min_nodes = plan.min_nodes;
  options.max_nodes = plan.max_nodes;
  options.node = {plan.node.hostname, plan.node.advertised_addr, plan.node.pid,
                  spec.local_world_size};
  options.join_timeout = timeouts.join;
  options.last_call_timeout = timeouts.last_call;
  options.member_timeout = timeouts.member;
  options.keep_alive_interval = timeouts.keep_alive;
  options.keep_alive_max_attempt = timeouts.keep_alive_max_attempt;
  options.close_timeout = timeouts.close;
  options.on_waiting = [](const std::string& line) { spdlog::warn("{}", line); };
  return options;
}

std::unique_ptr<rendezvous::StoreSite> MakeStoreSite(const LaunchPlan& plan) {
  if (plan.etcd) return std::make_unique<EtcdStoreSite>(*plan.etcd);
  const LaunchTimeouts& timeouts = plan.timeouts;
  return std::make_unique<TcpStoreSite>(TcpStoreSiteOptions{
      timeouts.read, ServedStoreOptions(ServedStore{plan.store_bind.value_or(""), 0}, plan),
      timeouts.linger, timeouts.heartbeat});
}

// How the round's watch connects to wherever the round's store is: etcd through the site; a
// c10d store (it moves when lost) with replies later than the heartbeat timeout meaning lost.
rendezvous::StoreConnector RoundStoreConnector(
    const LaunchPlan& plan, rendezvous::StoreSite& site,
    const rendezvous::ElasticRendezvousHandler& handler) {
  if (plan.etcd) {
    return [&site, &handler](milliseconds timeout) {
      return site.Connect(handler.StoreAddress(), timeout);
    };
  }
  return
      [&handler, reply_timeout = plan.timeouts.heartbeat, auth = plan.auth](milliseconds timeout) {
        const HostPort at = handler.StoreAddress();  // the plan's endpoints all have their port
        return TcpStoreConnector(at.host, at.port.value_or(0), reply_timeout, auth)(timeout);
      };
}

rendezvous::ElasticHandlerOptions HandlerOptions(const LaunchPlan& plan,
                                                 const elastic::WorkerSpec& spec) {
  rendezvous::ElasticHandlerOptions handler;
  handler.rendezvous = RendezvousOptions(plan, spec);
  handler.advertised_addr = plan.node.advertised_addr;
  handler.read_timeout = plan.timeouts.read;
  handler.endpoints = plan.rendezvous_endpoints;
  handler.serve_first = plan.serves_rendezvous_store;
  handler.replicated_store = plan.etcd.has_value();
  handler.failover.run_id = plan.run_id;
  handler.failover.port = handler.endpoints.front().port.value_or(0);  // the plan gave each one
  handler.failover.window = plan.timeouts.heartbeat;
  handler.failover.relocate_check = plan.timeouts.keep_alive;
  return handler;
}

}  // namespace

std::unique_ptr<LaunchBackend> MakeElasticBackend(asio::io_context& io, const LaunchPlan& plan,
                                                  const elastic::WorkerSpec& spec) {
  const LaunchTimeouts& timeouts = plan.timeouts;
  auto backend = std::make_unique<LaunchBackend>();
  const std::string bind = plan.store_bind.value_or("");
  if (!plan.first_round.use_agent_store) {  // authenticated: the workers serve their own
    backend->worker_store = std::make_unique<OwnWorkerStore>(bind);
  } else {
    backend->worker_store = std::make_unique<ThreadWorkerStoreHost>(bind);
  }
  const rendezvous::ElasticHandlerOptions handler = HandlerOptions(plan, spec);
  backend->store_site = MakeStoreSite(plan);
  if (auto* tcp = dynamic_cast<TcpStoreSite*>(backend->store_site.get())) {
    backend->hosted_store_load = [tcp] { return tcp->ServedLoad(); };
  }
  auto rendezvous = std::make_unique<rendezvous::ElasticRendezvousHandler>(
      handler, *backend->store_site, *backend->worker_store);
  rendezvous::StoreConnector connect_round_store =
      RoundStoreConnector(plan, *backend->store_site, *rendezvous);
  backend->rendezvous = std::move(rendezvous);
  ElasticMonitorOptions monitor{handler.rendezvous,
                                std::move(connect_round_store),
                                timeouts.keep_alive,
                                timeouts.keep_alive_max_attempt,
                                {}};
  if (plan.etcd) {
    monitor.liveness = [etcd = *plan.etcd](const rendezvous::LivenessScope& scope,
                                           rendezvous::MemberLiveness::TimePoint start) {
      return std::make_unique<LeaseLiveness>(scope, etcd, start);
    };
  }
  backend->monitor = std::make_unique<ElasticMonitor>(io, std::move(monitor));
  backend->blocking = true;
  backend->agent_options.shutdown_timeout = timeouts.shutdown;
  backend->agent_options.failure_barrier_timeout = timeouts.failure_barrier;
  return backend;
}

}  // namespace ddprun::launcher::backend
