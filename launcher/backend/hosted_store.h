// The agent store of single-node launches, as torchrun's: a c10d TCP store served by the
// launcher itself on its event loop, which every worker reaches as a client at
// MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True). Each new round (a restart)
// starts from an empty key space, so that no key of a finished attempt leaks into the next.
#pragma once
#include <memory>

#include "common/asio.h"
#include "elastic/launch_config.h"
#include "rendezvous/rendezvous_handler.h"
#include "store/tcp_store_server.h"

namespace ddprun::launcher::backend {

class HostedStoreRendezvous : public rendezvous::RendezvousHandler {
 public:
  // Standalone: listens on 127.0.0.1, ephemeral port. Static single node: listens on every
  // interface at --master_port. A port in use throws UsageError naming --master_port.
  HostedStoreRendezvous(asio::io_context& io, const elastic::LaunchConfig& config);

  rendezvous::RendezvousInfo NextRendezvous() override;
  void SetClosed() override { closed_ = true; }
  void Shutdown() override;
  std::string RunId() const override { return run_id_; }

  rendezvous::RendezvousInfo Endpoint() const { return info_; }

 private:
  std::unique_ptr<store::TcpStoreServer> server_;
  rendezvous::RendezvousInfo info_;
  std::string run_id_;
  int round_ = 0;
  bool closed_ = false;
};

}  // namespace ddprun::launcher::backend
