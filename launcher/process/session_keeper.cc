#include "launcher/process/session_keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string_view>

#include "common/errors.h"
#include "common/exit_status.h"
#include "common/logging.h"
#include "launcher/process/pidfd.h"

extern char** environ;

namespace ddprun::launcher::process {
namespace {

// The keeper's sweep stops after 5 s; this only guards against a keeper that hangs (stopped).
constexpr int kWaitForKeeperMs = 10000;

// Moves `fd` above stderr (a launcher started with closed standard streams gets 0..2 from
// pipe2), keeping it close-on-exec.
int AboveStandardStreams(int fd) {
  if (fd > STDERR_FILENO) return fd;
  const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  ::close(fd);
  return moved;
}

// posix_spawn: no fork of a launcher that may already run threads, and POSIX_SPAWN_SETSID puts
// the keeper out of reach of the terminal's and the launcher's process-group signals.
// argv[1]: the job cgroup's directory, when there is one.
pid_t SpawnKeeper(const std::string& executable, int read_fd, const std::string& cgroup) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, read_fd, STDIN_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK);
  std::string name = kSessionKeeperName;
  std::string cgroup_arg = cgroup;
  char* argv[] = {name.data(), cgroup.empty() ? nullptr : cgroup_arg.data(), nullptr};
  pid_t pid = -1;
  const int error = ::posix_spawn(&pid, executable.c_str(), &actions, &attr, argv, environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) throw SystemError(ErrnoMessage("posix_spawn " + executable, error));
  return pid;
}

}  // namespace

SessionKeeper::SessionKeeper(const std::string& executable) : cgroup_(JobCgroup::Create()) {
  int read_fd = -1;
  try {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw SystemError(ErrnoMessage("pipe2", errno));
    read_fd = AboveStandardStreams(fds[0]);
    write_fd_ = AboveStandardStreams(fds[1]);
    if (read_fd < 0 || write_fd_ < 0) throw SystemError(ErrnoMessage("fcntl F_DUPFD", errno));
    pid_ = SpawnKeeper(executable, read_fd, cgroup_.Path());
    pidfd_ = PidfdOpen(pid_);
  } catch (const std::exception& error) {
    if (write_fd_ >= 0) ::close(write_fd_);
    write_fd_ = -1;
    cgroup_.Remove();  // no keeper to sweep and remove it: no worker joins
    spdlog::warn("no session keeper ({}): what the workers start may outlive ddprun", error.what());
  }
  if (read_fd >= 0) ::close(read_fd);  // the keeper's copy is its stdin
}

SessionKeeper::~SessionKeeper() {
  if (pid_ < 0) return;
  ::close(write_fd_);  // end of file: the keeper sweeps now
  if (pidfd_ >= 0) {
    pollfd exited{pidfd_, POLLIN, 0};
    while (::poll(&exited, 1, kWaitForKeeperMs) < 0 && errno == EINTR) {
    }
    ::close(pidfd_);
  }
  int status = 0;
  pid_t reaped;
  const int flags = pidfd_ >= 0 ? WNOHANG : 0;  // without a pidfd (Linux < 5.3): just wait
  while ((reaped = ::waitpid(pid_, &status, flags)) < 0 && errno == EINTR) {
  }
  if (reaped == 0) {
    spdlog::warn("the session keeper (pid {}) has not finished its sweep; not waiting for it",
                 pid_);
  } else if (reaped == pid_ && WIFSIGNALED(status)) {
    spdlog::warn("the session keeper was killed by {}: what the workers started was not swept",
                 SignalName(WTERMSIG(status)).value_or(std::to_string(WTERMSIG(status))));
  }
  cgroup_.Remove();  // gone already when the keeper finished its sweep
}

bool IsSessionKeeper(int argc, char** argv) {
  return argc >= 1 && argv[0] != nullptr && std::string_view(argv[0]) == kSessionKeeperName;
}

}  // namespace ddprun::launcher::process
