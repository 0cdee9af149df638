#include "launcher/backend/master_endpoint.h"

#include <arpa/inet.h>
#include <netdb.h>

#include "common/hostname.h"

namespace ddprun::launcher::backend {
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

}  // namespace

namespace {

StoreEndpoint Endpoint(std::string host, int port, std::string master_addr) {
  StoreEndpoint endpoint;
  endpoint.server.host = std::move(host);
  endpoint.server.port = port;
  endpoint.master_addr = std::move(master_addr);
  return endpoint;
}

// Without --rdzv_conf store_bind.
StoreEndpoint DefaultSingleNodeEndpoint(const elastic::LaunchConfig& config) {
  if (config.rdzv_backend == "static" && !config.standalone) {
    return Endpoint("", config.master_port, config.master_addr);
  }
  const std::string advertised = config.local_addr.value_or(Fqdn());
  if (!config.standalone) return Endpoint("", 0, advertised);
  const bool loopback = ResolvesToIpv4LoopbackOnly(advertised);
  return Endpoint("127.0.0.1", 0, loopback ? advertised : "127.0.0.1");
}

}  // namespace

// store_bind replaces the bound address; one that is not every interface is also what the
// workers reach.
StoreEndpoint SingleNodeStoreEndpoint(const elastic::LaunchConfig& config) {
  StoreEndpoint endpoint = DefaultSingleNodeEndpoint(config);
  const auto& bind = config.rdzv_settings.store_bind;
  if (!bind) return endpoint;
  endpoint.server.host = *bind;
  if (*bind != "::" && *bind != "0.0.0.0") endpoint.master_addr = *bind;
  return endpoint;
}

std::string FreePortHint(const elastic::LaunchConfig& config) {
  if (config.rdzv_backend == "static" && config.given_as.contains("rdzv_endpoint")) {
    return "pass a free port in " + config.GivenAs("rdzv_endpoint");
  }
  return "pass a free " + config.GivenAs("master_port");
}

}  // namespace ddprun::launcher::backend
