// What the launcher's PeerMonitors share: one watch per round, each a thread that posts its
// events to the agent's io_context, where an event of a watch that has since ended (Unwatch,
// or the next Watch) is dropped. A monitor says how a round is watched in StartWatch.
#pragma once
#include <functional>
#include <memory>

#include "common/asio.h"
#include "elastic/peer_monitor.h"

namespace ddprun::launcher::backend {

class ThreadedMonitor : public elastic::PeerMonitor {
 public:
  // Posts `fire(events)` to the agent's loop, where it runs only if its watch is still current.
  using Post = std::function<void(std::function<void(const Events&)>)>;
  // A running watch; its destructor stops it (and joins its thread) promptly.
  class RoundWatch {
   public:
    virtual ~RoundWatch() = default;
  };

  explicit ThreadedMonitor(asio::io_context& io) : io_(io) {}
  ~ThreadedMonitor() override { Unwatch(); }

  void Watch(const rendezvous::RendezvousInfo& round, Events events) final {
    Unwatch();
    const int generation = *generation_;
    std::weak_ptr<int> current = generation_;
    auto shared_events = std::make_shared<Events>(std::move(events));
    Post post = [this, generation, current, shared_events](auto fire) {
      asio::post(io_, [generation, current, shared_events, fire = std::move(fire)] {
        const auto alive = current.lock();
        if (alive && *alive == generation) fire(*shared_events);
      });
    };
    watch_ = StartWatch(round, std::move(post));
  }

  void Unwatch() final {
    ++*generation_;
    watch_.reset();
  }

 protected:
  virtual std::unique_ptr<RoundWatch> StartWatch(const rendezvous::RendezvousInfo& round,
                                                 Post post) = 0;

 private:
  asio::io_context& io_;
  std::shared_ptr<int> generation_ = std::make_shared<int>(0);  // io thread only
  std::unique_ptr<RoundWatch> watch_;
};

}  // namespace ddprun::launcher::backend
