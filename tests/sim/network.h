// The simulated machines and network of ddprun-sim (tests/sim/README.md): per-node faults on the
// simulation's clock, the stores the nodes serve (keyed by "host:port"), a store client that
// applies the faults before it reaches a SimulatedStore, and each node's StoreSite over them.
//   killed       the node's threads end at their next store call or pause (NodeKilled); the
//                stores it served are gone (refused).
//   paused       its calls and pauses block until it resumes (SIGSTOP of the agent); a store it
//                serves does not answer meanwhile.
//   cut          packets from A to B are dropped when a cut says so (symmetric, one-way in, one
//                way out): a request that does not arrive has no effect, a reply that does not
//                come back leaves the effect; either way the caller waits its reply timeout and
//                gets StoreConnectionError, as TcpStoreClient's ReplyTimeout (a Wait too: its
//                CANCEL_WAIT gets no reply).
//   delayed      each call of the node takes its latency (each way).
// Lock order: the simulation's, then Network's, then a store's.
#pragma once
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rendezvous/store_failover.h"
#include "tests/unit/store/simulated_store.h"

namespace ddprun::sim {

using store::Bytes;
using store::testing::SimulatedStore;
using store::testing::Simulation;

// Thrown into a killed node's threads (not a std::exception: no protocol code catches it).
struct NodeKilled {};

// The address a simulated node is reached at.
std::string NodeAddress(int node);
// The node of an address NodeAddress wrote (-1: none).
int NodeOfAddress(const std::string& host);

class Network {
 public:
  Network(Simulation& simulation, int nodes);
  int Nodes() const { return static_cast<int>(nodes_.size()); }

  // --- faults (the driver's thread; each wakes the waits it concerns) ---
  void Kill(int node);
  // A new incarnation of `node` (a restarted machine); returns its number.
  int Revive(int node);
  void SetPaused(int node, bool paused);
  // Packets into (`in`) and out of (`out`) `side` from and to the other nodes are dropped.
  void Cut(const std::vector<int>& side, bool in, bool out);
  void HealCuts();
  void SetDelay(int node, std::chrono::milliseconds latency);

  // --- what a node's threads see ---
  // Throws NodeKilled when incarnation `incarnation` of `node` is no longer alive; blocks while
  // the node is paused.
  void Enter(int node, int incarnation);
  bool Alive(int node, int incarnation);
  bool AliveLocked(int node, int incarnation) const;  // under the simulation's lock
  bool Paused(int node);
  bool PausedLocked(int node) const;
  // A packet from `from` reaches `to`.
  bool Delivers(int from, int to);
  bool DeliversLocked(int from, int to) const;
  std::chrono::milliseconds Delay(int node);
  // Waits `duration` as `node` (NodeKilled when killed meanwhile; paused time does not count).
  void Sleep(int node, int incarnation, std::chrono::milliseconds duration);

  // --- served stores ---
  // Serves a fresh store at `node`:port; false when the address is served already.
  bool Serve(int node, int port);
  void StopServing(int node, int port);
  // The store served at `address` and its host, or null.
  std::shared_ptr<SimulatedStore> StoreAt(const std::string& address, int* host);

  Simulation& simulation() { return simulation_; }

 private:
  struct CutRule {
    std::vector<char> side;
    bool in = false;
    bool out = false;
  };
  struct NodeState {
    int incarnation = 0;
    bool killed = false;
    bool paused = false;
    std::chrono::milliseconds delay{0};
  };

  Simulation& simulation_;
  mutable std::mutex mutex_;
  std::vector<NodeState> nodes_;
  std::vector<CutRule> cuts_;
  std::map<std::string, std::pair<int, std::shared_ptr<SimulatedStore>>> served_;
};

// One connection of `node` to the store served at `address` (a Store decorator that applies the
// network's faults, then calls the SimulatedStore). `reply_timeout`: how long a call whose reply
// does not come waits before StoreTimeout (the TCP client's read timeout).
class SimClient : public store::Store {
 public:
  SimClient(Network& network, int node, int incarnation, std::string address,
            std::chrono::milliseconds reply_timeout);

  void Set(const std::string& key, const Bytes& value) override;
  Bytes Get(const std::string& key) override;
  std::int64_t Add(const std::string& key, std::int64_t delta) override;
  Bytes CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool Check(const std::vector<std::string>& keys) override;
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::Wait;
  bool DeleteKey(const std::string& key) override;
  std::int64_t NumKeys() override;
  void Interrupt() override;
  std::vector<Bytes> MultiGet(const std::vector<std::string>& keys) override;
  void MultiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  void Append(const std::string& key, const Bytes& value) override;

 private:
  // Runs `op` on the served store as one request and its reply.
  template <typename Op>
  auto Call(const char* what, Op op);
  // The served store, or StoreConnectionError (refused: nothing serves the address now).
  std::shared_ptr<SimulatedStore> Target();
  // Waits for nothing until `timeout` passed (a silent peer), then throws StoreTimeout.
  [[noreturn]] void Silent(const char* what, std::chrono::milliseconds timeout);
  bool Reachable(int host) const;  // under the simulation's lock
  void ThrowIfGone();

  Network& network_;
  Simulation& simulation_;
  int node_;
  int incarnation_;
  std::string address_;
  std::atomic<bool> interrupted_{false};
};

// Node `node`'s StoreSite: probes, connects and serves through the network.
class SimStoreSite : public rendezvous::StoreSite {
 public:
  SimStoreSite(Network& network, int node, int incarnation,
               std::chrono::milliseconds reply_timeout);
  rendezvous::Reach Probe(const HostPort& at, std::chrono::milliseconds timeout) override;
  std::shared_ptr<store::Store> Connect(const HostPort& at,
                                        std::chrono::milliseconds timeout) override;
  std::optional<HostPort> Serve(int port) override;
  void StopServing() override;

 private:
  rendezvous::Reach ReachOf(const HostPort& at);

  Network& network_;
  int node_;
  int incarnation_;
  std::chrono::milliseconds reply_timeout_;
  std::optional<int> served_port_;
};

}  // namespace ddprun::sim
