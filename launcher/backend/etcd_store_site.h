// The StoreSite of the etcd backend: the rendezvous store is the etcd cluster, which replicates
// itself, so it is never served here and never moves (ElasticHandlerOptions::replicated_store).
// Connect(at) is an EtcdStore of every member, `at` tried first (a member lost later is failed
// over by the client); Probe is a TCP probe of one member. Each Connect has its own HTTP
// connection, as each TcpStoreClient has its own socket.
#pragma once
#include <chrono>
#include <memory>

#include "common/clock.h"
#include "rendezvous/store_failover.h"
#include "store/etcd/etcd_store.h"

namespace ddprun::launcher::backend {

class EtcdStoreSite : public rendezvous::StoreSite {
 public:
  explicit EtcdStoreSite(store::etcd::EtcdStoreOptions options, Clock& clock = RealClock())
      : StoreSite(clock), options_(std::move(options)) {}

  rendezvous::Reach Probe(const HostPort& at, std::chrono::milliseconds timeout) override;
  std::shared_ptr<store::Store> Connect(const HostPort& at,
                                        std::chrono::milliseconds timeout) override;
  std::optional<HostPort> Serve(int) override { return std::nullopt; }

  // The options of an EtcdStore with `first` tried first.
  store::etcd::EtcdStoreOptions StoreOptions(const HostPort& first) const;

 private:
  store::etcd::EtcdStoreOptions options_;
};

}  // namespace ddprun::launcher::backend
