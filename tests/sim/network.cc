#include "tests/sim/network.h"

#include <limits>
#include <type_traits>

namespace ddprun::sim {
namespace {

constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();
constexpr const char kNodePrefix[] = "node";

}  // namespace

std::string NodeAddress(int node) { return kNodePrefix + std::to_string(node); }

int NodeOfAddress(const std::string& host) {
  const std::string prefix = kNodePrefix;
  if (host.rfind(prefix, 0) != 0) return -1;
  try {
    return std::stoi(host.substr(prefix.size()));
  } catch (const std::exception&) {
    return -1;
  }
}

Network::Network(Simulation& simulation, int nodes) : simulation_(simulation), nodes_(nodes) {}

void Network::Kill(int node) {
  {
    std::lock_guard lock(mutex_);
    nodes_.at(node).killed = true;
    nodes_.at(node).paused = false;
    for (auto it = served_.begin(); it != served_.end();) {
      it = it->second.first == node ? served_.erase(it) : std::next(it);
    }
  }
  simulation_.Changed();
}

int Network::Revive(int node) {
  std::lock_guard lock(mutex_);
  NodeState& state = nodes_.at(node);
  state = NodeState{state.incarnation + 1};
  return state.incarnation;
}

void Network::SetPaused(int node, bool paused) {
  {
    std::lock_guard lock(mutex_);
    nodes_.at(node).paused = paused;
  }
  simulation_.Changed();
}

void Network::Cut(const std::vector<int>& side, bool in, bool out) {
  {
    std::lock_guard lock(mutex_);
    CutRule rule{std::vector<char>(nodes_.size(), 0), in, out};
    for (int node : side) rule.side.at(node) = 1;
    cuts_.push_back(std::move(rule));
  }
  simulation_.Changed();
}

void Network::HealCuts() {
  {
    std::lock_guard lock(mutex_);
    cuts_.clear();
  }
  simulation_.Changed();
}

void Network::SetDelay(int node, std::chrono::milliseconds latency) {
  std::lock_guard lock(mutex_);
  nodes_.at(node).delay = latency;
}

bool Network::AliveLocked(int node, int incarnation) const {
  std::lock_guard lock(mutex_);
  const NodeState& state = nodes_.at(node);
  return !state.killed && state.incarnation == incarnation;
}

bool Network::Alive(int node, int incarnation) { return AliveLocked(node, incarnation); }

bool Network::PausedLocked(int node) const {
  std::lock_guard lock(mutex_);
  return nodes_.at(node).paused;
}

bool Network::Paused(int node) { return PausedLocked(node); }

bool Network::DeliversLocked(int from, int to) const {
  std::lock_guard lock(mutex_);
  if (from == to) return true;  // loopback: a cut drops nothing of a node's own
  for (const CutRule& rule : cuts_) {
    const bool from_in = rule.side[from] != 0;
    const bool to_in = rule.side[to] != 0;
    if (from_in == to_in) continue;
    if (to_in && rule.in) return false;
    if (from_in && rule.out) return false;
  }
  return true;
}

bool Network::Delivers(int from, int to) { return DeliversLocked(from, to); }

std::chrono::milliseconds Network::Delay(int node) {
  std::lock_guard lock(mutex_);
  return nodes_.at(node).delay;
}

void Network::Enter(int node, int incarnation) {
  if (!Alive(node, incarnation)) throw NodeKilled{};
  if (!Paused(node)) return;
  simulation_.Block(
      kForever, [&] { return !AliveLocked(node, incarnation) || !PausedLocked(node); }, nullptr);
  if (!Alive(node, incarnation)) throw NodeKilled{};
}

void Network::Sleep(int node, int incarnation, std::chrono::milliseconds duration) {
  Enter(node, incarnation);
  simulation_.Block(
      simulation_.Deadline(duration), [&] { return !AliveLocked(node, incarnation); }, nullptr);
  Enter(node, incarnation);
}

bool Network::Serve(int node, int port) {
  const std::string address = NodeAddress(node) + ":" + std::to_string(port);
  std::lock_guard lock(mutex_);
  if (served_.count(address)) return false;
  served_[address] = {node, std::make_shared<SimulatedStore>(simulation_)};
  return true;
}

void Network::StopServing(int node, int port) {
  {
    std::lock_guard lock(mutex_);
    served_.erase(NodeAddress(node) + ":" + std::to_string(port));
  }
  simulation_.Changed();
}

std::shared_ptr<SimulatedStore> Network::StoreAt(const std::string& address, int* host) {
  std::lock_guard lock(mutex_);
  auto it = served_.find(address);
  if (it == served_.end()) return nullptr;
  if (host != nullptr) *host = it->second.first;
  return it->second.second;
}

// --- SimClient -------------------------------------------------------------------------------

SimClient::SimClient(Network& network, int node, int incarnation, std::string address,
                     std::chrono::milliseconds reply_timeout)
    : network_(network),
      simulation_(network.simulation()),
      node_(node),
      incarnation_(incarnation),
      address_(std::move(address)) {
  timeout_ = reply_timeout;
}

void SimClient::ThrowIfGone() {
  if (!network_.Alive(node_, incarnation_)) throw NodeKilled{};
  if (interrupted_) throw store::StoreConnectionError("sim: the connection was interrupted");
}

std::shared_ptr<SimulatedStore> SimClient::Target() {
  auto store = network_.StoreAt(address_, nullptr);
  if (!store) throw store::StoreConnectionError("sim: connection refused by " + address_);
  return store;
}

bool SimClient::Reachable(int host) const {
  return !network_.PausedLocked(node_) && !network_.PausedLocked(host) &&
         network_.DeliversLocked(node_, host) && network_.DeliversLocked(host, node_);
}

void SimClient::Silent(const char* what, std::chrono::milliseconds timeout) {
  simulation_.Block(
      simulation_.Deadline(timeout),
      [&] {
        return !network_.AliveLocked(node_, incarnation_) || interrupted_ ||
               network_.StoreAt(address_, nullptr) == nullptr;
      },
      nullptr);
  ThrowIfGone();
  Target();  // refused once its host is gone
  // As TcpStoreClient's ReplyTimeout: a StoreConnectionError, not the StoreTimeout of a wait.
  throw store::StoreConnectionError(std::string("sim: no reply from ") + address_ + " to " + what +
                                    " within " + std::to_string(timeout.count()) + " ms");
}

template <typename Op>
auto SimClient::Call(const char* what, Op op) {
  network_.Enter(node_, incarnation_);
  ThrowIfGone();
  const auto delay = network_.Delay(node_);
  if (delay.count() > 0) network_.Sleep(node_, incarnation_, delay);
  int host = -1;
  auto store = network_.StoreAt(address_, &host);
  if (!store) throw store::StoreConnectionError("sim: connection refused by " + address_);
  if (network_.Paused(host) || !network_.Delivers(node_, host)) Silent(what, timeout_);
  auto result = op(*store);
  if (!network_.Delivers(host, node_)) Silent(what, timeout_);
  if (delay.count() > 0) network_.Sleep(node_, incarnation_, delay);
  return result;
}

void SimClient::Set(const std::string& key, const Bytes& value) {
  Call("set", [&](SimulatedStore& store) {
    store.Set(key, value);
    return 0;
  });
}

void SimClient::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  network_.Enter(node_, incarnation_);
  ThrowIfGone();
  int host = -1;
  auto store = network_.StoreAt(address_, &host);
  if (!store) throw store::StoreConnectionError("sim: connection refused by " + address_);
  bool arrived = false;
  simulation_.Block(
      simulation_.Deadline(timeout),
      [&] {
        if (!network_.AliveLocked(node_, incarnation_) || interrupted_ ||
            network_.StoreAt(address_, nullptr) == nullptr) {
          return true;
        }
        arrived = Reachable(host) && store->store::InMemoryStore::Check(keys);
        return arrived;
      },
      // Only writes of `keys` look at it; the network's changes (a kill, a pause, a cut, an
      // interrupt) look at every wait (Simulation::Changed()).
      store.get(), keys);
  ThrowIfGone();
  Target();
  if (!arrived) {
    // The client cancels its wait: a store that does not answer leaves it without a reply.
    bool answers = false;
    simulation_.Block(
        0, [&] { return answers = Reachable(host); }, nullptr);
    if (!answers) Silent("cancel_wait", timeout_);
    throw store::StoreTimeout(store::WaitTimeoutMessage(keys, timeout));
  }
  network_.Enter(node_, incarnation_);
}

Bytes SimClient::Get(const std::string& key) {
  Wait({key}, timeout_);
  return Target()->store::InMemoryStore::Get(key);
}

std::vector<Bytes> SimClient::MultiGet(const std::vector<std::string>& keys) {
  Wait(keys, timeout_);
  return Target()->store::InMemoryStore::MultiGet(keys);
}

std::int64_t SimClient::Add(const std::string& key, std::int64_t delta) {
  return Call("add", [&](SimulatedStore& store) { return store.Add(key, delta); });
}

Bytes SimClient::CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return Call("compare_set",
              [&](SimulatedStore& store) { return store.CompareSet(key, expected, desired); });
}

bool SimClient::Check(const std::vector<std::string>& keys) {
  return Call("check", [&](SimulatedStore& store) { return store.Check(keys); });
}

bool SimClient::DeleteKey(const std::string& key) {
  return Call("delete_key", [&](SimulatedStore& store) {
    const bool deleted = store.DeleteKey(key);
    simulation_.Changed();
    return deleted;
  });
}

std::int64_t SimClient::NumKeys() {
  return Call("num_keys", [&](SimulatedStore& store) { return store.NumKeys(); });
}

void SimClient::MultiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  Call("multi_set", [&](SimulatedStore& store) {
    store.MultiSet(keys, values);
    return 0;
  });
}

void SimClient::Append(const std::string& key, const Bytes& value) {
  Call("append", [&](SimulatedStore& store) {
    store.Append(key, value);
    return 0;
  });
}

void SimClient::Interrupt() {
  interrupted_ = true;
  simulation_.Changed();
}

// --- SimStoreSite ----------------------------------------------------------------------------

SimStoreSite::SimStoreSite(Network& network, int node, int incarnation,
                           std::chrono::milliseconds reply_timeout)
    : StoreSite(network.simulation()),
      network_(network),
      node_(node),
      incarnation_(incarnation),
      reply_timeout_(reply_timeout) {}

rendezvous::Reach SimStoreSite::ReachOf(const HostPort& at) {
  const int host = NodeOfAddress(at.host);
  if (host < 0) return rendezvous::Reach::kRefused;
  if (!network_.Delivers(node_, host) || !network_.Delivers(host, node_)) {
    return rendezvous::Reach::kSilent;
  }
  if (network_.Paused(host)) return rendezvous::Reach::kSilent;
  return network_.StoreAt(at.ToString(), nullptr) ? rendezvous::Reach::kAnswered
                                                  : rendezvous::Reach::kRefused;
}

rendezvous::Reach SimStoreSite::Probe(const HostPort& at, std::chrono::milliseconds timeout) {
  network_.Enter(node_, incarnation_);
  if (Cancelled()) return rendezvous::Reach::kSilent;
  const rendezvous::Reach reach = ReachOf(at);
  if (reach == rendezvous::Reach::kSilent) network_.Sleep(node_, incarnation_, timeout);
  return reach;
}

std::shared_ptr<store::Store> SimStoreSite::Connect(const HostPort& at,
                                                    std::chrono::milliseconds timeout) {
  network_.Enter(node_, incarnation_);
  if (ReachOf(at) != rendezvous::Reach::kAnswered) {
    network_.Sleep(node_, incarnation_, timeout);  // the real client retries until its timeout
    throw store::StoreConnectionError("sim: no store at " + at.ToString());
  }
  const auto delay = network_.Delay(node_);
  if (delay.count() > 0) network_.Sleep(node_, incarnation_, delay * 2);
  return std::make_shared<SimClient>(network_, node_, incarnation_, at.ToString(), reply_timeout_);
}

std::optional<HostPort> SimStoreSite::Serve(int port) {
  network_.Enter(node_, incarnation_);
  if (!network_.Serve(node_, port)) return std::nullopt;
  served_port_ = port;
  return HostPort{NodeAddress(node_), port};
}

void SimStoreSite::StopServing() {
  if (!served_port_) return;
  network_.StopServing(node_, *served_port_);
  served_port_.reset();
}

}  // namespace ddprun::sim
