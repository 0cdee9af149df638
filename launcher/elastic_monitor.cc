#include "launcher/elastic_monitor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/logging.h"
#include "elastic/node_failure.h"
#include "rendezvous/heartbeat_watch.h"

namespace ddprun::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using rendezvous::RoundChange;
using Kind = RoundChange::Kind;

std::string SecondsText(std::chrono::milliseconds duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", static_cast<double>(duration.count()) / 1000.0);
  return text;
}

}  // namespace

// One round's watch: its thread and its own connection (interrupted to stop it). After the
// round's change is delivered it goes on beating and watching the neighbour until stopped.
class ElasticMonitor::Watcher : public ThreadedMonitor::RoundWatch {
 public:
  Watcher(const ElasticMonitorOptions& options, const rendezvous::RendezvousInfo& round, Post post)
      : options_(options),
        round_(round.round),
        me_(round.group_rank),
        neighbour_(rendezvous::RingNeighbour(round.group_rank, round.group_world_size)),
        post_(std::move(post)),
        thread_([this] { Loop(); }) {}

  ~Watcher() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      if (store_) store_->Interrupt();
    }
    stopped_.notify_all();
    thread_.join();
  }

 private:
  void Loop() {
    try {
      auto store = options_.connect(options_.interval * options_.max_attempts);
      {
        std::lock_guard lock(mutex_);
        store_ = store;
        if (stop_) return;
      }
      rendezvous::DynamicRendezvous rendezvous(options_.rendezvous, store);
      Watch(*store, rendezvous);
    } catch (const std::exception& error) {
      if (stop_) return;
      const std::string why = std::string("lost the rendezvous store (") + error.what() + ")";
      post_([why](const Events& events) { events.on_node_lost(-1, why); });
    }
  }

  // Beats every interval; reads the neighbour every quarter interval, so that its silence is
  // seen at most a quarter interval late (loss declared within interval x attempts + 1/4).
  void Watch(rendezvous::Store& store, rendezvous::DynamicRendezvous& rendezvous) {
    const std::string change_key = rendezvous.RoundKey(round_, "change");
    const auto tick = std::max(options_.interval / 4, std::chrono::milliseconds{1});
    rendezvous::HeartbeatWatch neighbour(options_.interval * options_.max_attempts, Clock::now());
    bool delivered = false;
    bool declared = false;
    Beat(store, rendezvous);
    auto next_beat = Clock::now() + options_.interval;
    while (!stop_) {
      if (!delivered) {
        try {
          store.Wait({change_key}, tick);
          Deliver(RoundChange::Decode(store.GetString(change_key)));
          delivered = true;  // keep beating and watching while the agent rejoins
          continue;
        } catch (const rendezvous::StoreTimeout&) {
        }
      } else if (!PauseUnlessStopped(tick)) {
        return;
      }
      if (Clock::now() >= next_beat) {
        Beat(store, rendezvous);
        next_beat = Clock::now() + options_.interval;
      }
      if (neighbour_ < 0 || declared) continue;
      const auto beats =
          store.Add(rendezvous.RoundKey(round_, "hb/" + std::to_string(neighbour_)), 0);
      const auto now = Clock::now();
      if (neighbour.Observe(beats, now)) {
        DeclareLost(store, rendezvous, neighbour.SilentFor(now));
        declared = true;
      }
    }
  }

  // A timer cut short by Unwatch; false when stopped.
  bool PauseUnlessStopped(std::chrono::milliseconds duration) {
    std::unique_lock lock(mutex_);
    return !stopped_.wait_for(lock, duration, [this] { return stop_.load(); });
  }

  // The counter is what the ring neighbour watches; the wall-clock time is for views
  // (`ddprun-store rdzv`), which have no earlier reading to compare with.
  void Beat(rendezvous::Store& store, rendezvous::DynamicRendezvous& rendezvous) {
    const std::string me = std::to_string(me_);
    store.Add(rendezvous.RoundKey(round_, "hb/" + me), 1);
    const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    store.SetString(rendezvous.RoundKey(round_, "hb_at/" + me), std::to_string(now_ms.count()));
  }

  // The change wakes this watch too (and every other member's) on its next Wait.
  void DeclareLost(rendezvous::Store& store, rendezvous::DynamicRendezvous& rendezvous,
                   std::chrono::milliseconds silent) {
    std::string host = "<unknown>";
    const std::string node_key =
        rendezvous.RoundKey(round_, "node/" + std::to_string(neighbour_ + 1));
    if (store.Check({node_key})) {
      host = nlohmann::json::parse(store.GetString(node_key)).value("host", host);
    }
    rendezvous.DeclareGone(round_, neighbour_,
                           {Kind::kNodeLost, neighbour_, host,
                            "heartbeats stopped " + SecondsText(silent) +
                                " ago (keep_alive_interval x keep_alive_max_attempt)"});
  }

  void Deliver(const RoundChange& change) {
    switch (change.kind) {
      case Kind::kFailure: {
        if (change.group_rank == me_) return;  // this agent's own announcement
        const elastic::NodeFailure record = elastic::DecodeNodeFailure(change.detail);
        post_([record](const Events& events) { events.on_remote_failure(record); });
        return;
      }
      case Kind::kNodeLost: {
        const int node = change.group_rank;
        const std::string why = "host " + change.host + ", " + change.detail;
        post_([node, why](const Events& events) { events.on_node_lost(node, why); });
        return;
      }
      case Kind::kNodeWaiting:
      case Kind::kNodeLeaving:
      case Kind::kClosed: {
        if (change.group_rank == me_ && change.kind == Kind::kNodeLeaving) return;
        std::string why = change.kind == Kind::kNodeLeaving
                              ? "node " + std::to_string(change.group_rank) + " (" + change.host +
                                    ") left: " + change.detail
                              : change.detail;
        post_([why](const Events& events) { events.on_membership_change(why); });
        return;
      }
    }
  }

  ElasticMonitorOptions options_;
  int round_;
  int me_;
  int neighbour_;
  Post post_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable stopped_;
  std::shared_ptr<rendezvous::Store> store_;
  std::thread thread_;
};

ElasticMonitor::ElasticMonitor(asio::io_context& io, ElasticMonitorOptions options)
    : ThreadedMonitor(io), options_(std::move(options)) {}

std::unique_ptr<ThreadedMonitor::RoundWatch> ElasticMonitor::StartWatch(
    const rendezvous::RendezvousInfo& round, Post post) {
  return std::make_unique<Watcher>(options_, round, std::move(post));
}

}  // namespace ddprun::launcher
