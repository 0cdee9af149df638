// The events a launcher PeerMonitor posts to the agent's io_context, recorded for the monitor
// tests: Next() runs the io_context until one arrives (or a real deadline passes).
#pragma once
#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <string>

#include "common/asio.h"
#include "elastic/peer_monitor.h"

namespace ddprun::launcher::backend::testing {

struct MonitorEvent {
  enum class Kind { kRemoteFailure, kNodeLost, kMembershipChange };
  Kind kind;
  int node = -1;     // kNodeLost's node rank; kRemoteFailure's record's node rank
  std::string text;  // the reason; kRemoteFailure: the record's message
};

class MonitorEvents {
 public:
  elastic::PeerMonitor::Events Sink() {
    return {
        [this](const elastic::NodeFailure& record) {
          event_ = {MonitorEvent::Kind::kRemoteFailure, record.node_rank, record.failure.message};
        },
        [this](int node, const std::string& why) {
          event_ = {MonitorEvent::Kind::kNodeLost, node, why};
        },
        [this](const std::string& why) {
          event_ = {MonitorEvent::Kind::kMembershipChange, -1, why};
        },
    };
  }

  // The next event posted, running `io` for at most `real_timeout`; nullopt when none came.
  std::optional<MonitorEvent> Next(asio::io_context& io,
                                   std::chrono::milliseconds real_timeout = std::chrono::seconds{
                                       10}) {
    event_.reset();
    const auto deadline = std::chrono::steady_clock::now() + real_timeout;
    io.restart();
    const auto busy = asio::make_work_guard(io);  // blocks for a post instead of returning
    while (!event_ && std::chrono::steady_clock::now() < deadline) io.run_one_until(deadline);
    return event_;
  }

  // An event already posted, without waiting for one.
  std::optional<MonitorEvent> Posted(asio::io_context& io) {
    event_.reset();
    io.restart();
    io.poll();
    return event_;
  }

 private:
  std::optional<MonitorEvent> event_;
};

}  // namespace ddprun::launcher::backend::testing
