#include "launcher/process/job_cgroup.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include "common/errors.h"
#include "common/logging.h"
#include "launcher/process/cgroup_paths.h"
#include "launcher/process/proc_table.h"

namespace ddprun::launcher::process {
namespace {

// A name taken by a leftover of an earlier ddprun with the same pid (after SIGKILL of both the
// launcher and its keeper) gets another random part.
constexpr int kNameTries = 3;
// RemoveJobCgroup's bound: the last killed processes leave the cgroup within milliseconds.
constexpr int kRemoveWaits = 20;
constexpr int kRemoveWaitMs = 50;

// Eight hex digits from getrandom(2); the pid alone when it has none to give.
std::string RandomPart() {
  unsigned value = 0;
  if (::getrandom(&value, sizeof value, GRND_NONBLOCK) != sizeof value) return "0";
  char text[9];
  for (int i = 7; i >= 0; --i, value >>= 4) text[i] = "0123456789abcdef"[value & 0xf];
  text[8] = '\0';
  return text;
}

std::string KernelText(const char* path) { return ReadKernelFile(path).value_or(""); }

// mkdir of a fresh ddprun-<pid>-<random> under `parent`; "" and `error` set when it fails.
std::string MakeDirectory(const std::string& parent, int& error) {
  for (int tries = 0; tries < kNameTries; ++tries) {
    const std::string path = parent + "/ddprun-" + std::to_string(::getpid()) + "-" + RandomPart();
    if (::mkdir(path.c_str(), 0755) == 0) return path;
    error = errno;
    if (error != EEXIST) break;
  }
  return "";
}

// Waits (at most kRemoveWaitMs) for cgroup.events to change, unless it says "populated 0".
void WaitUnpopulated(const std::string& path) {
  const int fd = ::open((path + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buffer[256];
  const ssize_t size = ::pread(fd, buffer, sizeof buffer, 0);
  const auto populated =
      size > 0 ? ParsePopulated(std::string_view(buffer, static_cast<std::size_t>(size)))
               : std::nullopt;
  if (populated.value_or(true)) {
    pollfd changed{fd, POLLPRI, 0};  // kernfs tells a change with POLLPRI (and POLLERR)
    ::poll(&changed, 1, kRemoveWaitMs);
  }
  ::close(fd);
}

// Whether cgroup.procs lists a process now (no when it cannot be read).
bool HasProcesses(const std::string& path) {
  const auto procs = ReadKernelFile(path + "/cgroup.procs");
  return procs && !ParsePidList(*procs).empty();
}

}  // namespace

JobCgroup JobCgroup::Create() {
  const JobCgroupPlace place =
      JobCgroupParent(std::getenv(kJobCgroupVariable), KernelText("/proc/self/mountinfo"),
                      KernelText("/proc/self/cgroup"));
  if (!place.parent) {
    spdlog::debug("no job cgroup ({}): the session keeper scans /proc", place.why_none);
    return {};
  }
  int error = 0;
  std::string path = MakeDirectory(*place.parent, error);
  if (path.empty()) {
    spdlog::debug("no job cgroup ({}): the session keeper scans /proc",
                  ErrnoMessage("mkdir in " + *place.parent, error));
    return {};
  }
  const int fd = ::open((path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  const int dir_fd = fd < 0 ? -1 : ::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || dir_fd < 0) {
    spdlog::debug("no job cgroup ({}): the session keeper scans /proc",
                  ErrnoMessage("open " + path + (fd < 0 ? "/cgroup.procs" : ""), errno));
    if (fd >= 0) ::close(fd);
    ::rmdir(path.c_str());
    return {};
  }
  spdlog::debug("job cgroup {}", path);
  return JobCgroup(std::move(path), fd, dir_fd);
}

JobCgroup::JobCgroup(JobCgroup&& other) noexcept
    : path_(std::exchange(other.path_, "")),
      procs_fd_(std::exchange(other.procs_fd_, -1)),
      dir_fd_(std::exchange(other.dir_fd_, -1)) {}

JobCgroup& JobCgroup::operator=(JobCgroup&& other) noexcept {
  if (this != &other) {
    Close();
    path_ = std::exchange(other.path_, "");
    procs_fd_ = std::exchange(other.procs_fd_, -1);
    dir_fd_ = std::exchange(other.dir_fd_, -1);
  }
  return *this;
}

JobCgroup::~JobCgroup() { Close(); }

void JobCgroup::Close() {
  if (procs_fd_ >= 0) ::close(procs_fd_);
  if (dir_fd_ >= 0) ::close(dir_fd_);
  procs_fd_ = -1;
  dir_fd_ = -1;
}

void JobCgroup::Remove() {
  Close();
  if (!path_.empty() && ::rmdir(path_.c_str()) != 0 && errno != ENOENT) {
    spdlog::debug("job cgroup {} left behind: {}", path_, std::strerror(errno));
  }
  path_.clear();
}

bool RemoveJobCgroup(const std::string& path) {
  for (int waits = 0;; ++waits) {
    if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY || waits == kRemoveWaits || HasProcesses(path)) return false;
    WaitUnpopulated(path);
  }
}

}  // namespace ddprun::launcher::process
