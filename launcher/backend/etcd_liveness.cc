#include "launcher/backend/etcd_liveness.h"

#include <algorithm>

#include "store/etcd/etcd_v3.h"

namespace ddprun::launcher::backend {

EtcdLease::EtcdLease(const store::etcd::EtcdClientOptions& options, std::chrono::seconds ttl)
    : options_(options), client_(options), ttl_(ttl) {
  id_ = store::etcd::ParseLease(
            client_.Call("/v3/lease/grant", store::etcd::LeaseGrantBody(ttl.count())))
            .id;
}

void EtcdLease::Put(const std::string& key, const std::string& value) {
  store::etcd::ParsePut(client_.Call("/v3/kv/put", store::etcd::PutBody(key, value, id_)));
}

void EtcdLease::KeepAlive() { KeepAlive(client_); }

void EtcdLease::KeepAlive(store::etcd::EtcdClient& client) {
  if (store::etcd::ParseLease(
          client.Call("/v3/lease/keepalive", store::etcd::LeaseKeepAliveBody(id_)))
          .ttl <= 0) {
    throw store::StoreConnectionError(
        "this node's etcd lease expired: it was cut off from etcd for "
        "longer than its TTL (" +
        std::to_string(ttl_.count()) + " s)");
  }
}

LeaseKeeper::LeaseKeeper(EtcdLease& lease, std::chrono::milliseconds every,
                         std::function<void(const std::string&)> on_lost, Clock& clock)
    : lease_(lease),
      every_(every),
      clock_(clock),
      pause_(clock),
      renewals_(lease.Ttl(), clock.Now()),
      on_lost_(std::move(on_lost)) {
  for (const HostPort& member : lease_.Options().endpoints) {
    store::etcd::EtcdClientOptions pinned = lease_.Options();
    pinned.endpoints = {member};
    pinned.patience = std::chrono::milliseconds{0};  // the next renewal is the retry
    clients_.push_back(std::make_unique<store::etcd::EtcdClient>(pinned));
  }
  const auto start = clock_.Now();
  const auto members = static_cast<int>(clients_.size());
  for (int i = 0; i < members; ++i) {
    const auto first = rendezvous::FirstRenewal(start, every_, i, members);
    threads_.emplace_back([this, client = clients_[i].get(), first] { Renew(*client, first); });
  }
}

LeaseKeeper::~LeaseKeeper() {
  pause_.Cancel();
  for (auto& client : clients_) client->Interrupt();
  for (auto& thread : threads_) thread.join();
}

void LeaseKeeper::Renew(store::etcd::EtcdClient& client, Clock::TimePoint next) {
  const auto left = [this](Clock::TimePoint at) {
    return std::max(std::chrono::ceil<std::chrono::milliseconds>(at - clock_.Now()),
                    std::chrono::milliseconds{0});
  };
  while (pause_.Pause(left(next))) {
    next = rendezvous::NextRenewal(next, every_, clock_.Now());
    try {
      lease_.KeepAlive(client);
      std::lock_guard lock(mutex_);
      renewals_.Renewed(clock_.Now());
    } catch (const store::etcd::EtcdUnavailable&) {  // this member did not answer: others may
    } catch (const store::StoreConnectionError& expired) {  // etcd answered: it is gone
      {
        std::lock_guard lock(mutex_);
        renewals_.Expired(expired.what());
      }
      TellIfLost();
      return;
    } catch (const std::exception&) {  // an odd reply from this member: the next renewal
    }
    TellIfLost();
  }
}

void LeaseKeeper::TellIfLost() {
  std::string why;
  {
    std::lock_guard lock(mutex_);
    if (!on_lost_ || told_) return;
    why = renewals_.Lost(clock_.Now());
    if (why.empty()) return;
    told_ = true;
  }
  on_lost_(why);
}

void LeaseKeeper::Check() {
  std::lock_guard lock(mutex_);
  const std::string why = renewals_.Lost(clock_.Now());
  if (!why.empty()) throw store::StoreConnectionError(why);
}

LeaseLiveness::LeaseLiveness(rendezvous::LivenessScope scope,
                             const store::etcd::EtcdStoreOptions& etcd,
                             rendezvous::MemberLiveness::TimePoint start)
    : scope_(std::move(scope)),
      lease_(etcd.client, rendezvous::LeaseTtl(scope_.timeout)),
      neighbour_(scope_.timeout, start) {
  lease_.Put(etcd.prefix + scope_.keys.Alive(scope_.round, scope_.me), std::to_string(lease_.Id()));
  keeper_ = std::make_unique<LeaseKeeper>(lease_, rendezvous::LeaseRenewalPeriod(lease_.Ttl()),
                                          scope_.on_lost, *scope_.clock);
}

bool LeaseLiveness::NeighbourGone(rendezvous::MemberLiveness::TimePoint now) {
  const std::string key = scope_.keys.Alive(scope_.round, scope_.neighbour);
  return neighbour_.Observe(scope_.store->Check({key}), now);
}

std::string LeaseLiveness::WhyGone(rendezvous::MemberLiveness::TimePoint now) const {
  return neighbour_.WhyGone(now, lease_.Ttl());
}

}  // namespace ddprun::launcher::backend
