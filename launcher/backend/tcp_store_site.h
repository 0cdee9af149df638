// The real StoreSite: probes and connects over TCP, serves a store on a thread of this process
// (StoreServerThread, which lingers for its clients when destroyed), pauses on its clock until
// Cancel() (StoreSite's CancellablePause). Owned by the LaunchBackend and destroyed after the
// handler and the monitor, so a store this node took over outlives every connection of its own.
#pragma once
#include <chrono>
#include <memory>
#include <mutex>

#include "common/clock.h"
#include "rendezvous/store_failover.h"
#include "store/store_server_thread.h"

namespace ddprun::launcher::backend {

// One TCP connection attempt to each address of `at` within `timeout`: answered by any address
// wins; refused only when every address refused.
rendezvous::Reach ProbeTcp(const HostPort& at, std::chrono::milliseconds timeout);

struct TcpStoreSiteOptions {
  std::chrono::milliseconds reply_timeout{60'000};  // every reply of a connected store
  store::ServerOptions serve;  // a served store's bind address and token (its port: Serve's)
  std::chrono::milliseconds linger{10'000};     // a served store, for its last clients
  std::chrono::milliseconds quiet_for{15'000};  // a client silent this long is gone
};

class TcpStoreSite : public rendezvous::StoreSite {
 public:
  explicit TcpStoreSite(TcpStoreSiteOptions options, Clock& clock = RealClock())
      : StoreSite(clock), options_(options) {}

  rendezvous::Reach Probe(const HostPort& at, std::chrono::milliseconds timeout) override;
  std::shared_ptr<store::Store> Connect(const HostPort& at,
                                        std::chrono::milliseconds timeout) override;
  std::optional<HostPort> Serve(int port) override;
  void StopServing() override;
  // The load of the store this site serves, if it serves one (any thread; never blocks: none
  // while Serve is at work).
  std::optional<store::ServerLoad> ServedLoad();

 private:
  TcpStoreSiteOptions options_;
  std::mutex mutex_;
  std::unique_ptr<store::StoreServerThread> served_;
};

}  // namespace ddprun::launcher::backend
