// The rules of node liveness on leases (the etcd backend, docs/etcd.md "Node liveness: leases"):
// pure decisions on time and on what the store holds. Each member of a round keeps a lease with a
// TTL of the heartbeat timeout and the key RendezvousKeys::Alive(round, group rank) attached to
// it; launcher/backend/etcd_liveness.* holds the lease client and the threads that renew it, and
// asks these rules when to renew, whether this member's own lease is lost, and whether its ring
// neighbour is gone. Time is the caller's (a Clock's Now()); nothing here reads it.
#pragma once
#include <chrono>
#include <string>

#include "common/clock.h"

namespace ddprun::rendezvous {

// The heartbeat timeout as a lease TTL: whole seconds, rounded up, at least 2 (etcd's minimum
// with its default election timeout is 1.5 s).
std::chrono::seconds LeaseTtl(std::chrono::milliseconds timeout);

// How often a lease is renewed: a third of its TTL (at least 100 ms), so that two renewals may
// fail before it expires.
std::chrono::milliseconds LeaseRenewalPeriod(std::chrono::seconds ttl);

// The renewals through each of `members` etcd members, every `every`: member i first at `start`
// + i/members of `every` (staggered, so the last one before a freeze is at most every/members
// old), then each at the previous one's time + `every`, or at `now` when a renewal that hung is
// already past that (the next goes at once, to the leader elected meanwhile).
Clock::TimePoint FirstRenewal(Clock::TimePoint start, std::chrono::milliseconds every, int member,
                              int members);
Clock::TimePoint NextRenewal(Clock::TimePoint previous, std::chrono::milliseconds every,
                             Clock::TimePoint now);

// Whether this member's own lease counts as lost: once a renewal found it expired (etcd said so),
// or once no renewal came back for its TTL (etcd has expired it by then).
class LeaseRenewals {
 public:
  LeaseRenewals(std::chrono::seconds ttl, Clock::TimePoint granted)
      : ttl_(ttl), renewed_(granted) {}

  // A renewal came back at `at` (renewals that come back out of order keep the latest).
  void Renewed(Clock::TimePoint at);
  // etcd answered that the lease expired; the first `why` is kept.
  void Expired(const std::string& why);
  // Why the lease counts as lost at `now` ("this node's etcd lease expired: ..."); empty while
  // it does not.
  std::string Lost(Clock::TimePoint now) const;
  std::chrono::seconds Ttl() const { return ttl_; }

 private:
  std::chrono::seconds ttl_;
  Clock::TimePoint renewed_;
  std::string expired_;
};

// The ring neighbour as its watcher sees it through its alive key: gone once the key was seen and
// is deleted again (its lease expired: it stopped keeping it alive), or when it never appeared
// within `timeout` of `start` (it never showed itself alive). The caller reads the key.
class AliveKeyWatch {
 public:
  AliveKeyWatch(std::chrono::milliseconds timeout, Clock::TimePoint start)
      : timeout_(timeout), start_(start) {}

  // Records whether the key is there at `now`; true when the neighbour counts as gone.
  bool Observe(bool key_present, Clock::TimePoint now);
  // Why it counts as gone (one clause, for the round's change record); `ttl`: its lease's.
  std::string WhyGone(Clock::TimePoint now, std::chrono::seconds ttl) const;

 private:
  std::chrono::milliseconds timeout_;
  Clock::TimePoint start_;
  bool seen_ = false;
};

}  // namespace ddprun::rendezvous
