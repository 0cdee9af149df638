#include "launcher/backend/static_backend.h"

#include <unistd.h>

#include <memory>

#include "common/logging.h"
#include "launcher/backend/free_port.h"
#include "launcher/backend/join_progress.h"
#include "launcher/backend/node_monitor.h"
#include "rendezvous/static_rendezvous.h"
#include "store/store_server_thread.h"

namespace ddprun::launcher::backend {
namespace {

rendezvous::StaticRendezvousOptions RendezvousOptions(const LaunchPlan& plan) {
  rendezvous::StaticRendezvousOptions options;
  options.run_id = plan.run_id;
  options.node_rank = plan.first_round.group_rank;
  options.num_nodes = plan.first_round.group_world_size;
  options.master_addr = plan.first_round.master_addr;
  options.master_port = plan.first_round.master_port;
  options.host = plan.node.hostname;
  options.join_timeout = plan.timeouts.join;
  options.on_progress = MakeJoinProgressPrinter(::isatty(STDERR_FILENO) == 1);
  if (!plan.first_round.use_agent_store) {  // authenticated: PyTorch clients cannot join
    options.pick_worker_port = [bind = plan.store_bind.value_or("")] { return PickFreePort(bind); };
  }
  return options;
}

NodeMonitorOptions MonitorOptions(const LaunchPlan& plan) {
  NodeMonitorOptions options;
  options.store_host = plan.agent_store->host;
  options.store_port = plan.agent_store->port.value_or(0);
  options.run_id = plan.run_id;
  options.interval = plan.timeouts.keep_alive;
  options.max_attempts = plan.timeouts.keep_alive_max_attempt;
  options.auth = plan.auth;
  return options;
}

}  // namespace

std::unique_ptr<LaunchBackend> MakeStaticBackend(asio::io_context& io, const LaunchPlan& plan) {
  const LaunchTimeouts& timeouts = plan.timeouts;
  auto backend = std::make_unique<LaunchBackend>();
  if (plan.served_store) {  // node 0
    backend->rendezvous_store = std::make_unique<store::StoreServerThread>(
        ServedStoreOptions(*plan.served_store, plan),
        store::StoreThreadOptions{timeouts.linger, timeouts.heartbeat, plan.free_port_hint, true});
    backend->hosted_store_load = [server = backend->rendezvous_store.get()] {
      return std::optional(server->Load());
    };
  }
  backend->rendezvous = std::make_unique<rendezvous::StaticRendezvous>(
      RendezvousOptions(plan),
      TcpStoreConnector(plan.agent_store->host, plan.agent_store->port.value_or(0),
                        timeouts.agent_store_reply, plan.auth));
  backend->monitor = std::make_unique<NodeMonitor>(io, MonitorOptions(plan));
  backend->blocking = true;
  backend->agent_options.shutdown_timeout = timeouts.shutdown;
  backend->agent_options.failure_barrier_timeout = timeouts.failure_barrier;
  return backend;
}

}  // namespace ddprun::launcher::backend
