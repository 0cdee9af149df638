// The EventSink seam: every agent transition as one event (a name and JSON fields) for
// --event_log. The agent adds its context (role, host, round, group rank, restart count); the
// sink adds the time. JsonLinesEventLog (launcher/) appends one JSON object per line to a file;
// tests record events in memory.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace ddprun::elastic {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Must not throw (a full disk never stops training; the sink reports it once itself).
  virtual void Record(const std::string& event, const nlohmann::json& fields) = 0;
};

}  // namespace ddprun::elastic
