#include "rendezvous/member_liveness.h"

#include "common/duration.h"

namespace ddprun::rendezvous {

HeartbeatCounterLiveness::HeartbeatCounterLiveness(LivenessScope scope, TimePoint start)
    : scope_(std::move(scope)), neighbour_(scope_.timeout, start) {}

void HeartbeatCounterLiveness::Beat() {
  scope_.store->Add(scope_.keys.Heartbeat(scope_.round, scope_.me), 1);
  scope_.store->SetString(scope_.keys.HeartbeatAt(scope_.round, scope_.me),
                          std::to_string(WallClockMs(*scope_.clock)));
}

bool HeartbeatCounterLiveness::NeighbourGone(TimePoint now) {
  const auto beats = scope_.store->Add(scope_.keys.Heartbeat(scope_.round, scope_.neighbour), 0);
  return neighbour_.Observe(beats, now);
}

std::string HeartbeatCounterLiveness::WhyGone(TimePoint now) const {
  return "heartbeats stopped " + DurationText(neighbour_.SilentFor(now), 1) +
         " ago (keep_alive_interval x keep_alive_max_attempt)";
}

}  // namespace ddprun::rendezvous
