#include "launcher/launch_backend.h"

#include "launcher/elastic_backend.h"
#include "launcher/hosted_store.h"
#include "launcher/static_backend.h"
#include "rendezvous/tcp_store_client.h"

namespace ddprun::launcher {

rendezvous::StoreConnector TcpStoreConnector(std::string host, int port,
                                             std::chrono::milliseconds reply_timeout) {
  return [host = std::move(host), port,
          reply_timeout](std::chrono::milliseconds timeout) -> std::shared_ptr<rendezvous::Store> {
    rendezvous::ClientOptions options;
    options.host = host;
    options.port = port;
    options.timeout = reply_timeout;
    options.connect_timeout = timeout;
    return std::make_shared<rendezvous::TcpStoreClient>(options);
  };
}

std::unique_ptr<LaunchBackend> MakeBackend(asio::io_context& io,
                                           const elastic::LaunchConfig& config,
                                           const elastic::WorkerSpec& spec) {
  if (config.Elastic()) return MakeElasticBackend(io, config, spec);
  if (IsMultiNode(config)) return MakeStaticBackend(io, config, spec);
  auto backend = std::make_unique<LaunchBackend>();
  backend->rendezvous = std::make_unique<HostedStoreRendezvous>(io, config);
  backend->agent_options.shutdown_timeout = config.shutdown_timeout;
  return backend;
}

}  // namespace ddprun::launcher
