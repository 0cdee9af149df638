#include "launcher/backend/node_monitor.h"

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "common/duration.h"
#include "common/host_port.h"
#include "common/logging.h"
#include "elastic/round_sync.h"
#include "rendezvous/heartbeat_watch.h"
#include "rendezvous/static_rendezvous.h"
#include "store/prefix_store.h"
#include "store/tcp_store_client.h"

namespace ddprun::launcher::backend {
namespace {

using store::Store;

}  // namespace

// One round's watch: the thread, its stop flag and the connection that wakes it.
class NodeMonitor::Watcher : public ThreadedMonitor::RoundWatch {
 public:
  Watcher(const NodeMonitorOptions& options, const rendezvous::RendezvousInfo& round, Post post)
      : options_(options),
        prefix_(rendezvous::StaticRendezvous::RoundPrefix(options.run_id, round.round)),
        me_(round.group_rank),
        world_(round.group_world_size),
        post_(std::move(post)),
        thread_([this] { Loop(); }) {}

  ~Watcher() override {
    stop_ = true;
    Wake();
    thread_.join();
  }

 private:
  std::shared_ptr<Store> Connect() const {
    if (options_.connect) {
      return std::make_shared<store::PrefixStore>(
          prefix_, options_.connect(
                       rendezvous::StoreSilenceTimeout(options_.interval, options_.max_attempts)));
    }
    return std::make_shared<store::PrefixStore>(
        prefix_, std::make_shared<store::TcpStoreClient>(MonitorClientOptions(options_)));
  }

  void Wake() {
    std::lock_guard lock(mutex_);
    // A watch that ended by itself (an event, a lost store) needs no wake-up: a write to a store
    // that no longer answers would hold Unwatch for the store's whole silence timeout.
    if (!waker_ || ended_) return;
    try {
      waker_->SetString(elastic::InboxKey(me_), "stop");
    } catch (const std::exception&) {  // the store is gone: the watch ends by itself
    }
  }

  void Loop() {
    try {
      auto store = Connect();
      {
        std::lock_guard lock(mutex_);
        waker_ = Connect();
      }
      Watch(*store);
    } catch (const store::StoreConnectionError& error) {
      if (!stop_) LostStore(error.what());
    } catch (const std::exception& error) {
      spdlog::warn("node monitor stopped: {}", error.what());
    }
    std::lock_guard lock(mutex_);
    ended_ = true;
  }

  void Watch(Store& store) {
    const auto patience = options_.interval * options_.max_attempts;
    store.Add(elastic::HeartbeatKey(me_), 1);
    for (int node = 0; node < world_; ++node) {
      beats_.emplace(node, rendezvous::HeartbeatWatch(patience, options_.clock->Now()));
    }
    while (!stop_) {
      try {
        store.Wait({elastic::InboxKey(me_)}, options_.interval);
        if (stop_) return;
        const auto record = elastic::DecodeNodeFailure(store.GetString(elastic::InboxKey(me_)));
        post_([record](const Events& events) { events.on_remote_failure(record); });
        return;
      } catch (const store::StoreTimeout&) {
      }
      if (stop_) return;
      if (const auto lost = BeatAndCheck(store)) {
        const std::string why =
            "no heartbeat for " +
            DurationText(std::chrono::duration_cast<std::chrono::milliseconds>(patience), 2) +
            " (keep_alive_interval x keep_alive_max_attempt)";
        const int node = *lost;
        post_([node, why](const Events& events) { events.on_node_lost(node, why); });
        return;
      }
    }
  }

  // Every node watches every other one (static jobs are small; elastic rounds use a ring).
  std::optional<int> BeatAndCheck(Store& store) {
    store.Add(elastic::HeartbeatKey(me_), 1);
    const auto now = options_.clock->Now();
    for (int node = 0; node < world_; ++node) {
      if (node == me_) continue;
      if (beats_.at(node).Observe(store.Add(elastic::HeartbeatKey(node), 0), now)) return node;
    }
    return std::nullopt;
  }

  void LostStore(const std::string& error) {
    const std::string why = "lost the connection to its store at " +
                            HostPort{options_.store_host, options_.store_port}.ToString() + " (" +
                            error + ")";
    post_([why](const Events& events) { events.on_node_lost(0, why); });
  }

  NodeMonitorOptions options_;
  std::string prefix_;
  int me_;
  int world_;
  Post post_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::shared_ptr<Store> waker_;
  bool ended_ = false;  // the loop returned (under mutex_)
  std::map<int, rendezvous::HeartbeatWatch> beats_;
  std::thread thread_;
};

store::ClientOptions MonitorClientOptions(const NodeMonitorOptions& options) {
  store::ClientOptions client;
  client.host = options.store_host;
  client.port = options.store_port;
  // A reply (or a connection) slower than the heartbeat timeout counts the store as lost; a
  // faster one does not, as for a peer's heartbeats (rendezvous/heartbeat_watch.h).
  client.timeout = rendezvous::StoreSilenceTimeout(options.interval, options.max_attempts);
  client.connect_timeout = client.timeout;
  client.auth = options.auth;
  return client;
}

NodeMonitor::NodeMonitor(asio::io_context& io, NodeMonitorOptions options)
    : ThreadedMonitor(io), options_(std::move(options)) {}

std::unique_ptr<ThreadedMonitor::RoundWatch> NodeMonitor::StartWatch(
    const rendezvous::RendezvousInfo& round, Post post) {
  return std::make_unique<Watcher>(options_, round, std::move(post));
}

}  // namespace ddprun::launcher::backend
