// Node liveness on etcd (issue 14): each member of a round grants an etcd lease with a TTL of the
// heartbeat timeout (keep_alive_interval x keep_alive_max_attempt, whole seconds, at least 2),
// puts "<prefix>ddprun/rdzv/<run_id>/r<k>/alive/<group rank>" attached to it, and keeps the
// lease alive every interval. A member that dies or is cut off from etcd stops keeping it alive;
// etcd expires the lease and deletes the key, and the ring neighbour that sees the key gone
// declares the member lost. etcd renews every lease when its leader changes, so the loss of an
// etcd member does not expire anyone's. The lease is kept alive by a LeaseKeeper, not between
// the watch's reads (over a slow link to etcd a read can take a second or more, and keep-alives
// queued behind them let the lease expire while the member was alive: the chaos harness's seed
// e 5), through every member at once (a follower forwards a renewal to the leader it knows, and
// while that leader is frozen the renewal hangs there; one client failing over member by member
// took longer than the TTL: seeds e 10 and s2 9, docs/reliability.md). The lease is left to
// expire, not revoked, when the watch ends, so that an old round's watcher never sees a member of
// the next round vanish early. The rules (the TTL, when to renew, when this member's lease is lost
// and its neighbour gone) are rendezvous/lease_liveness_rules.h; this is the etcd client and the
// threads, on the Clock seam (deadlines and pauses; a fake clock in tests).
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/cancellable_pause.h"
#include "common/clock.h"
#include "rendezvous/lease_liveness_rules.h"
#include "rendezvous/member_liveness.h"
#include "store/etcd/etcd_client.h"
#include "store/etcd/etcd_store.h"

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
  // The same through `client` (one pinned to one member, say).
  void KeepAlive(store::etcd::EtcdClient& client);
  void Interrupt() { client_.Interrupt(); }
  const store::etcd::EtcdClientOptions& Options() const { return options_; }
  std::int64_t Id() const { return id_; }
  std::chrono::seconds Ttl() const { return ttl_; }

 private:
  store::etcd::EtcdClientOptions options_;
  store::etcd::EtcdClient client_;
  std::int64_t id_ = 0;
  std::chrono::seconds ttl_;
};

// Keeps `lease` alive from construction until destruction (which interrupts the renewals in
// flight and joins): one thread per etcd member, each renewing through a client pinned to its
// member every `every` on `clock`, so that a member that hangs (frozen, or forwarding to a frozen
// leader) delays only its own renewals. The members' renewals are staggered and keep their times
// (FirstRenewal, NextRenewal): a renewal that hung past its successor's time (a follower
// forwarding it to a frozen leader holds it until the client's timeout) is followed by the next
// at once, which reaches the leader elected meanwhile. Check() throws StoreConnectionError once
// the lease counts as lost (LeaseRenewals: a renewal found it expired, or none came back for
// its TTL);
// `on_lost`, when given, is called once with the same words from a keeper thread as soon as one
// of them sees it (after each renewal, at most a period apart while all hang), so that it does
// not wait for a Check from a watch that is itself blocked on etcd.
class LeaseKeeper {
 public:
  LeaseKeeper(EtcdLease& lease, std::chrono::milliseconds every,
              std::function<void(const std::string&)> on_lost = {}, Clock& clock = RealClock());
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;
  void Check();

 private:
  // Renews through `client` at `next`, then every `every_` (at once after one that hung past it).
  void Renew(store::etcd::EtcdClient& client, Clock::TimePoint next);
  // After each renewal: tells on_lost_ once when the lease counts as lost.
  void TellIfLost();

  EtcdLease& lease_;
  std::chrono::milliseconds every_;
  Clock& clock_;
  CancellablePause pause_;
  std::mutex mutex_;
  rendezvous::LeaseRenewals renewals_;  // under mutex_
  std::function<void(const std::string&)> on_lost_;
  bool told_ = false;  // on_lost_ was called
  std::vector<std::unique_ptr<store::etcd::EtcdClient>> clients_;
  std::vector<std::thread> threads_;
};

class LeaseLiveness : public rendezvous::MemberLiveness {
 public:
  // Grants the lease, puts this member's key and starts keeping the lease alive, on the scope's
  // clock.
  LeaseLiveness(rendezvous::LivenessScope scope, const store::etcd::EtcdStoreOptions& etcd,
                rendezvous::MemberLiveness::TimePoint start);
  // The keeper does the beating; this reports its failure (StoreConnectionError: the lease
  // expired; EtcdUnavailable), so that the watch ends as it did when it beat itself.
  void Beat() override { keeper_->Check(); }
  // Gone: the key was seen and is now deleted, or it never appeared within the timeout
  // (rendezvous::AliveKeyWatch).
  bool NeighbourGone(rendezvous::MemberLiveness::TimePoint now) override;
  std::string WhyGone(rendezvous::MemberLiveness::TimePoint now) const override;
  // Ends a grant or put in flight; the keeper's renewals end when it is destroyed.
  void Interrupt() override { lease_.Interrupt(); }

 private:
  rendezvous::LivenessScope scope_;
  EtcdLease lease_;
  std::unique_ptr<LeaseKeeper> keeper_;  // after lease_: stopped before it goes
  rendezvous::AliveKeyWatch neighbour_;
};

}  // namespace ddprun::launcher::backend
