// Node liveness on etcd (issue 14): each member of a round grants an etcd lease with a TTL of the
// heartbeat timeout (keep_alive_interval x keep_alive_max_attempt, whole seconds, at least 2),
// puts "<prefix>ddprun/rdzv/<run_id>/r<k>/alive/<group rank>" attached to it, and keeps the
// lease alive every interval. A member that dies or is cut off from etcd stops keeping it alive;
// etcd expires the lease and deletes the key, and the ring neighbour that sees the key gone
// declares the member lost. etcd renews every lease when its leader changes, so the loss of an
// etcd member does not expire anyone's. The lease is left to expire, not revoked, when the watch
// ends, so that an old round's watcher never sees a member of the next round vanish early.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_store.h"
#include "rendezvous/member_liveness.h"

namespace ddprun::launcher::backend {

// One etcd lease over a client of its own.
class EtcdLease {
 public:
  // Grants the lease; throws EtcdUnavailable / EtcdError.
  EtcdLease(const store::etcd::EtcdClientOptions& options, std::chrono::seconds ttl);
  // Puts `key` (full, prefix included) attached to the lease.
  void Put(const std::string& key, const std::string& value);
  // Renews the lease for its TTL; throws StoreConnectionError when it has expired already.
  void KeepAlive();
  void Interrupt() { client_.Interrupt(); }
  std::int64_t Id() const { return id_; }
  std::chrono::seconds Ttl() const { return ttl_; }

 private:
  store::etcd::EtcdClient client_;
  std::int64_t id_ = 0;
  std::chrono::seconds ttl_;
};

// The heartbeat timeout as a lease TTL: whole seconds, rounded up, at least 2 (etcd's minimum
// with its default election timeout is 1.5 s).
std::chrono::seconds LeaseTtl(std::chrono::milliseconds timeout);

class LeaseLiveness : public rendezvous::MemberLiveness {
 public:
  // Grants the lease and puts this member's key.
  LeaseLiveness(rendezvous::LivenessScope scope, const store::etcd::EtcdStoreOptions& etcd, rendezvous::MemberLiveness::TimePoint start);
  void Beat() override { lease_.KeepAlive(); }
  // Gone: the key was seen and is now deleted, or it never appeared within the timeout.
  bool NeighbourGone(rendezvous::MemberLiveness::TimePoint now) override;
  std::string WhyGone(rendezvous::MemberLiveness::TimePoint now) const override;
  void Interrupt() override { lease_.Interrupt(); }

 private:
  std::string AliveKey(int group_rank) const;

  rendezvous::LivenessScope scope_;
  EtcdLease lease_;
  rendezvous::MemberLiveness::TimePoint start_;
  bool seen_ = false;
};

}  // namespace ddprun::launcher::backend
