#include "launcher/backend/etcd_liveness.h"

#include <algorithm>

#include "common/duration.h"
#include "store/etcd/etcd_v3.h"

namespace ddprun::launcher::backend {

std::chrono::seconds LeaseTtl(std::chrono::milliseconds timeout) {
  const auto seconds = std::chrono::ceil<std::chrono::seconds>(timeout);
  return std::max(seconds, std::chrono::seconds{2});
}

EtcdLease::EtcdLease(const store::etcd::EtcdClientOptions& options, std::chrono::seconds ttl)
    : options_(options), client_(options), ttl_(ttl) {
  id_ = store::etcd::ParseLease(client_.Call("/v3/lease/grant", store::etcd::LeaseGrantBody(ttl.count()))).id;
}

void EtcdLease::Put(const std::string& key, const std::string& value) {
  store::etcd::ParsePut(client_.Call("/v3/kv/put", store::etcd::PutBody(key, value, id_)));
}

void EtcdLease::KeepAlive() { KeepAlive(client_); }

void EtcdLease::KeepAlive(store::etcd::EtcdClient& client) {
  if (store::etcd::ParseLease(client.Call("/v3/lease/keepalive", store::etcd::LeaseKeepAliveBody(id_))).ttl <= 0) {
    throw store::StoreConnectionError("this node's etcd lease expired: it was cut off from etcd for "
                               "longer than its TTL (" + std::to_string(ttl_.count()) + " s)");
  }
}

LeaseKeeper::LeaseKeeper(EtcdLease& lease, std::chrono::milliseconds every,
                         std::function<void(const std::string&)> on_lost)
    : lease_(lease),
      every_(every),
      renewed_(std::chrono::steady_clock::now()),
      on_lost_(std::move(on_lost)) {
  for (const HostPort& member : lease_.Options().endpoints) {
    store::etcd::EtcdClientOptions pinned = lease_.Options();
    pinned.endpoints = {member};
    pinned.patience = std::chrono::milliseconds{0};  // the next renewal is the retry
    clients_.push_back(std::make_unique<store::etcd::EtcdClient>(pinned));
  }
  const auto start = std::chrono::steady_clock::now();
  const auto members = static_cast<int>(clients_.size());
  for (int i = 0; i < members; ++i) {
    const auto first = start + every_ * i / members;
    threads_.emplace_back([this, client = clients_[i].get(), first] { Renew(*client, first); });
  }
}

LeaseKeeper::~LeaseKeeper() {
  pause_.Cancel();
  for (auto& client : clients_) client->Interrupt();
  for (auto& thread : threads_) thread.join();
}

void LeaseKeeper::Renew(store::etcd::EtcdClient& client,
                        std::chrono::steady_clock::time_point next) {
  using std::chrono::steady_clock;
  const auto left = [](steady_clock::time_point at) {
    return std::max(std::chrono::ceil<std::chrono::milliseconds>(at - steady_clock::now()),
                    std::chrono::milliseconds{0});
  };
  while (pause_.Pause(left(next))) {
    next = std::max(next + every_, steady_clock::now());  // one that hung: the next at once
    try {
      lease_.KeepAlive(client);
      std::lock_guard lock(mutex_);
      renewed_ = std::max(renewed_, std::chrono::steady_clock::now());
    } catch (const store::etcd::EtcdUnavailable&) {  // this member did not answer: others may
    } catch (const store::StoreConnectionError& expired) {  // etcd answered: it is gone
      {
        std::lock_guard lock(mutex_);
        if (expired_.empty()) expired_ = expired.what();
      }
      TellIfLost();
      return;
    } catch (const std::exception&) {  // an odd reply from this member: the next renewal
    }
    TellIfLost();
  }
}

std::string LeaseKeeper::LostLocked() const {
  if (!expired_.empty()) return expired_;
  const auto silent = std::chrono::steady_clock::now() - renewed_;
  if (silent <= lease_.Ttl()) return "";
  return "this node's etcd lease expired: no etcd member renewed it for " +
         DurationText(std::chrono::duration_cast<std::chrono::milliseconds>(silent), 1) +
         ", longer than its TTL (" + std::to_string(lease_.Ttl().count()) + " s)";
}

void LeaseKeeper::TellIfLost() {
  std::string why;
  {
    std::lock_guard lock(mutex_);
    if (!on_lost_ || told_) return;
    why = LostLocked();
    if (why.empty()) return;
    told_ = true;
  }
  on_lost_(why);
}

void LeaseKeeper::Check() {
  std::lock_guard lock(mutex_);
  const std::string why = LostLocked();
  if (!why.empty()) throw store::StoreConnectionError(why);
}

LeaseLiveness::LeaseLiveness(rendezvous::LivenessScope scope, const store::etcd::EtcdStoreOptions& etcd, rendezvous::MemberLiveness::TimePoint start)
    : scope_(std::move(scope)), lease_(etcd.client, LeaseTtl(scope_.timeout)), start_(start) {
  lease_.Put(etcd.prefix + AliveKey(scope_.me), std::to_string(lease_.Id()));
  const auto ttl = std::chrono::duration_cast<std::chrono::milliseconds>(lease_.Ttl());
  keeper_ = std::make_unique<LeaseKeeper>(lease_, std::max(ttl / 3, std::chrono::milliseconds{100}),
                                          scope_.on_lost);
}

std::string LeaseLiveness::AliveKey(int group_rank) const {
  return scope_.keys.Round(scope_.round, "alive/" + std::to_string(group_rank));
}

bool LeaseLiveness::NeighbourGone(rendezvous::MemberLiveness::TimePoint now) {
  if (scope_.store->Check({AliveKey(scope_.neighbour)})) {
    seen_ = true;
    return false;
  }
  return seen_ || now - start_ >= scope_.timeout;
}

std::string LeaseLiveness::WhyGone(rendezvous::MemberLiveness::TimePoint now) const {
  if (seen_) {
    return "its etcd lease (TTL " + std::to_string(lease_.Ttl().count()) +
           " s) expired: it stopped keeping it alive";
  }
  return "it did not show itself alive in " +
         DurationText(std::chrono::duration_cast<std::chrono::milliseconds>(now - start_), 1);
}

}  // namespace ddprun::launcher::backend
