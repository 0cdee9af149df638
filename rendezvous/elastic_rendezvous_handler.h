// The c10d (and, later, etcd) elastic handler: DynamicRendezvous rounds over one connection to
// the rendezvous store, plus the round's worker store. The member of group rank 0 serves a
// fresh c10d store for the round's workers (WorkerStoreHost; no key of an earlier round can
// reach them, whatever ended it) and publishes its address in the round; the others read it.
// Every agent conversation of the round (failure barrier, exit barrier) is under the round's
// own prefix of the rendezvous store. NextRendezvous and AnnounceRoundEnd block: they run on
// the agent's runner thread; Shutdown() may be called from any thread and cancels at once.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "rendezvous/dynamic_rendezvous.h"
#include "rendezvous/rendezvous_handler.h"
#include "rendezvous/static_rendezvous.h"

namespace ddprun::rendezvous {

// Serves the c10d store of one round's workers.
class WorkerStoreHost {
 public:
  virtual ~WorkerStoreHost() = default;
  // Stops any earlier store and serves a new, empty one; returns its port.
  virtual int Serve() = 0;
  virtual void Stop() = 0;
};

struct ElasticHandlerOptions {
  DynamicRendezvousOptions rendezvous;
  std::string advertised_addr;  // workers' MASTER_ADDR when this node has group rank 0
  std::chrono::milliseconds read_timeout{60'000};  // waiting for rank 0's worker store address
};

class ElasticRendezvousHandler : public RendezvousHandler {
 public:
  ElasticRendezvousHandler(ElasticHandlerOptions options, StoreConnector connect,
                           WorkerStoreHost& worker_store);

  RendezvousInfo NextRendezvous() override;
  void SetClosed() override;
  void Shutdown() override;
  std::string RunId() const override { return options_.rendezvous.run_id; }
  bool Elastic() const override { return true; }
  void AnnounceRoundEnd(const RoundEnd& end) override;

 private:
  // The round this node is a member of (none before the first one formed).
  std::optional<FormedRound> Current() const;
  Store& Connected();
  RendezvousInfo Publish(const FormedRound& formed);
  [[noreturn]] void ThrowClosed() const;

  ElasticHandlerOptions options_;
  RendezvousKeys keys_;
  StoreConnector connect_;
  WorkerStoreHost& worker_store_;
  std::shared_ptr<Store> store_;
  std::unique_ptr<DynamicRendezvous> rendezvous_;
  std::shared_ptr<Store> round_store_;  // the round's agent keys
  mutable std::mutex mutex_;            // current_ and store_ for other threads
  std::optional<FormedRound> current_;
  std::atomic<bool> shutdown_{false};
};

}  // namespace ddprun::rendezvous
