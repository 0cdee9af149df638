#include "launcher/event_log_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/errors.h"
#include "common/logging.h"

namespace ddprun::launcher {

JsonLinesEventLog::JsonLinesEventLog(const std::string& path, const std::string& given_as)
    : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw UsageError(given_as + "=" + path + ": " + std::strerror(errno) +
                     "; pass a writable file path");
  }
}

JsonLinesEventLog::~JsonLinesEventLog() {
  if (fd_ >= 0) ::close(fd_);
}

void JsonLinesEventLog::Record(const std::string& event, const nlohmann::json& fields) {
  nlohmann::json line = fields;
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  line["time"] = std::chrono::duration<double>(now).count();
  line["event"] = event;
  line["pid"] = static_cast<int>(::getpid());
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const ssize_t written = ::write(fd_, text.data(), text.size());
  if (written != static_cast<ssize_t>(text.size()) && !warned_) {
    warned_ = true;
    spdlog::warn("event log {}: write failed ({}); later events may be missing", path_,
                 written < 0 ? std::strerror(errno) : "short write");
  }
}

}  // namespace ddprun::launcher
