#include "elastic/file_timer.h"

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>

namespace ddprun::elastic {
namespace {

constexpr const char* kWhat = "file timer request";

std::string Quoted(const char* field) { return std::string("\"") + field + "\""; }

// The member `field` of `object`, or nullptr with `error` set when it is absent.
const nlohmann::json* Member(const nlohmann::json& object, const char* field, std::string* error) {
  const auto found = object.find(field);
  if (found == object.end()) {
    *error = std::string(kWhat) + " lacks " + Quoted(field);
    return nullptr;
  }
  return &*found;
}

// The integer member `field`; nullopt with `error` set when it is absent, not an integer or
// beyond long long.
std::optional<long long> IntegerField(const nlohmann::json& object, const char* field,
                                      std::string* error) {
  const auto* value = Member(object, field, error);
  if (!value) return std::nullopt;
  if (!value->is_number_integer() ||
      (value->is_number_unsigned() && value->get<unsigned long long>() > LLONG_MAX)) {
    *error = std::string(kWhat) + "'s " + Quoted(field) + " is not an integer: " + value->dump();
    return std::nullopt;
  }
  return value->get<long long>();
}

}  // namespace

std::optional<TimerRequest> ParseTimerRequest(std::string_view line, std::string* error) {
  std::string ignored;
  if (!error) error = &ignored;
  if (line.size() > kMaxTimerRequestBytes) {
    *error = std::string(kWhat) + " of " + std::to_string(line.size()) + " bytes exceeds " +
             std::to_string(kMaxTimerRequestBytes);
    return std::nullopt;
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    *error = std::string(kWhat) + " is not JSON: " + e.what();
    return std::nullopt;
  }
  if (!json.is_object()) {
    *error = std::string(kWhat) + " is not a JSON object: " + std::string(json.type_name());
    return std::nullopt;
  }
  TimerRequest request;
  const auto version = IntegerField(json, "version", error);
  if (!version) return std::nullopt;
  if (*version != 1) {
    *error = std::string(kWhat) + " of version " + std::to_string(*version) + " (only 1 is known)";
    return std::nullopt;
  }
  const auto pid = IntegerField(json, "pid", error);
  if (!pid) return std::nullopt;
  if (*pid <= 0 || *pid > INT_MAX) {
    *error = std::string(kWhat) + "'s \"pid\" " + std::to_string(*pid) + " is not a positive pid";
    return std::nullopt;
  }
  request.pid = static_cast<pid_t>(*pid);
  const auto* scope = Member(json, "scope_id", error);
  if (!scope) return std::nullopt;
  if (!scope->is_string()) {
    *error = std::string(kWhat) + "'s \"scope_id\" is not a string: " + scope->dump();
    return std::nullopt;
  }
  request.scope_id = scope->get<std::string>();
  const auto* expiration = Member(json, "expiration_time", error);
  if (!expiration) return std::nullopt;
  if (!expiration->is_number()) {
    *error = std::string(kWhat) + "'s \"expiration_time\" is not a number: " + expiration->dump();
    return std::nullopt;
  }
  request.expiration_time = expiration->get<double>();
  const auto signal = IntegerField(json, "signal", error);
  if (!signal) return std::nullopt;
  if (*signal < 0 || *signal > 64) {
    *error = std::string(kWhat) + "'s \"signal\" " + std::to_string(*signal) + " is outside 0..64";
    return std::nullopt;
  }
  request.signal = static_cast<int>(*signal);
  error->clear();
  return request;
}

void FileTimerTable::Apply(const TimerRequest& request) {
  auto key = std::make_pair(request.pid, request.scope_id);
  if (request.expiration_time < 0) {
    timers_.erase(key);
    return;
  }
  timers_[std::move(key)] = request;
}

std::vector<TimerExpiry> FileTimerTable::TakeExpired(double now_epoch_s) {
  // Per pid: whether it has an expired timer, and its earliest expired one with a signal.
  std::map<pid_t, std::optional<TimerExpiry>> expired;
  for (const auto& [key, timer] : timers_) {
    if (timer.expiration_time > now_epoch_s) continue;
    auto& chosen = expired[timer.pid];
    if (timer.signal <= 0) continue;
    if (!chosen || timer.expiration_time < chosen->expiration_time) {
      chosen = TimerExpiry{timer.pid, timer.scope_id, timer.expiration_time, timer.signal};
    }
  }
  std::vector<TimerExpiry> out;
  for (const auto& [pid, chosen] : expired) {
    if (chosen) out.push_back(*chosen);
  }
  std::erase_if(timers_, [&](const auto& entry) {
    const auto& timer = entry.second;
    if (timer.expiration_time <= now_epoch_s) return true;
    const auto found = expired.find(timer.pid);
    return found != expired.end() && found->second.has_value();
  });
  std::stable_sort(out.begin(), out.end(), [](const TimerExpiry& a, const TimerExpiry& b) {
    return a.expiration_time < b.expiration_time;
  });
  return out;
}

std::optional<double> FileTimerTable::NextExpiration() const {
  std::optional<double> earliest;
  for (const auto& [key, timer] : timers_) {
    if (!earliest || timer.expiration_time < *earliest) earliest = timer.expiration_time;
  }
  return earliest;
}

void FileTimerTable::ForgetPid(pid_t pid) {
  std::erase_if(timers_, [pid](const auto& entry) { return entry.first.first == pid; });
}

}  // namespace ddprun::elastic
