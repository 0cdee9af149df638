// The launcher's ElasticMonitor over an in-memory rendezvous store, on a fake clock whose pauses
// the test drives: the round's change is posted as the agent's event; this member beats every
// interval of its clock; a neighbour silent for interval x attempts is declared lost (the
// round's change), not before; after the change the watch goes on; Unwatch ends it at once.
// The monitor's Wait on the change key paces its loop in real time (a quarter interval: 10 ms
// here); every decision reads the fake clock.
#include "launcher/backend/elastic_monitor.h"

#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "elastic/node_failure.h"
#include "store/in_memory_store.h"
#include "tests/unit/common/fake_clock.h"
#include "tests/unit/launcher/backend/monitor_events.h"
#include "tests/unit/store/forwarding_store.h"

namespace ddprun::launcher::backend {
namespace {

using namespace std::chrono_literals;
using ddprun::testing::FakeClock;
using rendezvous::DynamicRendezvous;
using rendezvous::RoundChange;
using testing::MonitorEvent;
using testing::MonitorEvents;
using Kind = RoundChange::Kind;

constexpr std::chrono::milliseconds kInterval = 40ms;  // x 3 attempts: lost after 120 ms
constexpr std::chrono::seconds kPromptly{10};

// A slow link in one place: an ADD of `key` waits until the gate opens (at most kPromptly).
struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  std::string key;  // none: open
  bool reached = false;

  void Close(std::string on_key) {
    std::lock_guard lock(mutex);
    key = std::move(on_key);
  }
  void Open() {
    std::lock_guard lock(mutex);
    key.clear();
    changed.notify_all();
  }
  bool AwaitReached() {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, kPromptly, [&] { return reached; });
  }
  void Pass(const std::string& add_key) {
    std::unique_lock lock(mutex);
    if (key.empty() || add_key != key) return;
    reached = true;
    changed.notify_all();
    changed.wait_for(lock, kPromptly, [&] { return key.empty(); });
  }
};

// The monitor's connection: the in-memory store's, through the gate.
class GatedStore : public store::testing::ForwardingStore {
 public:
  GatedStore(std::shared_ptr<store::Store> store, std::shared_ptr<Gate> gate)
      : ForwardingStore(std::move(store)), gate_(std::move(gate)) {}
  std::int64_t Add(const std::string& key, std::int64_t delta) override {
    gate_->Pass(key);
    return ForwardingStore::Add(key, delta);
  }

 private:
  std::shared_ptr<Gate> gate_;
};

struct Harness {
  asio::io_context io;
  std::shared_ptr<store::InMemoryStore> store = std::make_shared<store::InMemoryStore>(30s);
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  FakeClock clock{FakeClock::PauseMode::kUntilAdvanced};
  MonitorEvents events;
  ElasticMonitor monitor{io, Options()};

  ~Harness() { gate->Open(); }

  ElasticMonitorOptions Options() {
    ElasticMonitorOptions options;
    options.rendezvous.run_id = "job";
    options.rendezvous.node = {"host0", "10.0.0.0", 1000, 2, false};
    options.connect = [store = store,
                       gate = gate](std::chrono::milliseconds) -> std::shared_ptr<store::Store> {
      return std::make_shared<GatedStore>(store->Connect(), gate);
    };
    options.interval = kInterval;
    options.max_attempts = 3;
    options.clock = &clock;
    return options;
  }

  // This node is group rank `me` of `round` with `world` members.
  void Watch(int round, int me, int world) {
    rendezvous::RendezvousInfo info;
    info.round = round;
    info.group_rank = me;
    info.group_world_size = world;
    monitor.Watch(info, events.Sink());
  }

  // Another member's view of the rendezvous (announces changes, names keys).
  DynamicRendezvous Member(int id) const {
    rendezvous::DynamicRendezvousOptions options;
    options.run_id = "job";
    options.node = {"host" + std::to_string(id), "10.0.0." + std::to_string(id), 1000 + id, 2,
                    false};
    return DynamicRendezvous(options, store);
  }

  std::string Key(int round, const std::string& name) const {
    return Member(9).RoundKey(round, name);
  }
  std::int64_t Counter(int round, const std::string& name) {
    return store->Add(Key(round, name), 0);
  }
  rendezvous::RendezvousKeys Keys() const { return Member(9).Keys(); }

  // Waits until `done()` holds, looking again each time the monitor reads its clock.
  template <typename Done>
  bool Eventually(Done done) {
    const auto deadline = std::chrono::steady_clock::now() + kPromptly;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      clock.AwaitReads(1, 100ms);
    }
    return true;
  }
};

}  // namespace

TEST_CASE("elastic monitor: the round's change is posted as the agent's event",
          "[elastic_monitor]") {
  Harness h;
  SECTION("another member's failure") {
    h.Watch(0, 0, 3);
    elastic::NodeFailure record{2, "host2", {}};
    record.failure.status = ExitStatus::Exited(1);
    record.failure.message = "worker 5 failed";
    h.Member(2).Announce(0, {Kind::kFailure, 2, "host2", elastic::EncodeNodeFailure(record)});
    const auto event = h.events.Next(h.io);
    REQUIRE(event);
    CHECK(event->kind == MonitorEvent::Kind::kRemoteFailure);
    CHECK(event->node == 2);
    CHECK(event->text == "worker 5 failed");
  }
  SECTION("a lost node") {
    h.Watch(1, 0, 3);
    h.Member(1).Announce(1, {Kind::kNodeLost, 2, "host2", "heartbeats stopped 15.0 s ago"});
    const auto event = h.events.Next(h.io);
    REQUIRE(event);
    CHECK(event->kind == MonitorEvent::Kind::kNodeLost);
    CHECK(event->node == 2);
    CHECK(event->text == "host host2, heartbeats stopped 15.0 s ago");
  }
  SECTION("a node waiting to join") {
    h.Watch(2, 0, 1);
    h.Member(7).Announce(2, {Kind::kNodeWaiting, -1, "host7", "node host7 is waiting to join"});
    const auto event = h.events.Next(h.io);
    REQUIRE(event);
    CHECK(event->kind == MonitorEvent::Kind::kMembershipChange);
    CHECK(event->text == "node host7 is waiting to join");
  }
  SECTION("not this member's own failure") {
    h.Watch(3, 1, 3);
    h.Member(1).Announce(3, {Kind::kFailure, 1, "host1", "{}"});
    REQUIRE(h.clock.AwaitPauses(1));  // it took the change in and pauses between looks now
    CHECK_FALSE(h.events.Posted(h.io));
  }
}

TEST_CASE("elastic monitor: this member beats every interval of its clock", "[elastic_monitor]") {
  Harness h;
  h.Watch(0, 0, 1);  // alone: nobody to watch
  h.store->Wait({h.Keys().Heartbeat(0, 0)}, kPromptly);
  CHECK(h.store->Add(h.Keys().Heartbeat(0, 0), 0) == 1);  // at once
  CHECK(h.store->GetString(h.Keys().HeartbeatAt(0, 0)) == std::to_string(WallClockMs(h.clock)));
  REQUIRE(h.clock.AwaitReads(6, kPromptly));  // several looks, no time passed: no beat
  CHECK(h.store->Add(h.Keys().Heartbeat(0, 0), 0) == 1);
  h.clock.Advance(kInterval - 1ms);
  REQUIRE(h.clock.AwaitReads(6, kPromptly));
  CHECK(h.store->Add(h.Keys().Heartbeat(0, 0), 0) == 1);
  h.clock.Advance(1ms);
  const std::string now_ms = std::to_string(WallClockMs(h.clock));
  // The counter, then the time: both written by the beat.
  CHECK(h.Eventually([&] {
    return h.store->Add(h.Keys().Heartbeat(0, 0), 0) == 2 &&
           h.store->GetString(h.Keys().HeartbeatAt(0, 0)) == now_ms;
  }));
}

TEST_CASE("elastic monitor: a neighbour silent for interval x attempts is declared lost",
          "[elastic_monitor]") {
  Harness h;
  h.store->SetString(h.Key(0, "node/2"), R"({"host": "host1"})");  // group rank 1's record
  h.Watch(0, 0, 2);
  h.store->Wait({h.Keys().Heartbeat(0, 1)}, kPromptly);  // it looked at its neighbour's counter
  h.clock.Advance(3 * kInterval - 1ms);
  REQUIRE(h.clock.AwaitReads(6, kPromptly));  // looked again: still within the timeout
  CHECK_FALSE(h.store->Check({h.Key(0, "change")}));
  h.clock.Advance(1ms);
  h.store->Wait({h.Key(0, "change")}, kPromptly);
  const RoundChange change = RoundChange::Decode(h.store->GetString(h.Key(0, "change")));
  CHECK(change.kind == Kind::kNodeLost);
  CHECK(change.group_rank == 1);
  CHECK(change.host == "host1");
  CHECK(change.detail ==
        "heartbeats stopped 0.1 s ago (keep_alive_interval x keep_alive_max_attempt)");
  const auto event = h.events.Next(h.io);  // its own declaration wakes it too
  REQUIRE(event);
  CHECK(event->kind == MonitorEvent::Kind::kNodeLost);
  CHECK(event->node == 1);
  CHECK(event->text ==
        "host host1, heartbeats stopped 0.1 s ago (keep_alive_interval x keep_alive_max_attempt)");
  // Counted in the next round's accounting, after the agent was told.
  CHECK(h.Eventually([&] { return h.Counter(1, "lost") == 1; }));
}

TEST_CASE("elastic monitor: its own declaration reaches its agent before the accounting",
          "[elastic_monitor]") {
  Harness h;
  h.store->SetString(h.Key(0, "node/2"), R"({"host": "host1"})");
  h.gate->Close(h.Keys().Gone(0, 1) + "/n");  // the accounting's first write hangs on a slow link
  h.Watch(0, 0, 2);
  h.store->Wait({h.Keys().Heartbeat(0, 1)}, kPromptly);
  h.clock.Advance(3 * kInterval);
  REQUIRE(h.gate->AwaitReached());
  const auto event = h.events.Next(h.io, 2s);  // posted while the accounting waits
  REQUIRE(event);
  CHECK(event->kind == MonitorEvent::Kind::kNodeLost);
  CHECK(event->node == 1);
  CHECK(h.Counter(1, "lost") == 0);
  h.gate->Open();
  CHECK(h.Eventually([&] { return h.Counter(1, "lost") == 1; }));
  CHECK_FALSE(h.events.Posted(h.io));  // told once
}

TEST_CASE("elastic monitor: after the change it goes on beating and watching",
          "[elastic_monitor]") {
  Harness h;
  h.Watch(0, 0, 2);
  h.store->Wait({h.Keys().Heartbeat(0, 1)}, kPromptly);
  h.Member(5).Announce(0, {Kind::kNodeWaiting, -1, "host5", "node host5 is waiting to join"});
  REQUIRE(h.events.Next(h.io));
  REQUIRE(h.clock.AwaitPauses(1));  // between looks now: a pause on its clock
  h.clock.Advance(3 * kInterval);
  // The neighbour lost while the others rejoin is still declared gone (the change stays).
  CHECK(h.Eventually([&] { return h.Counter(1, "lost") == 1; }));
  CHECK(h.store->Add(h.Keys().Heartbeat(0, 0), 0) >= 2);
  CHECK(RoundChange::Decode(h.store->GetString(h.Key(0, "change"))).kind == Kind::kNodeWaiting);
}

TEST_CASE("elastic monitor: Unwatch ends a watch in its pause at once", "[elastic_monitor]") {
  Harness h;
  h.Watch(0, 0, 1);
  h.Member(5).Announce(0, {Kind::kNodeWaiting, -1, "host5", "node host5 is waiting to join"});
  REQUIRE(h.events.Next(h.io));
  REQUIRE(h.clock.AwaitPauses(1));  // the fake pause lasts until the clock moves (it won't)
  auto unwatched = std::async(std::launch::async, [&] { h.monitor.Unwatch(); });
  CHECK(unwatched.wait_for(kPromptly) == std::future_status::ready);
}

// A liveness that never beats anywhere and hands its on_lost out to the test.
class HandedLiveness : public rendezvous::MemberLiveness {
 public:
  void Beat() override {}
  bool NeighbourGone(TimePoint) override { return false; }
  std::string WhyGone(TimePoint) const override { return ""; }
};

TEST_CASE("elastic monitor: a liveness lost on its own thread is a lost store at once",
          "[elastic_monitor]") {
  asio::io_context io;
  FakeClock clock{FakeClock::PauseMode::kUntilAdvanced};
  MonitorEvents events;
  auto store = std::make_shared<store::InMemoryStore>(30s);
  std::promise<std::function<void(const std::string&)>> handed;
  auto on_lost = handed.get_future();
  ElasticMonitorOptions options;
  options.rendezvous.run_id = "job";
  options.connect = [store](std::chrono::milliseconds) -> std::shared_ptr<store::Store> {
    return store->Connect();
  };
  options.interval = kInterval;
  options.clock = &clock;
  options.liveness = [&handed](const rendezvous::LivenessScope& scope,
                               rendezvous::MemberLiveness::TimePoint) {
    handed.set_value(scope.on_lost);
    return std::make_unique<HandedLiveness>();
  };
  ElasticMonitor monitor(io, options);
  rendezvous::RendezvousInfo round;
  round.group_world_size = 2;
  monitor.Watch(round, events.Sink());
  REQUIRE(on_lost.wait_for(kPromptly) == std::future_status::ready);
  const auto tell = on_lost.get();
  REQUIRE(tell);
  // The etcd keeper's thread, while the watch waits on the store (no clock moves, no beat).
  std::thread([tell] { tell("this node's etcd lease expired: no etcd member renewed it"); }).join();
  const auto event = events.Next(io);
  REQUIRE(event);
  CHECK(event->kind == MonitorEvent::Kind::kNodeLost);
  CHECK(event->node == -1);
  CHECK(event->text ==
        "lost the rendezvous store (this node's etcd lease expired: no etcd member renewed it)");
}

TEST_CASE("elastic monitor: a rendezvous store it cannot reach is a lost node",
          "[elastic_monitor]") {
  asio::io_context io;
  FakeClock clock;
  MonitorEvents events;
  ElasticMonitorOptions options;
  options.connect = [](std::chrono::milliseconds) -> std::shared_ptr<store::Store> {
    throw store::StoreConnectionError("connection refused");
  };
  options.clock = &clock;
  ElasticMonitor monitor(io, options);
  monitor.Watch(rendezvous::RendezvousInfo{}, events.Sink());
  const auto event = events.Next(io);
  REQUIRE(event);
  CHECK(event->kind == MonitorEvent::Kind::kNodeLost);
  CHECK(event->node == -1);
  CHECK(event->text == "lost the rendezvous store (connection refused)");
}

}  // namespace ddprun::launcher::backend
