#include "launcher/launch_backend.h"

#include "launcher/elastic_backend.h"
#include "launcher/hosted_store.h"
#include "launcher/static_backend.h"

namespace ddprun::launcher {

std::unique_ptr<LaunchBackend> MakeBackend(asio::io_context& io, const elastic::LaunchConfig& config,
                                           const elastic::WorkerSpec& spec) {
  if (IsElastic(config)) return MakeElasticBackend(io, config, spec);
  if (IsMultiNode(config)) return MakeStaticBackend(io, config, spec);
  auto backend = std::make_unique<LaunchBackend>();
  backend->rendezvous = std::make_unique<HostedStoreRendezvous>(io, config);
  backend->agent_options.shutdown_timeout = config.shutdown_timeout;
  return backend;
}

}  // namespace ddprun::launcher
