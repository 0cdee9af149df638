#include "launcher/backend/elastic_monitor.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "common/cancellable_pause.h"
#include "common/logging.h"
#include "elastic/node_failure.h"
#include "rendezvous/member_liveness.h"
#include "rendezvous/member_watch.h"

namespace ddprun::launcher::backend {
namespace {

using rendezvous::ChangeNotice;
using rendezvous::RoundChange;

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
        clock_(*options_.clock),
        pause_(clock_),
        thread_([this] { Loop(); }) {}

  ~Watcher() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      if (store_) store_->Interrupt();
      if (liveness_) liveness_->Interrupt();
    }
    pause_.Cancel();
    thread_.join();
  }

 private:
  void Loop() {
    try {
      const auto timeout = options_.interval * options_.max_attempts;
      auto store = options_.connect(timeout);
      {
        std::lock_guard lock(mutex_);
        store_ = store;
        if (stop_) return;
      }
      rendezvous::LivenessScope scope{
          store, {options_.rendezvous.run_id}, round_, me_, neighbour_, timeout, &clock_};
      // Told by the liveness's own thread (etcd's keeper): this watch may be blocked in a store
      // call meanwhile, and the workers must stop within the lease's TTL all the same.
      scope.on_lost = [post = post_](const std::string& why) {
        post([why](const Events& events) {
          events.on_node_lost(-1, "lost the rendezvous store (" + why + ")");
        });
      };
      auto liveness = options_.liveness ? options_.liveness(scope, clock_.Now())
                                        : std::make_unique<rendezvous::HeartbeatCounterLiveness>(
                                              scope, clock_.Now());
      {
        std::lock_guard lock(mutex_);
        liveness_ = std::move(liveness);
        if (stop_) return;
      }
      rendezvous::DynamicRendezvousOptions on_this_clock = options_.rendezvous;
      on_this_clock.clock = &clock_;
      rendezvous::DynamicRendezvous rendezvous(on_this_clock, store);
      Watch(*store, rendezvous);
    } catch (const std::exception& error) {
      if (stop_) return;
      const std::string why = std::string("lost the rendezvous store (") + error.what() + ")";
      post_([why](const Events& events) { events.on_node_lost(-1, why); });
    }
  }

  // Beats every interval; looks at the neighbour every quarter interval, so that its silence is
  // seen at most a quarter interval late (loss declared within interval x attempts + 1/4).
  void Watch(store::Store& store, rendezvous::DynamicRendezvous& rendezvous) {
    const std::string change_key = rendezvous.RoundKey(round_, "change");
    const auto tick = std::max(options_.interval / 4, std::chrono::milliseconds{1});
    bool delivered = false;
    bool declared = false;
    liveness_->Beat();
    auto next_beat = clock_.Now() + options_.interval;
    while (!stop_) {
      if (!delivered) {
        try {
          store.Wait({change_key}, tick);
          Deliver(RoundChange::Decode(store.GetString(change_key)));
          delivered = true;  // keep beating and watching while the agent rejoins
          continue;
        } catch (const store::StoreTimeout&) {
        }
      } else if (!pause_.Pause(tick)) {  // cut short by Unwatch
        return;
      }
      if (clock_.Now() >= next_beat) {
        liveness_->Beat();
        next_beat = clock_.Now() + options_.interval;
      }
      if (neighbour_ < 0 || declared) continue;
      const auto now = clock_.Now();
      if (liveness_->NeighbourGone(now)) {
        DeclareLost(store, rendezvous, liveness_->WhyGone(now), delivered);
        delivered = true;
        declared = true;
      }
    }
  }

  // The change wakes every other member's watch on its next Wait. This member's agent is told
  // before the accounting: over a slow link (ten round trips of 200 ms) it would otherwise
  // rejoin so late that the next round, waiting for the survivors, counted it gone (chaos seed
  // ci 9).
  void DeclareLost(store::Store& store, rendezvous::DynamicRendezvous& rendezvous,
                   const std::string& why, bool delivered) {
    const std::string host =
        rendezvous::MemberHost(store, {options_.rendezvous.run_id}, round_, neighbour_);
    const RoundChange lost = rendezvous::NeighbourLost(neighbour_, host, why);
    const RoundChange in_force = rendezvous.Announce(round_, lost);
    if (!delivered) Deliver(in_force);
    rendezvous.AccountGone(round_, neighbour_, lost);
  }

  void Deliver(const RoundChange& change) {
    const ChangeNotice notice = rendezvous::NoticeOf(change, me_);
    switch (notice.kind) {
      case ChangeNotice::Kind::kNone:
        return;
      case ChangeNotice::Kind::kRemoteFailure: {
        const elastic::NodeFailure record = elastic::DecodeNodeFailure(notice.text);
        post_([record](const Events& events) { events.on_remote_failure(record); });
        return;
      }
      case ChangeNotice::Kind::kNodeLost: {
        const int node = notice.node;
        const std::string why = notice.text;
        post_([node, why](const Events& events) { events.on_node_lost(node, why); });
        return;
      }
      case ChangeNotice::Kind::kMembershipChange: {
        const std::string why = notice.text;
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
  std::mutex mutex_;  // store_ and liveness_, for the destructor on another thread
  Clock& clock_;
  CancellablePause pause_;  // between looks once the change is delivered; Cancel: stop
  std::shared_ptr<store::Store> store_;
  std::unique_ptr<rendezvous::MemberLiveness> liveness_;
  std::thread thread_;
};

ElasticMonitor::ElasticMonitor(asio::io_context& io, ElasticMonitorOptions options)
    : ThreadedMonitor(io), options_(std::move(options)) {}

std::unique_ptr<ThreadedMonitor::RoundWatch> ElasticMonitor::StartWatch(
    const rendezvous::RendezvousInfo& round, Post post) {
  return std::make_unique<Watcher>(options_, round, std::move(post));
}

}  // namespace ddprun::launcher::backend
