// The EventSink seam: every agent transition as one event (a name and JSON fields) for
// --event_log. The agent adds its context (role, host, round, group rank, restart count); the
// sink adds the time. JsonLinesEventLog (launcher/) appends one JSON object per line to a file;
// tests record events in memory.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ddprun::elastic {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Must not throw (a full disk never stops training; the sink reports it once itself).
  virtual void Record(const std::string& event, const nlohmann::json& fields) = 0;
};

// Tells every event to each of several sinks, in order (null entries are skipped).
class EventSinks : public EventSink {
 public:
  explicit EventSinks(std::vector<EventSink*> sinks) : sinks_(std::move(sinks)) {}
  void Record(const std::string& event, const nlohmann::json& fields) override {
    for (EventSink* sink : sinks_) {
      if (sink != nullptr) sink->Record(event, fields);
    }
  }

 private:
  std::vector<EventSink*> sinks_;
};

}  // namespace ddprun::elastic
