#include "launcher/backend/hosted_store.h"

#include "common/errors.h"
#include "common/logging.h"
#include "launcher/backend/free_port.h"

namespace ddprun::launcher::backend {

HostedStoreRendezvous::HostedStoreRendezvous(asio::io_context& io, const LaunchPlan& plan)
    : run_id_(plan.run_id), worker_store_bind_(plan.store_bind.value_or("")) {
  store::ServerOptions options;
  options.host = plan.served_store->bind;
  options.port = plan.served_store->port;
  try {
    server_ = std::make_unique<store::TcpStoreServer>(io, options);
  } catch (const SystemError& error) {
    throw UsageError(std::string(error.what()) + "; " + plan.free_port_hint);
  }
  info_.master_addr = plan.first_round.master_addr;
  info_.master_port = server_->Port();
  info_.use_agent_store = plan.first_round.use_agent_store;
  spdlog::info("agent store listening on {}:{}", options.host.empty() ? "*" : options.host,
               info_.master_port);
}

rendezvous::RendezvousInfo HostedStoreRendezvous::NextRendezvous() {
  if (closed_)
    throw rendezvous::RendezvousClosedError("the rendezvous '" + run_id_ + "' is closed");
  if (round_ > 0) {
    server_->WithKeys([](store::KeySpace& keys) {
      for (const auto& key : keys.ListKeys()) keys.DeleteKey(key);
    });
  }
  rendezvous::RendezvousInfo info = info_;
  info.round = round_++;
  // TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: rank 0's worker serves the workers' store.
  if (!info.use_agent_store) info.master_port = PickFreePort(worker_store_bind_);
  return info;
}

void HostedStoreRendezvous::Shutdown() {
  closed_ = true;
  server_->Stop();
}

}  // namespace ddprun::launcher::backend
