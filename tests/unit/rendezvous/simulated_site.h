// A simulated site for the rendezvous handler's tests (store_relocate_test.cc,
// lost_quorum_test.cc): stores at "host:port" addresses that answer or refuse, a served store
// at 127.0.0.1, and the nodes' options, all on a Simulation (tests/unit/store/simulated_store.h),
// so that simulated seconds cost no real time.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "rendezvous/elastic_rendezvous_handler.h"
#include "tests/unit/store/simulated_store.h"

namespace ddprun::rendezvous::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;
using store::testing::SimulatedStore;
using store::testing::Simulation;

inline constexpr int kPort = 29500;
inline const RendezvousKeys kKeys{"job"};

inline std::string At(const std::string& host) { return host + ":" + std::to_string(kPort); }

// Addresses with a store answer; any other refuses. Serve adds one at 127.0.0.1:<port>.
class SimSite : public StoreSite {
 public:
  explicit SimSite(Simulation& simulation) : StoreSite(simulation), simulation_(simulation) {}

  void Put(const std::string& at, std::shared_ptr<SimulatedStore> store) {
    std::lock_guard lock(mutex_);
    stores_[at] = std::move(store);
  }
  void Remove(const std::string& at) {  // nothing listens there any more: refused
    std::lock_guard lock(mutex_);
    stores_.erase(at);
  }
  std::shared_ptr<SimulatedStore> StoreOf(const std::string& at) {
    std::lock_guard lock(mutex_);
    auto it = stores_.find(at);
    return it == stores_.end() ? nullptr : it->second;
  }
  int Probes(const std::string& at) {
    std::lock_guard lock(mutex_);
    return probes_[at];
  }
  int stops = 0;
  std::optional<ddprun::Clock::TimePoint> stopped_at;

  Reach Probe(const HostPort& at, milliseconds) override {
    std::lock_guard lock(mutex_);
    ++probes_[at.ToString()];
    return stores_.count(at.ToString()) ? Reach::kAnswered : Reach::kRefused;
  }
  std::shared_ptr<store::Store> Connect(const HostPort& at, milliseconds) override {
    if (auto found = StoreOf(at.ToString())) return found;
    throw store::StoreConnectionError("sim: no store at " + at.ToString());
  }
  std::optional<HostPort> Serve(int port) override {
    const HostPort local{"127.0.0.1", port};
    if (StoreOf(local.ToString())) return std::nullopt;
    served_ = local.ToString();
    Put(served_, std::make_shared<SimulatedStore>(simulation_, seconds(30)));
    return local;
  }
  void StopServing() override {
    ++stops;
    stopped_at = simulation_.Now();
    std::lock_guard lock(mutex_);
    stores_.erase(served_);
  }

 private:
  Simulation& simulation_;
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<SimulatedStore>> stores_;
  std::map<std::string, int> probes_;
  std::string served_;
};

class FakeWorkerStore : public WorkerStoreHost {
 public:
  int Serve() override { return 4321; }
  void Stop() override {}
};

inline DynamicRendezvousOptions NodeOptions(Simulation& simulation, int id) {
  DynamicRendezvousOptions options;
  options.run_id = "job";
  options.min_nodes = 2;
  options.max_nodes = 3;
  options.node = {"host" + std::to_string(id), "10.0.0.1" + std::to_string(id), 100 + id, 1, false};
  options.join_timeout = seconds(60);
  options.last_call_timeout = seconds(1);
  options.keep_alive_interval = seconds(1);
  options.clock = &simulation;
  return options;
}

// The store the survivors moved to 10.0.0.11 (epoch 1, ready).
inline std::shared_ptr<SimulatedStore> MovedStore(Simulation& simulation) {
  auto moved = std::make_shared<SimulatedStore>(simulation, seconds(30));
  moved->SetString(
      kKeys.MovedStore(),
      nlohmann::json{{"epoch", 1}, {"addr", At("10.0.0.11")}, {"basis", 0}, {"ready", true}}
          .dump());
  return moved;
}

}  // namespace ddprun::rendezvous::testing
