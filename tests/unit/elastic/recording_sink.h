// An EventSink that keeps every event, for agent tests that check what the agent recorded.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "elastic/event_sink.h"

namespace ddprun::elastic::testing {

class RecordingSink : public EventSink {
 public:
  void Record(const std::string& event, const nlohmann::json& fields) override {
    names.push_back(event);
    all.push_back(fields);
  }
  int Count(const std::string& name) const {
    return static_cast<int>(std::count(names.begin(), names.end(), name));
  }
  // The fields of the last event called `name` (an empty object when there is none).
  nlohmann::json Last(const std::string& name) const {
    for (std::size_t i = names.size(); i-- > 0;) {
      if (names[i] == name) return all[i];
    }
    return nlohmann::json::object();
  }

  std::vector<std::string> names;
  std::vector<nlohmann::json> all;
};

}  // namespace ddprun::elastic::testing
