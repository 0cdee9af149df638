// The launcher's NodeMonitor (static multi-node rounds) over an in-memory store, on a fake
// clock: a failure record in this node's inbox is posted; a node whose heartbeat counter stood
// still for interval x attempts on the clock is posted lost, not before, and not one that
// beats; a store it cannot reach is node 0 lost. Its Wait on the inbox paces its loop in real
// time (one interval: 20 ms here); every decision reads the fake clock.
#include "launcher/backend/node_monitor.h"

#include <catch2/catch.hpp>
#include <memory>

#include "elastic/node_failure.h"
#include "elastic/round_sync.h"
#include "rendezvous/static_rendezvous.h"
#include "store/in_memory_store.h"
#include "store/prefix_store.h"
#include "tests/unit/common/fake_clock.h"
#include "tests/unit/launcher/backend/monitor_events.h"

namespace ddprun::launcher::backend {
namespace {

using namespace std::chrono_literals;
using ddprun::testing::FakeClock;
using testing::MonitorEvent;
using testing::MonitorEvents;

constexpr std::chrono::milliseconds kInterval = 20ms;  // x 3 attempts: lost after 60 ms
constexpr std::chrono::seconds kPromptly{10};
constexpr int kRound = 1;

struct Harness {
  asio::io_context io;
  std::shared_ptr<store::InMemoryStore> store = std::make_shared<store::InMemoryStore>(30s);
  // The round's keys, as the monitor sees them.
  store::PrefixStore round{rendezvous::StaticRendezvous::RoundPrefix("job", kRound), store};
  FakeClock clock;
  MonitorEvents events;
  NodeMonitor monitor{io, Options()};

  NodeMonitorOptions Options() {
    NodeMonitorOptions options;
    options.run_id = "job";
    options.interval = kInterval;
    options.max_attempts = 3;
    options.connect = [store = store](std::chrono::milliseconds) -> std::shared_ptr<store::Store> {
      return store->Connect();
    };
    options.clock = &clock;
    return options;
  }

  // This node is node `me` of `world`.
  void Watch(int me, int world) {
    rendezvous::RendezvousInfo info;
    info.round = kRound;
    info.group_rank = me;
    info.group_world_size = world;
    monitor.Watch(info, events.Sink());
  }

  std::int64_t Beats(int node) { return round.Add(elastic::HeartbeatKey(node), 0); }
};

}  // namespace

TEST_CASE("node monitor: a failure record in this node's inbox is posted", "[node_monitor]") {
  Harness h;
  h.Watch(0, 2);
  elastic::NodeFailure record{1, "host1", {}};
  record.failure.status = ExitStatus::Exited(3);
  record.failure.message = "worker 2 failed";
  h.round.SetString(elastic::InboxKey(0), elastic::EncodeNodeFailure(record));
  const auto event = h.events.Next(h.io);
  REQUIRE(event);
  CHECK(event->kind == MonitorEvent::Kind::kRemoteFailure);
  CHECK(event->node == 1);
  CHECK(event->text == "worker 2 failed");
}

TEST_CASE("node monitor: a node silent for interval x attempts is lost but not one that beats",
          "[node_monitor]") {
  Harness h;
  h.Watch(0, 3);
  h.round.Wait({elastic::HeartbeatKey(2)}, kPromptly);  // it read the others' counters
  h.round.Add(elastic::HeartbeatKey(1), 1);             // node 1 beats; node 2 never does
  h.clock.Advance(40ms);
  REQUIRE(h.clock.AwaitReads(2, kPromptly));  // looked again: node 1 moved at 40 ms
  CHECK(h.Beats(0) >= 2);                     // it beats at every look
  h.clock.Advance(19ms);
  REQUIRE(h.clock.AwaitReads(2, kPromptly));  // node 2 silent for 59 ms: not yet
  CHECK_FALSE(h.events.Posted(h.io));
  h.clock.Advance(1ms);
  const auto event = h.events.Next(h.io);
  REQUIRE(event);
  CHECK(event->kind == MonitorEvent::Kind::kNodeLost);
  CHECK(event->node == 2);
  CHECK(event->text == "no heartbeat for 0.06 s (keep_alive_interval x keep_alive_max_attempt)");
}

TEST_CASE("node monitor: its store may be as silent as a peer before it counts as lost",
          "[node_monitor]") {
  // Connecting and each reply get the heartbeat timeout (interval x attempts), not less: a store
  // slow for 2 s of a 3 s heartbeat timeout is not lost (issue 26: it was, one node stopped
  // without a record and its SIGTERM reached the other as "node 1 was lost").
  NodeMonitorOptions options;
  options.store_host = "10.0.0.1";
  options.store_port = 29500;
  options.interval = 1000ms;
  options.max_attempts = 3;
  const store::ClientOptions client = MonitorClientOptions(options);
  CHECK(client.host == "10.0.0.1");
  CHECK(client.port == 29500);
  CHECK(client.timeout == 3000ms);
  CHECK(client.connect_timeout == 3000ms);

  Harness h;  // the connector is asked for the same bound (20 ms x 3)
  std::chrono::milliseconds asked{0};
  const auto store = h.store;
  NodeMonitorOptions recorded = h.Options();
  recorded.connect = [store, &asked](std::chrono::milliseconds timeout) {
    asked = timeout;
    return std::shared_ptr<store::Store>(store->Connect());
  };
  NodeMonitor monitor(h.io, recorded);
  rendezvous::RendezvousInfo info;
  info.round = kRound;
  info.group_rank = 0;
  info.group_world_size = 2;
  monitor.Watch(info, h.events.Sink());
  h.round.Wait({elastic::HeartbeatKey(0)}, kPromptly);  // it connected and beat
  monitor.Unwatch();
  CHECK(asked == 60ms);
}

TEST_CASE("node monitor: a store it cannot reach is node 0 lost", "[node_monitor]") {
  asio::io_context io;
  FakeClock clock;
  MonitorEvents events;
  NodeMonitorOptions options;
  options.store_host = "10.0.0.1";
  options.store_port = 29500;
  options.connect = [](std::chrono::milliseconds) -> std::shared_ptr<store::Store> {
    throw store::StoreConnectionError("connection refused");
  };
  options.clock = &clock;
  NodeMonitor monitor(io, options);
  rendezvous::RendezvousInfo info;
  info.group_world_size = 2;
  monitor.Watch(info, events.Sink());
  const auto event = events.Next(io);
  REQUIRE(event);
  CHECK(event->kind == MonitorEvent::Kind::kNodeLost);
  CHECK(event->node == 0);
  CHECK(event->text == "lost the connection to its store at 10.0.0.1:29500 (connection refused)");
}

}  // namespace ddprun::launcher::backend
