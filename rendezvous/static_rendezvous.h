// torchrun's static rendezvous: a fixed number of nodes, group rank = --node_rank, one store on
// node 0 (served by the launcher on master_addr:master_port). Every node, node 0 included,
// reaches the store as a client through `connect`, announces itself under the round's prefix
// ("ddprun/<run_id>/<round>", round = number of earlier rounds) and waits for all the others,
// reporting progress every second; Shutdown() interrupts the connection and ends it at once.
// The workers share that store (MASTER_PORT = master_port), or, with pick_worker_port, serve
// their own on a port node 0 publishes in the round.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/clock.h"
#include "common/host_port.h"
#include "rendezvous/rendezvous_handler.h"

namespace ddprun::rendezvous {

// Progress of one join: `done` is set once, on the last report of the join.
struct JoinProgress {
  int joined = 0;
  int total = 0;
  std::chrono::milliseconds elapsed{0};
  std::chrono::milliseconds timeout{0};
  bool done = false;
};

struct StaticRendezvousOptions {
  std::string run_id = "none";
  int node_rank = 0;
  int num_nodes = 1;
  std::string master_addr = "127.0.0.1";  // workers' MASTER_ADDR, and where the store is
  int master_port = kDefaultMasterPort;
  std::string host;  // this node's name, announced to the others
  std::chrono::milliseconds join_timeout{900'000};
  std::function<void(const JoinProgress&)> on_progress;  // optional; called on the caller's thread
  // Set (an authenticated rendezvous, which PyTorch clients cannot join): the workers serve
  // their own store (TORCHELASTIC_USE_AGENT_STORE=False) on master_addr at the port node 0
  // picks with this each round and publishes in the round; unset, they share the agents'.
  std::function<int()> pick_worker_port;
  // The join's deadline and its progress reports (not owned; outlives the rendezvous). The
  // store's own waits are bounded by the store, in its time.
  Clock* clock = &RealClock();
};

// Opens a connection to the store, giving up after `timeout` (throws StoreConnectionError).
using StoreConnector =
    std::function<std::shared_ptr<store::Store>(std::chrono::milliseconds timeout)>;

class StaticRendezvous : public RendezvousHandler {
 public:
  StaticRendezvous(StaticRendezvousOptions options, StoreConnector connect);

  // Throws RendezvousTimeoutError naming the missing nodes and join_timeout, or
  // RendezvousClosedError after Shutdown(). Safe to call from another thread than Shutdown().
  RendezvousInfo NextRendezvous() override;
  void SetClosed() override { closed_ = true; }
  // Ends a join blocked on another thread at once (interrupts the store connection).
  void Shutdown() override;
  std::string RunId() const override { return options_.run_id; }

  static std::string RoundPrefix(const std::string& run_id, int round);

 private:
  using TimePoint = Clock::TimePoint;
  RendezvousInfo Join();
  void ConnectUntil(TimePoint start, TimePoint deadline);
  void WaitForAll(store::Store& store, TimePoint start, TimePoint deadline);
  int CountJoined(store::Store& store, std::string& missing);
  // The workers' MASTER_PORT and whether the agents' store serves it (see pick_worker_port).
  int WorkerPort(store::Store& round_store);
  void Report(int joined, TimePoint start, bool done);
  void ThrowIfClosed() const;

  StaticRendezvousOptions options_;
  StoreConnector connect_;
  std::shared_ptr<store::Store> store_;
  std::shared_ptr<store::Store> round_store_;
  std::shared_ptr<store::Store> job_store_;  // the job's keys that outlive rounds
  int round_ = 0;
  std::atomic<bool> closed_{false};
  std::mutex store_mutex_;  // store_ for Shutdown() on another thread
};

}  // namespace ddprun::rendezvous
