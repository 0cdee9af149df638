// The launcher's PeerMonitor for multi-node launches. Per watched round, a thread with its own
// store connection blocks in Wait(its inbox, interval): a failure record written there by
// another node is posted to the agent's io_context; each timeout bumps this node's heartbeat
// counter and reads the others'. A counter unchanged for interval x max_attempts, or a lost
// connection to node 0's store (none, or no reply for as long), is posted as "node lost". Unwatch
// wakes the thread through a second connection (a write to its own inbox) and joins it.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "common/asio.h"
#include "common/clock.h"
#include "common/host_port.h"
#include "launcher/backend/threaded_monitor.h"
#include "rendezvous/static_rendezvous.h"
#include "store/tcp_store_client.h"

namespace ddprun::store {
class AuthKey;
}  // namespace ddprun::store

namespace ddprun::launcher::backend {

struct NodeMonitorOptions {
  std::string store_host = "127.0.0.1";  // node 0's store as this node reaches it
  int store_port = kDefaultMasterPort;
  std::string run_id = "none";
  std::chrono::milliseconds interval{5000};    // rdzv_conf keep_alive_interval
  int max_attempts = 3;                        // rdzv_conf keep_alive_max_attempt
  std::shared_ptr<const store::AuthKey> auth;  // the job's token, if any
  // A new connection to node 0's store (its timeout: connecting, and the longest silence of the
  // store it tolerates); none: a TCP client of store_host:store_port with `auth`
  // (MonitorClientOptions).
  rendezvous::StoreConnector connect;
  Clock* clock = &RealClock();  // the heartbeats' silences (not owned)
};

// The monitor's TCP client of node 0's store: connecting and each reply may take up to the
// heartbeat timeout (interval x max_attempts) before the store counts as lost.
store::ClientOptions MonitorClientOptions(const NodeMonitorOptions& options);

class NodeMonitor : public ThreadedMonitor {
 public:
  NodeMonitor(asio::io_context& io, NodeMonitorOptions options);

 private:
  class Watcher;
  std::unique_ptr<RoundWatch> StartWatch(const rendezvous::RendezvousInfo& round,
                                         Post post) override;

  NodeMonitorOptions options_;
};

}  // namespace ddprun::launcher::backend
