#include "elastic/failure.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "common/integer.h"
#include "common/local_time.h"

namespace ddprun::elastic {
namespace {

constexpr std::size_t kMaxBorderWidth = 60;
constexpr const char* kNoTraceback =
    "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html";

std::string FallbackMessage(const WorkerExit& exit) {
  if (!exit.spawn_error.empty()) return exit.spawn_error;
  if (!exit.status.Signaled()) return kNoTraceback;
  const auto name = SignalName(exit.status.code);
  if (!name) return "<N/A>";
  return "Signal " + std::to_string(exit.status.code) + " (" + *name + ") received by PID " +
         std::to_string(exit.pid);
}

SystemTime FromEpochSeconds(const nlohmann::json& value) {
  if (!value.is_string()) return SystemTime{std::chrono::seconds{value.get<long long>()}};
  const auto seconds = ParseInt(value.get<std::string>());
  if (!seconds) throw std::invalid_argument("timestamp=" + NotAnInteger(value.get<std::string>()));
  return SystemTime{std::chrono::seconds{*seconds}};
}

// Fills message and time from torchrun's error-file JSON; throws on an unexpected shape.
void ApplyErrorFile(const std::string& text, ProcessFailure& failure) {
  const auto json = nlohmann::json::parse(text);
  const auto& message = json.at("message");
  if (message.is_string()) {
    failure.message = message.get<std::string>();
    if (json.contains("timestamp")) failure.time = FromEpochSeconds(json.at("timestamp"));
    return;
  }
  const auto extra = message.value("extraInfo", nlohmann::json::object());
  failure.message = extra.value("py_callstack", message.value("message", std::string("<N/A>")));
  if (extra.contains("timestamp")) failure.time = FromEpochSeconds(extra.at("timestamp"));
}

std::string FormatTime(SystemTime time) { return LocalTimeText(time, "%Y-%m-%d_%H:%M:%S"); }

std::string Indent(const std::string& text) {
  std::string out;
  for (const char c : text) {
    out += c;
    if (c == '\n') out += "  ";
  }
  return out;
}

std::string FormatFailure(std::size_t index, const ProcessFailure& failure,
                          const std::string& host) {
  std::ostringstream out;
  out << "[" << index << "]:\n"
      << "  time      : " << FormatTime(failure.time) << "\n"
      << "  host      : " << host << "\n"
      << "  rank      : " << failure.global_rank << " (local_rank: " << failure.local_rank << ")\n"
      << "  exitcode  : " << failure.status.TorchrunCode() << " (pid: " << failure.pid << ")\n"
      << "  error_file: " << failure.error_file << "\n"
      << "  traceback : " << Indent(failure.message);
  return out.str();
}

std::size_t LongestLine(const std::string& text) {
  std::size_t longest = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) longest = std::max(longest, line.size());
  return longest;
}

}  // namespace

ProcessFailure MakeFailure(const WorkerExit& exit, int global_rank, const std::string& error_file) {
  ProcessFailure failure{exit.local_rank, global_rank,          exit.pid, exit.status, exit.time,
                         "<N/A>",         FallbackMessage(exit)};
  if (!exit.error_file_json && exit.spawn_error.empty() && !exit.stderr_tail.empty()) {
    // No @record: what the worker last said beats a link to the docs.
    failure.message = (exit.status.Signaled() ? failure.message + "\n" : std::string()) +
                      "last lines of stderr:\n" + exit.stderr_tail;
  }
  if (!exit.error_file_json) return failure;
  failure.error_file = error_file;
  try {
    ApplyErrorFile(*exit.error_file_json, failure);
  } catch (const std::exception& error) {
    failure.message = "unreadable error file (" + std::string(error.what()) + ")";
  }
  return failure;
}

std::size_t RootCauseIndex(const std::vector<ProcessFailure>& failures) {
  const auto first = std::min_element(
      failures.begin(), failures.end(),
      [](const ProcessFailure& a, const ProcessFailure& b) { return a.time < b.time; });
  return static_cast<std::size_t>(first - failures.begin());
}

std::string FormatFailureSummary(const std::string& entrypoint, const std::string& host,
                                 const std::vector<ProcessFailure>& failures) {
  const std::string title = entrypoint + " FAILED";
  const std::size_t root = RootCauseIndex(failures);
  std::size_t width = title.size();
  std::string root_text;
  std::string others;
  for (std::size_t i = 0; i < failures.size(); ++i) {
    const std::string text = FormatFailure(i, failures[i], host);
    width = std::max(width, LongestLine(text));
    if (i == root) {
      root_text = text;
    } else {
      others += (others.empty() ? "" : "\n") + text;
    }
  }
  width = std::min(width, kMaxBorderWidth);
  const std::string border(width, '=');
  const std::string section(width, '-');
  return border + "\n" + title + "\n" + section + "\nFailures:\n" +
         (others.empty() ? "  <NO_OTHER_FAILURES>" : others) + "\n" + section +
         "\nRoot Cause (first observed failure):\n" + root_text + "\n" + border;
}

}  // namespace ddprun::elastic
