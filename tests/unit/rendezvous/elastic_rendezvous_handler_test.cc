// ElasticRendezvousHandler over a replicated rendezvous store (etcd: replicated_store): it is
// never served here nor moved, and an outage of it is waited out until the join timeout. The
// store is an in-memory store behind a switch that makes every call fail as a lost connection;
// the site's clock is a FakeClock (a pause moves it on; scripted changes happen at fake times),
// so no test sleeps.
#include "rendezvous/elastic_rendezvous_handler.h"

#include <catch2/catch.hpp>
#include <functional>
#include <map>

#include "store/in_memory_store.h"
#include "tests/unit/common/fake_clock.h"
#include "tests/unit/store/forwarding_store.h"

namespace {

using ddprun::HostPort;
using namespace ddprun::rendezvous;
namespace store = ddprun::store;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Forwards to `store` while up; every call fails as a lost connection while down.
class OutageStore : public store::testing::ForwardingStore {
 public:
  OutageStore(std::shared_ptr<store::Store> store, const bool& down,
              std::function<void(const std::string&)> on_set = {})
      : ForwardingStore(std::move(store)), down_(down), on_set_(std::move(on_set)) {}
  void Set(const std::string& key, const store::Bytes& value) override {
    ForwardingStore::Set(key, value);
    if (on_set_) on_set_(key);
  }

 private:
  store::Store& Next() override {
    if (down_) throw store::StoreConnectionError("fake etcd: no member answered");
    return ForwardingStore::Next();
  }
  const bool& down_;
  std::function<void(const std::string&)> on_set_;
};

// Holds the clock so that it is built before the StoreSite that keeps a reference to it.
struct SiteClock {
  ddprun::testing::FakeClock fake_clock;
};

// The etcd cluster as the handler sees it: one address, a store that can go down, a fake clock.
class ReplicatedSite : private SiteClock, public StoreSite {
 public:
  bool down = false;
  int serves = 0;
  int probes = 0;
  std::function<void(const std::string& key)> on_set;  // scripted events as keys are written

  ReplicatedSite() : StoreSite(fake_clock) {}

  Reach Probe(const HostPort&, milliseconds) override {
    ++probes;
    return Reach::kAnswered;
  }
  std::shared_ptr<store::Store> Connect(const HostPort&, milliseconds) override {
    return std::make_shared<OutageStore>(keys_.Connect(), down, [this](const std::string& key) {
      if (on_set) on_set(key);
    });
  }
  std::optional<HostPort> Serve(int) override {
    ++serves;
    return std::nullopt;
  }
  // Runs `action` once the clock reaches `elapsed` (scripted events as the clock moves).
  void At(milliseconds elapsed, std::function<void()> action) {
    fake_clock.At(elapsed, std::move(action));
  }
  milliseconds Elapsed() const {
    return std::chrono::duration_cast<milliseconds>(fake_clock.Elapsed());
  }
  store::InMemoryStore& Keys() { return keys_; }

 private:
  store::InMemoryStore keys_{seconds(5)};
};

class FakeWorkerStore : public WorkerStoreHost {
 public:
  int Serve() override { return 4321; }
  void Stop() override {}
};

ElasticHandlerOptions Options() {
  ElasticHandlerOptions options;
  options.rendezvous.run_id = "job";
  options.rendezvous.node = {"host0", "10.0.0.1", 100, 2, false};
  options.rendezvous.join_timeout = seconds(10);
  options.advertised_addr = "10.0.0.1";
  options.endpoints = {{"etcd1", 2379}, {"etcd2", 2379}};
  options.replicated_store = true;
  options.outage_retry = seconds(1);
  return options;
}

TEST_CASE("a replicated store is joined as is: never served, probed or moved", "[rendezvous]") {
  ReplicatedSite site;
  FakeWorkerStore workers;
  ElasticRendezvousHandler handler(Options(), site, workers);
  const RendezvousInfo first = handler.NextRendezvous();
  CHECK(first.round == 0);
  CHECK(first.group_world_size == 1);
  CHECK(first.master_addr == "10.0.0.1");
  CHECK(first.master_port == 4321);
  CHECK(handler.StoreAddress().ToString() == "etcd1:2379");
  CHECK(site.serves == 0);
  CHECK(site.probes == 0);
  CHECK(site.Elapsed() == milliseconds{0});
}

TEST_CASE("an outage of the replicated store shorter than the join timeout is waited out",
          "[rendezvous]") {
  ReplicatedSite site;
  FakeWorkerStore workers;
  site.down = true;
  site.At(seconds(6), [&] { site.down = false; });
  ElasticRendezvousHandler handler(Options(), site, workers);
  CHECK(handler.NextRendezvous().round == 0);
  CHECK(site.Elapsed() == seconds(6));  // one try per outage_retry until it answered
  CHECK(site.serves == 0);
}

TEST_CASE("an outage of the replicated store past the join timeout is one error", "[rendezvous]") {
  ReplicatedSite site;
  FakeWorkerStore workers;
  ElasticRendezvousHandler handler(Options(), site, workers);
  REQUIRE(handler.NextRendezvous().round == 0);
  site.down = true;  // quorum lost while the job ran; the next round cannot form
  CHECK_THROWS_MATCHES(
      handler.NextRendezvous(), RendezvousConnectionError,
      Catch::Matchers::Message("the rendezvous store did not answer for the join timeout (10 s): "
                               "fake etcd: no member answered"));
  CHECK(site.Elapsed() == seconds(10));
  CHECK(site.serves == 0);  // nothing tried to take the store over
}

TEST_CASE("a replicated store that never answered fails within the read timeout", "[rendezvous]") {
  ReplicatedSite site;
  FakeWorkerStore workers;
  site.down = true;  // a wrong endpoint, or a cluster that is not up
  ElasticHandlerOptions options = Options();
  options.read_timeout = seconds(4);
  ElasticRendezvousHandler handler(options, site, workers);
  CHECK_THROWS_MATCHES(
      handler.NextRendezvous(), RendezvousConnectionError,
      Catch::Matchers::Message("the rendezvous store never answered for the read timeout (4 s): "
                               "fake etcd: no member answered"));
  CHECK(site.Elapsed() == seconds(4));
}

TEST_CASE("shutdown during an outage of the replicated store ends the join at once",
          "[rendezvous]") {
  ReplicatedSite site;
  FakeWorkerStore workers;
  site.down = true;
  ElasticRendezvousHandler handler(Options(), site, workers);
  site.At(seconds(3), [&] { handler.Shutdown(); });
  CHECK_THROWS_AS(handler.NextRendezvous(), RendezvousClosedError);
  CHECK(site.Elapsed() == seconds(3));
}

TEST_CASE("a join cut off by the store after its arrival resumes its ticket", "[rendezvous]") {
  ReplicatedSite site;
  FakeWorkerStore workers;
  ElasticHandlerOptions options = Options();
  options.rendezvous.max_nodes = 1;
  int cuts = 0;
  site.on_set = [&](const std::string& key) {  // the outage comes right after its record
    if (key == "ddprun/rdzv/job/r0/node/1" && cuts++ == 0) site.down = true;
  };
  site.At(milliseconds(1), [&] { site.down = false; });  // back once the handler waited at all
  ElasticRendezvousHandler handler(options, site, workers);
  const RendezvousInfo info = handler.NextRendezvous();
  CHECK(cuts == 2);        // the record was written again by the resumed join
  CHECK(info.round == 0);  // a second ticket would be past MAX: round 1
  CHECK(info.group_rank == 0);
  CHECK(SeqValue{site.Keys().Add("ddprun/rdzv/job/r0/seq", 0)}.Arrivals() == 1);
  CHECK(site.Elapsed() == seconds(1));  // one outage_retry
}

}  // namespace
