#include "launcher/backend/etcd_store_site.h"

#include <algorithm>

#include "launcher/backend/tcp_store_site.h"

namespace ddprun::launcher::backend {

rendezvous::Reach EtcdStoreSite::Probe(const HostPort& at, std::chrono::milliseconds timeout) {
  return ProbeTcp(at, timeout);
}

store::etcd::EtcdStoreOptions EtcdStoreSite::StoreOptions(const HostPort& first) const {
  store::etcd::EtcdStoreOptions options = options_;
  auto& members = options.client.endpoints;
  const auto it = std::find(members.begin(), members.end(), first);
  if (it != members.end()) std::rotate(members.begin(), it, members.end());
  return options;
}

// The timeout is the client's per-request one: no connection is opened before the first call.
std::shared_ptr<store::Store> EtcdStoreSite::Connect(const HostPort& at,
                                                     std::chrono::milliseconds) {
  return std::make_shared<store::etcd::EtcdStore>(StoreOptions(at));
}

}  // namespace ddprun::launcher::backend
