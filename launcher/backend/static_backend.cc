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

std::string StoreHost(const elastic::LaunchConfig& config) {
  return config.node_rank == 0 ? "127.0.0.1" : config.master_addr;
}

rendezvous::StaticRendezvousOptions RendezvousOptions(const elastic::LaunchConfig& config,
                                                      const elastic::WorkerSpec& spec,
                                                      const elastic::RendezvousSettings& settings) {
  rendezvous::StaticRendezvousOptions options;
  options.run_id = config.rdzv_id;
  options.node_rank = config.node_rank;
  options.num_nodes = config.max_nodes;
  options.master_addr = config.master_addr;
  options.master_port = config.master_port;
  options.host = spec.hostname;
  options.join_timeout = settings.join_timeout;
  options.on_progress = MakeJoinProgressPrinter(::isatty(STDERR_FILENO) == 1);
  if (settings.auth) {  // PyTorch clients cannot authenticate: the workers serve their own store
    options.pick_worker_port = [bind = settings.store_bind.value_or("")] {
      return PickFreePort(bind);
    };
  }
  return options;
}

NodeMonitorOptions MonitorOptions(const elastic::LaunchConfig& config,
                                  const elastic::RendezvousSettings& settings) {
  NodeMonitorOptions options;
  options.store_host = StoreHost(config);
  options.store_port = config.master_port;
  options.run_id = config.rdzv_id;
  options.interval = settings.keep_alive_interval;
  options.max_attempts = settings.keep_alive_max_attempt;
  options.auth = settings.auth;
  return options;
}

}  // namespace

bool IsMultiNode(const elastic::LaunchConfig& config) {
  return !config.standalone && config.max_nodes > 1;
}

std::unique_ptr<LaunchBackend> MakeStaticBackend(asio::io_context& io,
                                                 const elastic::LaunchConfig& config,
                                                 const elastic::WorkerSpec& spec) {
  const elastic::RendezvousSettings& settings = config.rdzv_settings;
  auto backend = std::make_unique<LaunchBackend>();
  if (config.node_rank == 0) {
    // Live peers beat every keep_alive_interval, so a connection quiet for the heartbeat timeout
    // belongs to a lost node and is not waited for.
    const auto heartbeat_timeout = settings.HeartbeatTimeout();
    const auto linger = std::max(std::chrono::milliseconds{10'000}, heartbeat_timeout);
    backend->rendezvous_store =
        std::make_unique<StoreServerThread>(ServedStoreOptions(config, config.master_port), linger,
                                            heartbeat_timeout, FreePortHint(config));
  }
  backend->rendezvous = std::make_unique<rendezvous::StaticRendezvous>(
      RendezvousOptions(config, spec, settings),
      TcpStoreConnector(StoreHost(config), config.master_port, milliseconds{60'000},
                        settings.auth));
  backend->monitor = std::make_unique<NodeMonitor>(io, MonitorOptions(config, settings));
  backend->blocking = true;
  backend->agent_options.shutdown_timeout = config.shutdown_timeout;
  backend->agent_options.failure_barrier_timeout = settings.HeartbeatTimeout();
  return backend;
}

}  // namespace ddprun::launcher::backend
