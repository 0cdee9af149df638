#include "elastic/node_failure.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace ddprun::elastic {

std::string EncodeNodeFailure(const NodeFailure& record) {
  const ProcessFailure& f = record.failure;
  nlohmann::json json = {
      {"node_rank", record.node_rank},
      {"host", record.host},
      {"rank", f.global_rank},
      {"local_rank", f.local_rank},
      {"exitcode", f.status.Signaled() ? nlohmann::json() : nlohmann::json(f.status.code)},
      {"signal", f.status.Signaled() ? f.status.code : 0},
      {"pid", static_cast<long long>(f.pid)},
      {"time_ms",
       std::chrono::duration_cast<std::chrono::milliseconds>(f.time.time_since_epoch()).count()},
      {"error_file", f.error_file},
      {"message", f.message},
      {"hang", f.hang},
      {"hang_before_progress", f.hang_before_progress},
      {"hangs_before_progress", f.hangs_before_progress}};
  return json.dump();
}

NodeFailure DecodeNodeFailure(const std::string& text) {
  try {
    const auto json = nlohmann::json::parse(text);
    NodeFailure record;
    record.node_rank = json.at("node_rank").get<int>();
    record.host = json.at("host").get<std::string>();
    ProcessFailure& f = record.failure;
    f.global_rank = json.at("rank").get<int>();
    f.local_rank = json.at("local_rank").get<int>();
    const int signal = json.at("signal").get<int>();
    f.status = signal != 0 ? ExitStatus::Signaled(signal)
                           : ExitStatus::Exited(json.at("exitcode").get<int>());
    f.pid = static_cast<pid_t>(json.at("pid").get<long long>());
    f.time = SystemTime{std::chrono::milliseconds{json.at("time_ms").get<long long>()}};
    f.error_file = json.at("error_file").get<std::string>();
    f.message = json.at("message").get<std::string>();
    f.hang = json.value("hang", false);  // absent in records of older agents (these too:)
    f.hang_before_progress = json.value("hang_before_progress", false);
    f.hangs_before_progress = json.value("hangs_before_progress", 0);
    return record;
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(std::string("bad node failure record: ") + error.what());
  }
}

}  // namespace ddprun::elastic
