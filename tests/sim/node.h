// One simulated ddprun node of ddprun-sim: the real ElasticRendezvousHandler (DynamicRendezvous,
// StoreFailover) over a SimStoreSite, driven by two participant threads of the simulation:
//   agent  the round logic of elastic/agent.cc and elastic/agent_multinode.cc (which run on an
//          asio loop and cannot be driven here): join, start the workers (Training), then on
//          the round's change stop them and rejoin without spending a restart; on a worker
//          failure announce it (AnnounceRoundEnd kFailure: ReportFailure) and rejoin, the next
//          round deciding the restart count; past --max_restarts fail; on success close the
//          rendezvous and exit 0.
//   watch  launcher/backend/elastic_monitor.cc's Watcher: its own connection, a beat every
//          interval (HeartbeatCounterLiveness), a look at the ring neighbour every quarter
//          interval, a Wait on the round's change key (NoticeOf), the silent neighbour declared
//          lost (NeighbourLost, Announce, then AccountGone), and beating on after the change
//          until the next round's watch replaces it.
// Every event the real agent writes to its --event_log that the chaos checker reads is recorded
// with the same name and fields (round_formed, workers_started, node_lost, ...).
#pragma once
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/elastic_rendezvous_handler.h"
#include "rendezvous/member_liveness.h"
#include "rendezvous/member_watch.h"
#include "tests/sim/network.h"
#include "tests/sim/training.h"

namespace ddprun::sim {

struct JobOptions {
  std::string run_id = "sim";
  int min_nodes = 1;
  int max_nodes = 1;
  int nproc = 1;
  int max_restarts = 3;
  int port = 29400;
  std::chrono::milliseconds keep_alive{1000};
  int max_attempts = 3;
  std::chrono::milliseconds last_call{3000};
  std::chrono::milliseconds join_timeout{600'000};
  std::chrono::milliseconds read_timeout{10'000};
  std::chrono::milliseconds close_timeout{30'000};
  std::chrono::milliseconds Heartbeat() const { return keep_alive * max_attempts; }
};

// One agent incarnation's record, as tests/chaos/harness.py's Agent.record() writes it.
struct AgentRecord {
  int host = 0;
  int incarnation = 0;
  int pid = 0;
  double start = 0;
  std::optional<double> exit;
  std::optional<int> rc;
  std::vector<std::string> errors;
  nlohmann::json events = nlohmann::json::array();
  nlohmann::json ToJson() const;
};

// What every node shares: the simulation, the network, the workers, the records.
struct World {
  World(Network& network_in, Training& training_in, JobOptions job_in)
      : network(network_in), training(training_in), job(std::move(job_in)) {}
  Network& network;
  Training& training;
  JobOptions job;
  std::mutex mutex;  // records
  std::deque<AgentRecord> records;
  std::atomic<int> next_worker_port{40000};
  double Now();  // simulated seconds
};

class Node {
 public:
  Node(World& world, int id, int incarnation);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  void RunAgent();  // the agent thread's body
  void RunWatch();  // the watch thread's body
  // The driver: the machine is gone (the network's Kill is already done).
  void Kill();
  // The driver: SIGTERM; the agent declares the node gone, stops its workers and exits 143
  // (Agent::HandleSignal). Seen once the agent waits on its round (not within a join).
  void Leave();
  bool Finished();  // the agent thread ended
  bool FinishedLocked();
  int id() const { return id_; }
  int incarnation() const { return incarnation_; }

 private:
  enum class RoundEnd { kRejoin, kDone, kExit };
  struct Notice {
    std::uint64_t generation = 0;
    rendezvous::ChangeNotice notice;
  };
  struct WatchRequest {
    std::uint64_t generation = 0;
    int round = 0;
    int me = 0;
    int world = 1;
  };

  void AgentLoop();
  void TakeRound(const rendezvous::RendezvousInfo& info);
  RoundEnd RunRound(const rendezvous::RendezvousInfo& info, int handle);
  RoundEnd OnNotice(const rendezvous::ChangeNotice& notice, int handle);
  void Exit(int rc, const std::string& error = "");
  void Emit(const std::string& event, nlohmann::json fields = nlohmann::json::object());

  // --- the watch ---
  void StartWatch(const rendezvous::RendezvousInfo& info);
  void StopWatch();
  bool WatchStopped(std::uint64_t generation);  // under the simulation's lock too
  void WatchRound(const WatchRequest& request);
  void Watch(const WatchRequest& request, store::Store& store,
             rendezvous::DynamicRendezvous& rendezvous, rendezvous::MemberLiveness& liveness);
  void Deliver(std::uint64_t generation, const rendezvous::RoundChange& change, int me);
  void Post(std::uint64_t generation, rendezvous::ChangeNotice notice);
  std::optional<rendezvous::ChangeNotice> TakeNotice();
  bool NoticePendingLocked();
  bool Leaving();
  // The watch's pause of one tick: false when stopped.
  bool Tick(std::uint64_t generation, std::chrono::milliseconds tick);

  World& world_;
  Simulation& simulation_;
  int id_;
  int incarnation_;
  std::size_t record_ = 0;
  SimStoreSite site_;
  SimStoreSite watch_site_;  // the watch's connections: replies within the heartbeat timeout
  class WorkerPorts;
  std::unique_ptr<WorkerPorts> worker_store_;
  rendezvous::ElasticHandlerOptions options_;
  std::unique_ptr<rendezvous::ElasticRendezvousHandler> handler_;
  int restart_count_ = 0;
  std::optional<rendezvous::RendezvousInfo> info_;

  std::mutex mutex_;  // what follows, between the agent, the watch and the driver
  bool finished_ = false;
  bool killed_ = false;
  bool leaving_ = false;
  WatchRequest watch_;
  std::shared_ptr<store::Store> watch_store_;
  std::deque<Notice> notices_;
};

}  // namespace ddprun::sim
