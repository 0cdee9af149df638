// The launcher's PeerMonitor for elastic rounds. Per watched round, a thread with its own
// connection to the rendezvous store blocks in Wait(the round's change key): any reason to end
// the round (a failure, a lost node, a node waiting, a member leaving, the job closed) wakes
// every member at once and is posted to the agent's io_context. Meanwhile it shows this node
// alive every interval and looks at its ring neighbour every quarter interval (O(1) per node;
// MemberLiveness: heartbeat counters, or etcd leases); a neighbour gone for interval x
// max_attempts is declared gone (seen at most a quarter interval late), which ends the round
// for everyone: the change is announced and posted to this agent first, the next round's
// accounting of the loss written after. After the change, the watch goes on beating and
// watching until the next round's replaces it, so that a member lost while the others rejoin
// is still declared gone. A liveness that finds this node gone on a thread of its own (etcd's
// lease keeper) posts the lost store at once, whatever the watch is blocked in. Unwatch
// interrupts the connection and joins the thread.
#pragma once
#include <chrono>
#include <memory>

#include "common/asio.h"
#include "common/clock.h"
#include "launcher/backend/threaded_monitor.h"
#include "rendezvous/dynamic_rendezvous.h"
#include "rendezvous/member_liveness.h"
#include "rendezvous/static_rendezvous.h"

namespace ddprun::launcher::backend {

struct ElasticMonitorOptions {
  rendezvous::DynamicRendezvousOptions rendezvous;  // run id, this node
  rendezvous::StoreConnector connect;               // a new connection to the rendezvous store
  std::chrono::milliseconds interval{5000};         // rdzv_conf keep_alive_interval
  int max_attempts = 3;                             // rdzv_conf keep_alive_max_attempt
  rendezvous::LivenessFactory liveness;             // none: heartbeat counters (c10d); etcd: leases
  // Beats, silences, the pauses between looks, and the declarations (rendezvous.clock is not
  // used). Not owned.
  Clock* clock = &RealClock();
};

class ElasticMonitor : public ThreadedMonitor {
 public:
  ElasticMonitor(asio::io_context& io, ElasticMonitorOptions options);

 private:
  class Watcher;
  std::unique_ptr<RoundWatch> StartWatch(const rendezvous::RendezvousInfo& round,
                                         Post post) override;

  ElasticMonitorOptions options_;
};

}  // namespace ddprun::launcher::backend
