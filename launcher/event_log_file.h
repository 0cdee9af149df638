// --event_log FILE (or $DDPRUN_EVENT_LOG): the agent's events appended to FILE as JSON lines,
// {"time": <epoch seconds>, "event": "...", "pid": <launcher pid>, ...fields}. One write(2) per
// line on an O_APPEND descriptor, so the agents of several nodes (or jobs) may share one file.
#pragma once
#include <string>

#include "elastic/event_sink.h"

namespace ddprun::launcher {

class JsonLinesEventLog : public elastic::EventSink {
 public:
  // Opens (creates) `path` now; throws UsageError naming `given_as` when it cannot.
  JsonLinesEventLog(const std::string& path, const std::string& given_as);
  ~JsonLinesEventLog() override;
  JsonLinesEventLog(const JsonLinesEventLog&) = delete;
  JsonLinesEventLog& operator=(const JsonLinesEventLog&) = delete;

  void Record(const std::string& event, const nlohmann::json& fields) override;

 private:
  int fd_ = -1;
  std::string path_;
  bool warned_ = false;
};

}  // namespace ddprun::launcher
