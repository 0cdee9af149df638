// Liveness of one peer from its heartbeat counter, on the watcher's own clock (no clock is
// shared between nodes): the peer counts as lost once its counter has not moved for `timeout`
// (keep_alive_interval x keep_alive_max_attempt). Pure; the caller reads the counter.
#pragma once
#include <chrono>
#include <cstdint>

namespace ddprun::rendezvous {

class HeartbeatWatch {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  HeartbeatWatch(std::chrono::milliseconds timeout, TimePoint start)
      : timeout_(timeout), last_change_(start) {}

  // Records `counter` as read at `now`; true when the peer counts as lost.
  bool Observe(std::int64_t counter, TimePoint now) {
    if (!seen_ || counter != last_counter_) {
      seen_ = true;
      last_counter_ = counter;
      last_change_ = now;
    }
    return SilentFor(now) >= timeout_;
  }

  std::chrono::milliseconds SilentFor(TimePoint now) const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(now - last_change_);
  }

 private:
  std::chrono::milliseconds timeout_;
  bool seen_ = false;
  std::int64_t last_counter_ = 0;
  TimePoint last_change_;
};

// How long a watcher waits on the store its heartbeats go through (to connect to it, or for one
// reply) before it counts that store as lost: the heartbeat timeout, the silence after which a
// peer counts as lost. A shorter bound (it was one interval to connect and two for a reply)
// took a store that was only slow (a loaded host, a sanitizer build) for a lost one while the
// heartbeats still counted every node alive: the watcher's node then stopped without a record,
// so that a SIGTERM it got next was not told, and its peers reported it lost (issue 26).
inline std::chrono::milliseconds StoreSilenceTimeout(std::chrono::milliseconds interval,
                                                     int max_attempts) {
  return interval * (max_attempts > 0 ? max_attempts : 1);
}

// The member that `group_rank` watches in a ring of `world` members; -1 when alone. Each member
// is watched by exactly one other, so a round costs O(1) heartbeat traffic per node.
inline int RingNeighbour(int group_rank, int world) {
  return world > 1 ? (group_rank + 1) % world : -1;
}

}  // namespace ddprun::rendezvous
