// How a member of an elastic round shows that it is alive, and how its ring neighbour's watcher
// tells that it is gone (ElasticMonitor). Two ways, one per rendezvous store:
//   HeartbeatCounterLiveness (c10d): a counter under the round's keys that the member bumps
//     every keep_alive_interval; gone once it has not moved for interval x max_attempts on the
//     watcher's own clock (HeartbeatWatch).
//   LeaseLiveness (etcd, launcher/backend/etcd_liveness.h): a key attached to an etcd lease that
//     the member keeps alive; gone once etcd expired the lease and deleted the key (the rules:
//     lease_liveness_rules.h).
// Calls block on the store; they run on the monitor's thread. Interrupt() (any thread) ends a
// blocked call.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/clock.h"
#include "rendezvous/dynamic_rendezvous.h"
#include "rendezvous/heartbeat_watch.h"
#include "store/store.h"

namespace ddprun::rendezvous {

// Whose liveness, in which round, through which store connection.
struct LivenessScope {
  std::shared_ptr<store::Store> store;  // the watcher's own connection to the rendezvous store
  RendezvousKeys keys;
  int round = 0;
  int me = 0;                                 // group rank
  int neighbour = -1;                         // RingNeighbour(me, world); -1: alone
  std::chrono::milliseconds timeout{15'000};  // keep_alive_interval x keep_alive_max_attempt
  Clock* clock = &RealClock();  // the beats' wall-clock times, a lease's renewals (not owned)
  // Called at most once, on a thread of the liveness's own, when this member is gone without
  // the watch's help (etcd: no renewal came back for the lease's TTL), so that a watch blocked in
  // a store call still stops its workers; `why` as Beat's error says it. None: Beat only.
  std::function<void(const std::string& why)> on_lost{};
};

class MemberLiveness {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~MemberLiveness() = default;
  // Shows this member alive for the next timeout; called every keep_alive_interval.
  virtual void Beat() = 0;
  // Whether the neighbour counts as gone at `now`.
  virtual bool NeighbourGone(TimePoint now) = 0;
  // Why it counts as gone (one clause, for the round's change record).
  virtual std::string WhyGone(TimePoint now) const = 0;
  virtual void Interrupt() {}
};

using LivenessFactory =
    std::function<std::unique_ptr<MemberLiveness>(const LivenessScope&, MemberLiveness::TimePoint)>;

class HeartbeatCounterLiveness : public MemberLiveness {
 public:
  HeartbeatCounterLiveness(LivenessScope scope, TimePoint start);
  // The counter is what the ring neighbour watches; the wall-clock time is for views
  // (`ddprun-store rdzv`), which have no earlier reading to compare with.
  void Beat() override;
  bool NeighbourGone(TimePoint now) override;
  std::string WhyGone(TimePoint now) const override;

 private:
  LivenessScope scope_;
  HeartbeatWatch neighbour_;
};

}  // namespace ddprun::rendezvous
