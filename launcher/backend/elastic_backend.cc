#include "launcher/backend/elastic_backend.h"

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
#include "launcher/backend/elastic_monitor.h"
#include "launcher/backend/etcd_store_site.h"
#include "launcher/backend/free_port.h"
#include "launcher/backend/tcp_store_site.h"
#include "launcher/backend/etcd_liveness.h"

namespace ddprun::launcher::backend {
namespace {

using std::chrono::milliseconds;
constexpr int kDefaultC10dPort = 29400;
constexpr int kDefaultEtcdPort = 2379;

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

// Serves each round's worker store on a thread of its own, on an ephemeral port of `host`.
class ThreadWorkerStoreHost : public rendezvous::WorkerStoreHost {
 public:
  explicit ThreadWorkerStoreHost(std::string host) : host_(std::move(host)) {}
  int Serve() override {
    server_.reset();
    store::ServerOptions options;
    options.host = host_;
    server_ = std::make_unique<StoreServerThread>(options);
    return server_->Port();
  }
  void Stop() override { server_.reset(); }

 private:
  std::string host_;
  std::unique_ptr<StoreServerThread> server_;
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
  options.close_timeout = config.rdzv_settings.close_timeout;
  options.on_waiting = [](const std::string& line) { spdlog::warn("{}", line); };
  return options;
}

}  // namespace

std::vector<HostPort> RendezvousEndpoints(const elastic::LaunchConfig& config) {
  std::vector<HostPort> endpoints =
      ParseHostPortList(config.rdzv_endpoint, config.GivenAs("rdzv_endpoint"));
  const int port = config.Etcd() ? kDefaultEtcdPort : kDefaultC10dPort;
  for (HostPort& endpoint : endpoints) endpoint.port = endpoint.port.value_or(port);
  return endpoints;
}

std::optional<std::string> EtcdV2Note(const elastic::LaunchConfig& config) {
  if (!config.Etcd() || config.rdzv_backend != "etcd-v2") return std::nullopt;
  return config.Given("rdzv_backend", config.rdzv_backend) +
         ": ddprun speaks etcd's v3 API (the v2 API is off by default since etcd 3.4); the "
         "rendezvous is etcd's";
}

store::etcd::EtcdStoreOptions EtcdOptions(const elastic::LaunchConfig& config) {
  const auto& settings = config.rdzv_settings;
  store::etcd::EtcdStoreOptions options;
  options.client.endpoints = RendezvousEndpoints(config);
  // Short enough that a member that went silent costs a heartbeat less than its timeout before
  // the client fails over to the next; never above read_timeout.
  options.client.timeout = std::min(settings.read_timeout,
                                    std::max(milliseconds{1'000}, settings.HeartbeatTimeout() / 2));
  // An outage shorter than the heartbeat timeout, and at least 5 s (a leader election after the
  // leader member's loss, slower on a loaded machine), is waited out: leases survive it (only a
  // leader expires them, and a new one renews them all), so nothing notices. Never beyond
  // read_timeout, within which a wrong endpoint must fail.
  options.client.patience =
      std::min(settings.read_timeout, std::max(settings.HeartbeatTimeout(), milliseconds{5'000}));
  if (settings.etcd_tls) {
    options.client.tls =
        store::etcd::EtcdTls{settings.etcd_cacert, settings.etcd_cert, settings.etcd_key};
  }
  options.prefix = settings.etcd_prefix;
  return options;
}

bool ServesRendezvousStore(const elastic::LaunchConfig& config) {
  if (config.Etcd()) return false;
  const HostPort endpoint = RendezvousEndpoints(config).front();
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

namespace {

std::unique_ptr<rendezvous::StoreSite> MakeStoreSite(const elastic::LaunchConfig& config,
                                                     const LaunchPlan& plan) {
  if (plan.etcd) return std::make_unique<EtcdStoreSite>(*plan.etcd);
  const auto& settings = config.rdzv_settings;
  return std::make_unique<TcpStoreSite>(TcpStoreSiteOptions{
      settings.read_timeout,
      ServedStoreOptions(ServedStore{plan.store_bind.value_or(""), 0}, config),
      std::max(milliseconds{10'000}, settings.HeartbeatTimeout()), settings.HeartbeatTimeout()});
}

// How the round's watch connects to wherever the round's store is: etcd through the site; a
// c10d store (it moves when lost) with replies later than the heartbeat timeout meaning lost.
rendezvous::StoreConnector RoundStoreConnector(const elastic::LaunchConfig& config,
                                               const LaunchPlan& plan, rendezvous::StoreSite& site,
                                               const rendezvous::ElasticRendezvousHandler& handler) {
  if (plan.etcd) {
    return [&site, &handler](milliseconds timeout) {
      return site.Connect(handler.StoreAddress(), timeout);
    };
  }
  return [&handler, reply_timeout = config.rdzv_settings.HeartbeatTimeout(),
          auth = config.rdzv_settings.auth](milliseconds timeout) {
    const HostPort at = handler.StoreAddress();
    return TcpStoreConnector(at.host, at.port.value_or(kDefaultC10dPort), reply_timeout,
                             auth)(timeout);
  };
}

rendezvous::ElasticHandlerOptions HandlerOptions(const elastic::LaunchConfig& config,
                                                 const LaunchPlan& plan,
                                                 const elastic::WorkerSpec& spec) {
  rendezvous::ElasticHandlerOptions handler;
  handler.rendezvous = RendezvousOptions(config, spec);
  handler.advertised_addr = handler.rendezvous.node.addr;
  handler.read_timeout = config.rdzv_settings.read_timeout;
  handler.endpoints = plan.rendezvous_endpoints;
  handler.serve_first = plan.serves_rendezvous_store;
  handler.replicated_store = plan.etcd.has_value();
  handler.failover.run_id = plan.run_id;
  handler.failover.port = handler.endpoints.front().port.value_or(kDefaultC10dPort);
  handler.failover.window = config.rdzv_settings.HeartbeatTimeout();
  handler.failover.relocate_check = config.rdzv_settings.keep_alive_interval;
  return handler;
}

}  // namespace

std::unique_ptr<LaunchBackend> MakeElasticBackend(asio::io_context& io,
                                                  const elastic::LaunchConfig& config,
                                                  const LaunchPlan& plan,
                                                  const elastic::WorkerSpec& spec) {
  const auto& settings = config.rdzv_settings;
  auto backend = std::make_unique<LaunchBackend>();
  const std::string bind = plan.store_bind.value_or("");
  if (!plan.first_round.use_agent_store) {  // authenticated: the workers serve their own
    backend->worker_store = std::make_unique<OwnWorkerStore>(bind);
  } else {
    backend->worker_store = std::make_unique<ThreadWorkerStoreHost>(bind);
  }
  const rendezvous::ElasticHandlerOptions handler = HandlerOptions(config, plan, spec);
  backend->store_site = MakeStoreSite(config, plan);
  if (auto* tcp = dynamic_cast<TcpStoreSite*>(backend->store_site.get())) {
    backend->hosted_store_load = [tcp] { return tcp->ServedLoad(); };
  }
  auto rendezvous = std::make_unique<rendezvous::ElasticRendezvousHandler>(
      handler, *backend->store_site, *backend->worker_store);
  rendezvous::StoreConnector connect_round_store =
      RoundStoreConnector(config, plan, *backend->store_site, *rendezvous);
  backend->rendezvous = std::move(rendezvous);
  ElasticMonitorOptions monitor{handler.rendezvous, std::move(connect_round_store),
                                settings.keep_alive_interval, settings.keep_alive_max_attempt, {}};
  if (plan.etcd) {
    monitor.liveness = [etcd = *plan.etcd](const rendezvous::LivenessScope& scope,
                                           rendezvous::MemberLiveness::TimePoint start) {
      return std::make_unique<LeaseLiveness>(scope, etcd, start);
    };
  }
  backend->monitor = std::make_unique<ElasticMonitor>(io, std::move(monitor));
  backend->blocking = true;
  backend->agent_options.shutdown_timeout = config.shutdown_timeout;
  backend->agent_options.failure_barrier_timeout = settings.HeartbeatTimeout();
  return backend;
}

}  // namespace ddprun::launcher::backend
