#include "launcher/process/proc_table.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "common/integer.h"
#include "launcher/process/pidfd.h"

namespace ddprun::launcher::process {
namespace {

// A pid or session id: an integer that fits an int.
std::optional<int> IdField(std::string_view text) {
  const auto value = ParseInt(text);
  if (!value || !std::in_range<int>(*value)) return std::nullopt;
  return static_cast<int>(*value);
}

// The whitespace-separated fields of `text`, up to `count` of them.
std::vector<std::string_view> Fields(std::string_view text, std::size_t count) {
  std::vector<std::string_view> fields;
  std::size_t at = 0;
  while (fields.size() < count) {
    at = text.find_first_not_of(' ', at);
    if (at == std::string_view::npos) break;
    const std::size_t end = std::min(text.find(' ', at), text.size());
    fields.push_back(text.substr(at, end - at));
    at = end;
  }
  return fields;
}

struct DirCloser {
  void operator()(DIR* dir) const { ::closedir(dir); }
};

}  // namespace

std::optional<elastic::ProcessInfo> ParseProcStat(std::string_view stat) {
  // "pid (comm) state ppid pgrp session ...": comm is whatever the process named itself, so the
  // fields are found after its last ')'.
  const std::size_t open = stat.find(" (");
  const std::size_t close = stat.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  const auto pid = IdField(stat.substr(0, open));
  const auto fields = Fields(stat.substr(close + 1), 4);  // state ppid pgrp session
  if (!pid || fields.size() < 4 || fields[0].size() != 1) return std::nullopt;
  const auto session = IdField(fields[3]);
  if (!session) return std::nullopt;
  const char state = fields[0][0];
  return elastic::ProcessInfo{*pid, *session, state == 'Z' || state == 'X' || state == 'x', state};
}

std::optional<elastic::ProcessInfo> ReadProcStat(int pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buffer[1024];
  const ssize_t size = ::read(fd, buffer, sizeof buffer);
  ::close(fd);
  if (size <= 0) return std::nullopt;
  return ParseProcStat(std::string_view(buffer, static_cast<std::size_t>(size)));
}

std::optional<std::string> ReadKernelFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[4096];
  ssize_t size;
  while ((size = ::read(fd, buffer, sizeof buffer)) != 0) {
    if (size < 0 && errno == EINTR) continue;
    if (size < 0) break;
    text.append(buffer, static_cast<std::size_t>(size));
  }
  ::close(fd);
  if (size < 0) return std::nullopt;
  return text;
}

// One getsid(2) per listed process, a system call without a file or any formatting; the stat
// file (open, read, close, and the kernel's formatting of 52 fields) only for the processes of
// the guarded sessions: a snapshot costs the machine's process count in cheap calls and the
// job's in file reads, where it read every /proc/<pid>/stat before (issue 39).
std::vector<elastic::ProcessInfo> ProcProcessTable::Snapshot(const std::set<int>& sessions) {
  std::vector<elastic::ProcessInfo> table;
  if (sessions.empty()) return table;
  const std::unique_ptr<DIR, DirCloser> dir(::opendir("/proc"));
  if (!dir) return table;
  while (const dirent* entry = ::readdir(dir.get())) {
    const auto pid = IdField(entry->d_name);
    if (!pid || !sessions.count(::getsid(*pid))) continue;
    if (const auto process = ReadProcStat(*pid)) table.push_back(*process);
  }
  return table;
}

void ProcProcessTable::Kill(const elastic::ProcessInfo& process) {
  // Once the pidfd is open it names this one process: if the check below passes, the signal
  // cannot reach a newcomer that got the pid.
  const int pidfd = PidfdOpen(process.pid);
  if (pidfd < 0) return;  // gone
  const auto now = ReadProcStat(process.pid);
  if (now && !now->dead && now->session == process.session) {
    ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
  }
  ::close(pidfd);
}

void ProcProcessTable::Pause(std::chrono::milliseconds duration) {
  std::this_thread::sleep_for(duration);
}

std::chrono::steady_clock::time_point ProcProcessTable::Now() {
  return std::chrono::steady_clock::now();
}

}  // namespace ddprun::launcher::process
