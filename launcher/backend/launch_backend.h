// One launch path: every backend (one node with --standalone or not, static across nodes, c10d
// or etcd elastic) is a RendezvousHandler plus what it needs around it, built by MakeBackend
// from the launch's plan (launch_plan.h: the same plan --dry_run prints) and driven the same way
// by launcher/run.cc (agent, event loop, report, exit code).
#pragma once
#include <functional>
#include <memory>
#include <optional>

#include "common/asio.h"
#include "elastic/agent.h"
#include "elastic/peer_monitor.h"
#include "launcher/backend/launch_plan.h"
#include "rendezvous/elastic_rendezvous_handler.h"
#include "rendezvous/rendezvous_handler.h"
#include "rendezvous/static_rendezvous.h"
#include "rendezvous/store_failover.h"
#include "store/store_server_thread.h"

namespace ddprun::launcher::backend {

// Members are destroyed bottom-up: the monitor first, the rendezvous store this node serves
// last (it lingers until its clients are gone).
struct LaunchBackend {
  std::unique_ptr<rendezvous::StoreSite> store_site;           // elastic: serves a store it holds
  std::unique_ptr<store::StoreServerThread> rendezvous_store;  // served here, or null
  std::unique_ptr<rendezvous::WorkerStoreHost> worker_store;   // elastic rounds' worker store
  std::unique_ptr<rendezvous::RendezvousHandler> rendezvous;
  std::unique_ptr<elastic::PeerMonitor> monitor;  // null: no other node to watch
  bool blocking = false;  // joins wait for other nodes: they run on a ThreadRunner
  // The load of the rendezvous store this node serves now, if any (--health_port's metrics).
  std::function<std::optional<store::ServerLoad>()> hosted_store_load;
  elastic::AgentOptions agent_options;
};

// Opens a TcpStoreClient of host:port (each call a new connection), giving up connecting after
// the call's timeout; every reply is awaited at most `reply_timeout`. With `auth`, each
// connection authenticates first.
rendezvous::StoreConnector TcpStoreConnector(std::string host, int port,
                                             std::chrono::milliseconds reply_timeout,
                                             std::shared_ptr<const store::AuthKey> auth);

// The options of a store this node serves for other nodes: where `served` says, with the plan's
// token.
store::ServerOptions ServedStoreOptions(const ServedStore& served, const LaunchPlan& plan);

// The backend of plan.kind: its stores, endpoints, ranks, master, timeouts and token all as
// `plan` says (PlanLaunch); the workers per node from `spec`. Logs plan.unused_token_note.
// Throws UsageError for what the launch cannot set up (a store port in use, ...).
std::unique_ptr<LaunchBackend> MakeBackend(asio::io_context& io, const LaunchPlan& plan,
                                           const elastic::WorkerSpec& spec);

}  // namespace ddprun::launcher::backend
