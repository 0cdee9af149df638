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
    : client_(options), ttl_(ttl) {
  id_ = store::etcd::ParseLease(client_.Call("/v3/lease/grant", store::etcd::LeaseGrantBody(ttl.count()))).id;
}

void EtcdLease::Put(const std::string& key, const std::string& value) {
  store::etcd::ParsePut(client_.Call("/v3/kv/put", store::etcd::PutBody(key, value, id_)));
}

void EtcdLease::KeepAlive() {
  if (store::etcd::ParseLease(client_.Call("/v3/lease/keepalive", store::etcd::LeaseKeepAliveBody(id_))).ttl <= 0) {
    throw store::StoreConnectionError("this node's etcd lease expired: it was cut off from etcd for "
                               "longer than its TTL (" + std::to_string(ttl_.count()) + " s)");
  }
}

LeaseLiveness::LeaseLiveness(rendezvous::LivenessScope scope, const store::etcd::EtcdStoreOptions& etcd, rendezvous::MemberLiveness::TimePoint start)
    : scope_(std::move(scope)), lease_(etcd.client, LeaseTtl(scope_.timeout)), start_(start) {
  lease_.Put(etcd.prefix + AliveKey(scope_.me), std::to_string(lease_.Id()));
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
