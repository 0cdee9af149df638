// The agent store of single-node launches, as torchrun's: a c10d TCP store served by the
// launcher itself on its event loop, which every worker reaches as a client at
// MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True). Each new round (a restart)
// starts from an empty key space, so that no key of a finished attempt leaks into the next.
// With TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (--standalone only, as torchrun's c10d) each round
// gives the workers a port free at that moment instead, and worker rank 0 serves their store
// (TORCHELASTIC_USE_AGENT_STORE=False); the launcher's store then serves no worker.
#pragma once
#include <memory>

#include "common/asio.h"
#include "launcher/backend/launch_plan.h"
#include "rendezvous/rendezvous_handler.h"
#include "store/tcp_store_server.h"

namespace ddprun::launcher::backend {

class HostedStoreRendezvous : public rendezvous::RendezvousHandler {
 public:
  // Listens where the single-node plan's served_store says (standalone: 127.0.0.1, ephemeral
  // port; static single node: every interface at --master_port); its rounds have the plan's
  // MASTER_ADDR and the port bound. A port in use throws UsageError ending in the plan's
  // free_port_hint.
  HostedStoreRendezvous(asio::io_context& io, const LaunchPlan& plan);

  rendezvous::RendezvousInfo NextRendezvous() override;
  void SetClosed() override { closed_ = true; }
  void Shutdown() override;
  std::string RunId() const override { return run_id_; }

  rendezvous::RendezvousInfo Endpoint() const { return info_; }

 private:
  std::unique_ptr<store::TcpStoreServer> server_;
  rendezvous::RendezvousInfo info_;
  std::string run_id_;
  std::string worker_store_bind_;  // where a free port is picked for rank 0's own store
  int round_ = 0;
  bool closed_ = false;
};

}  // namespace ddprun::launcher::backend
