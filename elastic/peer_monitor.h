// The PeerMonitor seam: while a multi-node round runs, watches this node's inbox for failure
// records of other nodes and the other agents' heartbeats, and reports either as an event on
// the agent's event loop. The launcher's NodeMonitor uses its own store connection and thread.
#pragma once
#include <functional>
#include <string>

#include "elastic/node_failure.h"
#include "rendezvous/rendezvous_handler.h"

namespace ddprun::elastic {

class PeerMonitor {
 public:
  struct Events {
    std::function<void(const NodeFailure&)> on_remote_failure;
    // `node_rank` stopped heart-beating, or (node 0) its store became unreachable.
    std::function<void(int node_rank, const std::string& reason)> on_node_lost;
    // Elastic rounds: a node waits to join, or a member left; the round must form again.
    std::function<void(const std::string& reason)> on_membership_change;
  };
  virtual ~PeerMonitor() = default;
  // Starts watching `round` (group_rank / group_world_size / round number), replacing any
  // earlier watch. At most one event. An elastic monitor keeps beating and watching its peers
  // after that event, until Unwatch or the next Watch.
  virtual void Watch(const rendezvous::RendezvousInfo& round, Events events) = 0;
  // Stops watching; no event of the round is delivered after it returns. Idempotent.
  virtual void Unwatch() = 0;
};

}  // namespace ddprun::elastic
