#include "rendezvous/elastic_rendezvous_handler.h"

#include <algorithm>

#include "common/host_port.h"
#include "rendezvous/prefix_store.h"

namespace ddprun::rendezvous {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kConnectSlice{1000};         // Shutdown() is seen between connect attempts
constexpr milliseconds kOwnConnectTimeout{10'000};  // a barrier's own connection

}  // namespace

ElasticRendezvousHandler::ElasticRendezvousHandler(ElasticHandlerOptions options,
                                                   StoreConnector connect,
                                                   WorkerStoreHost& worker_store)
    : options_(std::move(options)),
      keys_{options_.rendezvous.run_id},
      connect_(std::move(connect)),
      worker_store_(worker_store) {}

Store& ElasticRendezvousHandler::Connected() {
  if (store_) return *store_;
  const auto deadline = std::chrono::steady_clock::now() + options_.rendezvous.join_timeout;
  std::string last_error = "no attempt";
  while (std::chrono::steady_clock::now() < deadline) {
    if (shutdown_) ThrowClosed();
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    try {
      auto store = connect_(std::clamp(left, milliseconds{1}, kConnectSlice));
      std::lock_guard lock(mutex_);
      store_ = std::move(store);
      rendezvous_ = std::make_unique<DynamicRendezvous>(options_.rendezvous, store_);
      if (shutdown_) store_->Interrupt();
      return *store_;
    } catch (const StoreConnectionError& error) {
      last_error = error.what();
    }
  }
  throw RendezvousConnectionError("the rendezvous store never answered within join_timeout (" +
                                  last_error +
                                  "); start the node of --rdzv_endpoint, or check "
                                  "its address");
}

RendezvousInfo ElasticRendezvousHandler::NextRendezvous() {
  Connected();
  try {
    const FormedRound formed = rendezvous_->Join(Current());
    {
      std::lock_guard lock(mutex_);
      current_ = formed;
    }
    return Publish(formed);
  } catch (const StoreConnectionError& error) {
    if (shutdown_) ThrowClosed();
    throw RendezvousConnectionError(std::string("lost the rendezvous store: ") + error.what());
  }
}

// Rank 0 serves the workers' store and tells the others where it is.
RendezvousInfo ElasticRendezvousHandler::Publish(const FormedRound& formed) {
  const std::string master_key = keys_.Round(formed.round, "master");
  HostPort master{options_.advertised_addr, 0};
  if (formed.group_rank == 0) {
    master.port = worker_store_.Serve();
    store_->SetString(master_key, master.ToString());
  } else {
    worker_store_.Stop();
    store_->Wait({master_key}, options_.read_timeout);
    master = ParseHostPort(store_->GetString(master_key), "the round's worker store");
  }
  round_store_ = std::make_shared<PrefixStore>(keys_.Round(formed.round, "agent"), store_);
  RendezvousInfo info;
  info.store = round_store_.get();
  info.group_rank = formed.group_rank;
  info.group_world_size = formed.group_world_size;
  info.round = formed.round;
  info.master_addr = master.host;
  info.master_port = master.port.value_or(0);
  info.use_agent_store = true;
  info.base_global_rank = formed.base_global_rank;
  info.global_world_size = formed.global_world_size;
  info.restart_count = formed.restart_count;
  info.open_round_store = [connect = connect_, prefix = keys_.Round(formed.round, "agent")] {
    return std::make_shared<PrefixStore>(prefix, connect(kOwnConnectTimeout));
  };
  return info;
}

void ElasticRendezvousHandler::AnnounceRoundEnd(const RoundEnd& end) {
  const auto current = Current();
  if (!current || !rendezvous_) return;
  const NodeDescriptor& node = options_.rendezvous.node;
  if (end.kind == RoundEnd::Kind::kFailure) {
    rendezvous_->CountFailure(current->round);
    rendezvous_->Announce(
        current->round, {RoundChange::Kind::kFailure, current->group_rank, node.host, end.record});
    return;
  }
  rendezvous_->DeclareGone(
      current->round, current->group_rank,
      {RoundChange::Kind::kNodeLeaving, current->group_rank, node.host, end.record});
}

void ElasticRendezvousHandler::SetClosed() {
  const auto current = Current();
  if (!rendezvous_ || shutdown_) return;
  rendezvous_->Close(current ? current->round : 0);
}

void ElasticRendezvousHandler::Shutdown() {
  shutdown_ = true;
  std::lock_guard lock(mutex_);
  if (store_) store_->Interrupt();
}

std::optional<FormedRound> ElasticRendezvousHandler::Current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

void ElasticRendezvousHandler::ThrowClosed() const {
  throw RendezvousClosedError("the rendezvous '" + options_.rendezvous.run_id + "' was shut down");
}

}  // namespace ddprun::rendezvous
