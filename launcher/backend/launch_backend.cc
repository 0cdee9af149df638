#include "launcher/backend/launch_backend.h"

#include "common/logging.h"
#include "launcher/backend/elastic_backend.h"
#include "launcher/backend/hosted_store.h"
#include "launcher/backend/static_backend.h"
#include "store/tcp_store_client.h"

namespace ddprun::launcher::backend {

rendezvous::StoreConnector TcpStoreConnector(std::string host, int port,
                                             std::chrono::milliseconds reply_timeout,
                                             std::shared_ptr<const store::AuthKey> auth) {
  return [host = std::move(host), port, reply_timeout, auth = std::move(auth)](
             std::chrono::milliseconds timeout) -> std::shared_ptr<store::Store> {
    store::ClientOptions options;
    options.host = host;
    options.port = port;
    options.timeout = reply_timeout;
    options.connect_timeout = timeout;
    options.auth = auth;
    return std::make_shared<store::TcpStoreClient>(options);
  };
}

store::ServerOptions ServedStoreOptions(const ServedStore& served, const LaunchPlan& plan) {
  store::ServerOptions options;
  options.host = served.bind;
  options.port = served.port;
  options.auth = plan.auth;
  return options;
}

std::unique_ptr<LaunchBackend> MakeBackend(asio::io_context& io, const LaunchPlan& plan,
                                           const elastic::WorkerSpec& spec) {
  switch (plan.kind) {
    case LaunchKind::kElastic:
      return MakeElasticBackend(io, plan, spec);
    case LaunchKind::kStatic:
      return MakeStaticBackend(io, plan);
    case LaunchKind::kSingleNode:
      break;
  }
  if (plan.unused_token_note) spdlog::info("{}", *plan.unused_token_note);
  auto backend = std::make_unique<LaunchBackend>();
  backend->rendezvous = std::make_unique<HostedStoreRendezvous>(io, plan);
  backend->agent_options.shutdown_timeout = plan.timeouts.shutdown;
  return backend;
}

}  // namespace ddprun::launcher::backend
