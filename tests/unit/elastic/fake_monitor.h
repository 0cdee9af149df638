// A PeerMonitor for agent tests: records what the agent watches; the test fires its events.
#pragma once
#include <utility>
#include <vector>

#include "elastic/peer_monitor.h"

namespace ddprun::elastic::testing {

class FakeMonitor : public PeerMonitor {
 public:
  void Watch(const rendezvous::RendezvousInfo& round, Events e) override {
    watched_rounds.push_back(round.round);
    events = std::move(e);
    watching = true;
  }
  void Unwatch() override { watching = false; }
  std::vector<int> watched_rounds;
  Events events;
  bool watching = false;
};

}  // namespace ddprun::elastic::testing
