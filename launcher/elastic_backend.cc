#include "launcher/elastic_backend.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "common/errors.h"
#include "common/host_port.h"
#include "common/hostname.h"
#include "common/logging.h"
#include "launcher/elastic_monitor.h"

namespace ddprun::launcher {
namespace {

using std::chrono::milliseconds;
constexpr int kDefaultC10dPort = 29400;

std::string Numeric(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text,
                sizeof text);
  } else if (address->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text,
                sizeof text);
  }
  return text;
}

std::vector<std::string> InterfaceAddresses() {
  std::vector<std::string> addresses;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return addresses;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr != nullptr) addresses.push_back(Numeric(entry->ifa_addr));
  }
  ::freeifaddrs(list);
  return addresses;
}

std::vector<std::string> Resolve(const std::string& host) {
  std::vector<std::string> addresses;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return addresses;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    addresses.push_back(Numeric(entry->ai_addr));
  }
  ::freeaddrinfo(found);
  return addresses;
}

bool IsLoopback(const std::string& address) {
  return address.starts_with("127.") || address == "::1";
}

// Serves each round's worker store on a thread of its own, on an ephemeral port.
class ThreadWorkerStoreHost : public rendezvous::WorkerStoreHost {
 public:
  int Serve() override {
    server_.reset();
    server_ = std::make_unique<StoreServerThread>("", 0);
    return server_->Port();
  }
  void Stop() override { server_.reset(); }

 private:
  std::unique_ptr<StoreServerThread> server_;
};

// Serves the rendezvous store when this node is the endpoint's host; nullptr when another
// process already serves the port, or the endpoint is elsewhere.
std::unique_ptr<StoreServerThread> MaybeServeRendezvousStore(const elastic::LaunchConfig& config,
                                                             const HostPort& endpoint) {
  const auto& settings = config.rdzv_settings;
  if (!ServesRendezvousStore(config)) return nullptr;
  const int port = endpoint.port.value_or(kDefaultC10dPort);
  const auto linger = std::max(milliseconds{10'000}, settings.HeartbeatTimeout());
  try {
    return std::make_unique<StoreServerThread>("", port, linger, settings.HeartbeatTimeout());
  } catch (const UsageError& in_use) {
    spdlog::info("rendezvous store port {} is already served ({}); joining as a client", port,
                 in_use.what());
    return nullptr;
  }
}

rendezvous::DynamicRendezvousOptions RendezvousOptions(const elastic::LaunchConfig& config,
                                                       const elastic::WorkerSpec& spec) {
  rendezvous::DynamicRendezvousOptions options;
  options.run_id = config.rdzv_id;
  options.min_nodes = config.min_nodes;
  options.max_nodes = config.max_nodes;
  options.node = {spec.hostname, config.local_addr.value_or(Fqdn()), static_cast<int>(::getpid()),
                  spec.local_world_size};
  options.join_timeout = config.rdzv_settings.join_timeout;
  options.last_call_timeout = config.rdzv_settings.last_call_timeout;
  options.member_timeout =
      config.rdzv_settings.HeartbeatTimeout() + config.rdzv_settings.keep_alive_interval;
  options.keep_alive_interval = config.rdzv_settings.keep_alive_interval;
  options.keep_alive_max_attempt = config.rdzv_settings.keep_alive_max_attempt;
  return options;
}

}  // namespace

bool ServesRendezvousStore(const elastic::LaunchConfig& config) {
  const HostPort endpoint = ParseHostPort(config.rdzv_endpoint, config.GivenAs("rdzv_endpoint"));
  const std::vector<std::string> names{Hostname(), Fqdn(), config.local_addr.value_or("")};
  return config.rdzv_settings.is_host.value_or(
      NamesThisMachine(endpoint.host, names, InterfaceAddresses()));
}

bool NamesThisMachine(const std::string& host, const std::vector<std::string>& names,
                      const std::vector<std::string>& local_addresses) {
  if (host == "localhost" || IsLoopback(host)) return true;
  if (std::find(names.begin(), names.end(), host) != names.end()) return true;
  for (const std::string& address : Resolve(host)) {
    if (std::find(local_addresses.begin(), local_addresses.end(), address) !=
        local_addresses.end()) {
      return true;
    }
  }
  return false;
}

std::unique_ptr<LaunchBackend> MakeElasticBackend(asio::io_context& io,
                                                  const elastic::LaunchConfig& config,
                                                  const elastic::WorkerSpec& spec) {
  const auto& settings = config.rdzv_settings;
  const HostPort endpoint = ParseHostPort(config.rdzv_endpoint, config.GivenAs("rdzv_endpoint"));
  const int port = endpoint.port.value_or(kDefaultC10dPort);
  auto backend = std::make_unique<LaunchBackend>();
  backend->rendezvous_store = MaybeServeRendezvousStore(config, endpoint);
  const std::string store_host = backend->rendezvous_store ? "127.0.0.1" : endpoint.host;
  backend->worker_store = std::make_unique<ThreadWorkerStoreHost>();
  rendezvous::ElasticHandlerOptions handler;
  handler.rendezvous = RendezvousOptions(config, spec);
  handler.advertised_addr = handler.rendezvous.node.addr;
  handler.read_timeout = settings.read_timeout;
  backend->rendezvous = std::make_unique<rendezvous::ElasticRendezvousHandler>(
      handler, TcpStoreConnector(store_host, port, settings.read_timeout), *backend->worker_store);
  backend->monitor = std::make_unique<ElasticMonitor>(
      io,
      ElasticMonitorOptions{handler.rendezvous,
                            TcpStoreConnector(store_host, port, settings.HeartbeatTimeout() * 2),
                            settings.keep_alive_interval, settings.keep_alive_max_attempt});
  backend->blocking = true;
  backend->agent_options.shutdown_timeout = config.shutdown_timeout;
  backend->agent_options.failure_barrier_timeout = settings.HeartbeatTimeout();
  return backend;
}

}  // namespace ddprun::launcher
