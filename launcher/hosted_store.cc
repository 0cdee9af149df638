#include "launcher/hosted_store.h"

#include <arpa/inet.h>
#include <netdb.h>

#include "common/errors.h"
#include "common/hostname.h"
#include "common/logging.h"

namespace ddprun::launcher {
namespace {

// True when every address `name` resolves to is an IPv4 loopback address (127.0.0.0/8), so
// that a store listening on 127.0.0.1 is reachable through that name.
bool ResolvesToIpv4LoopbackOnly(const std::string& name) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return false;
  bool loopback_only = true;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(entry->ai_addr);
    loopback_only = loopback_only && entry->ai_family == AF_INET &&
                    (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  ::freeaddrinfo(found);
  return loopback_only;
}

struct StoreEndpoint {
  rendezvous::ServerOptions server;
  std::string master_addr;
};

// Static: --master_addr:--master_port on every interface, as torchrun's agent store. c10d on
// one node: an ephemeral port and this host's --local_addr or FQDN, as torchrun's shared
// store. --standalone keeps the store on loopback: MASTER_ADDR is the FQDN when that resolves
// to 127.0.0.0/8 only (as torchrun's value on such hosts), else 127.0.0.1.
StoreEndpoint EndpointFor(const elastic::LaunchConfig& config) {
  if (config.rdzv_backend == "static" && !config.standalone) {
    return {{"", config.master_port.value_or(29500), {}}, config.master_addr};
  }
  const std::string advertised = config.local_addr.value_or(Fqdn());
  if (!config.standalone) return {{"", 0, {}}, advertised};
  const bool loopback = ResolvesToIpv4LoopbackOnly(advertised);
  return {{"127.0.0.1", 0, {}}, loopback ? advertised : "127.0.0.1"};
}

}  // namespace

HostedStoreRendezvous::HostedStoreRendezvous(asio::io_context& io,
                                             const elastic::LaunchConfig& config)
    : run_id_(config.rdzv_id) {
  const StoreEndpoint endpoint = EndpointFor(config);
  const rendezvous::ServerOptions& options = endpoint.server;
  try {
    server_ = std::make_unique<rendezvous::TcpStoreServer>(io, options);
  } catch (const SystemError& error) {
    throw UsageError(std::string(error.what()) + "; pass a free --master_port");
  }
  info_.master_addr = endpoint.master_addr;
  info_.master_port = server_->Port();
  info_.use_agent_store = true;
  spdlog::info("agent store listening on {}:{}", options.host.empty() ? "*" : options.host,
               info_.master_port);
}

rendezvous::RendezvousInfo HostedStoreRendezvous::NextRendezvous() {
  if (closed_) throw rendezvous::RendezvousClosedError("the rendezvous '" + run_id_ + "' is closed");
  if (round_ > 0) {
    auto& keys = server_->Keys();
    for (const auto& key : keys.ListKeys()) keys.DeleteKey(key);
  }
  rendezvous::RendezvousInfo info = info_;
  info.round = round_++;
  return info;
}

void HostedStoreRendezvous::Shutdown() {
  closed_ = true;
  server_->Stop();
}

}  // namespace ddprun::launcher
