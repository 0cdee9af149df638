#include "launcher/backend/static_backend.h"

#include <unistd.h>

#include <memory>

#include "common/logging.h"
#include "launcher/backend/join_progress.h"
#include "launcher/backend/free_port.h"
#include "launcher/backend/master_endpoint.h"
#include "launcher/backend/node_monitor.h"
#include "launcher/backend/store_server_thread.h"
#include "rendezvous/static_rendezvous.h"

namespace ddprun::launcher::backend {
namespace {

using std::chrono::milliseconds;

rendezvous::StaticRendezvousOptions RendezvousOptions(const LaunchPlan& plan,
                                                      const elastic::WorkerSpec& spec,
                                                      const elastic::RendezvousSettings& settings) {
  rendezvous::StaticRendezvousOptions options;
  options.run_id = plan.run_id;
  options.node_rank = plan.first_round.group_rank;
  options.num_nodes = plan.first_round.group_world_size;
  options.master_addr = plan.first_round.master_addr;
  options.master_port = plan.first_round.master_port;
  options.host = spec.hostname;
  options.join_timeout = settings.join_timeout;
  options.on_progress = MakeJoinProgressPrinter(::isatty(STDERR_FILENO) == 1);
  if (!plan.first_round.use_agent_store) {  // authenticated: PyTorch clients cannot join
    options.pick_worker_port = [bind = plan.store_bind.value_or("")] { return PickFreePort(bind); };
  }
  return options;
}

NodeMonitorOptions MonitorOptions(const LaunchPlan& plan,
                                  const elastic::RendezvousSettings& settings) {
  NodeMonitorOptions options;
  options.store_host = plan.agent_store->host;
  options.store_port = plan.agent_store->port.value_or(0);
  options.run_id = plan.run_id;
  options.interval = settings.keep_alive_interval;
  options.max_attempts = settings.keep_alive_max_attempt;
  options.auth = settings.auth;
  return options;
}

}  // namespace

std::unique_ptr<LaunchBackend> MakeStaticBackend(asio::io_context& io,
                                                 const elastic::LaunchConfig& config,
                                                 const LaunchPlan& plan,
                                                 const elastic::WorkerSpec& spec) {
  const elastic::RendezvousSettings& settings = config.rdzv_settings;
  auto backend = std::make_unique<LaunchBackend>();
  if (plan.served_store) {  // node 0
    // Live peers beat every keep_alive_interval, so a connection quiet for the heartbeat timeout
    // belongs to a lost node and is not waited for.
    const auto heartbeat_timeout = settings.HeartbeatTimeout();
    const auto linger = std::max(std::chrono::milliseconds{10'000}, heartbeat_timeout);
    backend->rendezvous_store = std::make_unique<StoreServerThread>(
        ServedStoreOptions(*plan.served_store, config), linger, heartbeat_timeout,
        FreePortHint(config));
    backend->hosted_store_load = [server = backend->rendezvous_store.get()] {
      return std::optional(server->Load());
    };
  }
  backend->rendezvous = std::make_unique<rendezvous::StaticRendezvous>(
      RendezvousOptions(plan, spec, settings),
      TcpStoreConnector(plan.agent_store->host, plan.agent_store->port.value_or(0),
                        milliseconds{60'000}, settings.auth));
  backend->monitor = std::make_unique<NodeMonitor>(io, MonitorOptions(plan, settings));
  backend->blocking = true;
  backend->agent_options.shutdown_timeout = config.shutdown_timeout;
  backend->agent_options.failure_barrier_timeout = settings.HeartbeatTimeout();
  return backend;
}

}  // namespace ddprun::launcher::backend
