// A fake operating system for the store failover policy (rendezvous/store_failover.h): stores
// are in-memory stores keyed by "host:port", each address answers, refuses or stays silent as
// scripted, and the site's time is a FakeClock that only the calls move: a silent probe takes its
// timeout, a failed connect its timeout, a slow link its latency, a pause its duration. Scripted
// changes happen at fake times (At, AnswersFrom), so nothing sleeps and a test spends (fake)
// heartbeat timeouts in milliseconds. Single-threaded.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/store_failover.h"
#include "store/in_memory_store.h"
#include "tests/unit/common/fake_clock.h"

namespace ddprun::rendezvous::testing {

// Holds the clock so that it is built before the StoreSite that keeps a reference to it.
struct FakeSiteClock {
  ddprun::testing::FakeClock fake_clock;
};

class FakeSite : private FakeSiteClock, public StoreSite {
 public:
  using Millis = std::chrono::milliseconds;

  FakeSite() : StoreSite(fake_clock) {}

  // --- scripting ---
  void SetReach(const std::string& at, Reach reach) { sites_[at].reach = reach; }
  // `at` answers with `store` (a connection per Connect).
  void Put(const std::string& at, std::shared_ptr<store::InMemoryStore> store) {
    sites_[at].store = std::move(store);
    sites_[at].reach = Reach::kAnswered;
  }
  // Runs `action` once the clock reaches start + `offset`.
  void At(Millis offset, std::function<void()> action) { fake_clock.At(offset, std::move(action)); }
  // `at` is `before` until start + `offset`, then answers with `store`.
  void AnswersFrom(const std::string& at, Millis offset,
                   std::shared_ptr<store::InMemoryStore> store, Reach before = Reach::kRefused) {
    SetReach(at, before);
    At(offset, [this, at, store] { Put(at, store); });
  }
  void TakePort(int port) { taken_.insert(port); }
  // A connection to `at` (TCP and the token's handshake) takes `latency`: a slow link.
  void SetConnectLatency(const std::string& at, Millis latency) { sites_[at].latency = latency; }
  // `at` answers, but refuses this node's token (another job's store, or another token).
  void RefuseToken(const std::string& at) {
    sites_[at].reach = Reach::kAnswered;
    sites_[at].refuses_token = true;
  }

  // --- observing ---
  Millis Elapsed() const { return std::chrono::duration_cast<Millis>(fake_clock.Elapsed()); }
  int Probes(const std::string& at) const {
    auto it = probes_.find(at);
    return it == probes_.end() ? 0 : it->second;
  }
  int TotalProbes() const {
    int total = 0;
    for (const auto& [at, count] : probes_) total += count;
    return total;
  }
  const std::vector<int>& ServeCalls() const { return serve_calls_; }
  std::shared_ptr<store::InMemoryStore> StoreOf(const std::string& at) const {
    auto it = sites_.find(at);
    return it == sites_.end() ? nullptr : it->second.store;
  }

  // --- StoreSite ---
  Reach Probe(const HostPort& at, Millis timeout) override {
    const std::string key = at.ToString();
    ++probes_[key];
    if (Cancelled()) return Reach::kSilent;  // returns promptly once cancelled
    const Reach reach = ReachOf(key);
    if (reach == Reach::kSilent) fake_clock.Advance(timeout);
    return reach;
  }

  std::shared_ptr<store::Store> Connect(const HostPort& at, Millis timeout) override {
    const std::string key = at.ToString();
    if (ReachOf(key) == Reach::kAnswered && sites_[key].refuses_token) {
      throw store::StoreAuthError("fake: the store at " + key + " refused this node's token");
    }
    if (ReachOf(key) != Reach::kAnswered || !sites_[key].store) {
      fake_clock.Advance(timeout);  // the real client retries until its timeout
      throw store::StoreConnectionError("fake: no store at " + key);
    }
    if (sites_[key].latency > timeout) {
      fake_clock.Advance(timeout);
      throw store::StoreConnectionError("fake: the connection to " + key + " took longer than " +
                                        std::to_string(timeout.count()) + " ms");
    }
    fake_clock.Advance(sites_[key].latency);
    return sites_[key].store->Connect();
  }

  std::optional<HostPort> Serve(int port) override {
    serve_calls_.push_back(port);
    if (taken_.count(port)) return std::nullopt;
    taken_.insert(port);
    const HostPort local{"127.0.0.1", port};
    Put(local.ToString(), std::make_shared<store::InMemoryStore>(std::chrono::seconds(5)));
    return local;
  }

 private:
  struct Address {
    Reach reach = Reach::kRefused;
    std::shared_ptr<store::InMemoryStore> store;
    bool refuses_token = false;
    Millis latency{0};
  };

  Reach ReachOf(const std::string& at) const {
    auto it = sites_.find(at);
    return it == sites_.end() ? Reach::kRefused : it->second.reach;
  }

  std::map<std::string, Address> sites_;
  std::map<std::string, int> probes_;
  std::set<int> taken_;
  std::vector<int> serve_calls_;
};

}  // namespace ddprun::rendezvous::testing
