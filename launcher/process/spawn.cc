#include "launcher/process/spawn.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <utility>
// Boost.Process is heavy to compile: it is included here and nowhere else.
#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/exe.hpp>
#include <boost/process/extend.hpp>
#include <boost/process/io.hpp>
#include <boost/process/search_path.hpp>

#include "common/errors.h"
#include "common/open_files.h"
#include "elastic/cpu_binding.h"

namespace ddprun::launcher::process {
namespace bp = boost::process;
namespace {

#ifndef CLOSE_RANGE_CLOEXEC
constexpr unsigned kCloseRangeCloexec = 1U << 2;
#else
constexpr unsigned kCloseRangeCloexec = CLOSE_RANGE_CLOEXEC;
#endif

// The worker's environment as execve wants it, built in the parent. (Boost.Process 1.74's own
// environment class reads past the end of short entries when looking names up.)
class EnvBlock {
 public:
  explicit EnvBlock(const std::map<std::string, std::string>& env) {
    for (const auto& [name, value] : env) entries_.push_back(name + "=" + value);
    for (auto& entry : entries_) pointers_.push_back(entry.data());
    pointers_.push_back(nullptr);
  }
  char** Get() { return pointers_.data(); }

 private:
  std::vector<std::string> entries_;
  std::vector<char*> pointers_;
};

// "<pid>\n" to the session keeper's pipe, with async-signal-safe calls only. One write of less
// than PIPE_BUF bytes: atomic, whatever other workers write at the same time.
void WritePidLine(int fd, pid_t pid) {
  char text[24];
  char* end = text + sizeof text;
  char* at = end;
  *--at = '\n';
  do {
    *--at = static_cast<char>('0' + pid % 10);
    pid /= 10;
  } while (pid > 0);
  while (::write(fd, at, static_cast<std::size_t>(end - at)) < 0 && errno == EINTR) {
  }
}

// A failed sched_setaffinity travels through Boost.Process's error pipe as this plus errno, so
// that the parent tells it from an exec failure.
constexpr int kAffinityError = 1 << 20;

// The CPU set is built in the parent: the child only calls sched_setaffinity.
struct CpuMask {
  explicit CpuMask(const std::vector<int>& cpus) : bound(!cpus.empty()) {
    CPU_ZERO(&set);
    for (const int cpu : cpus) {
      if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
    }
  }
  bool bound;
  cpu_set_t set;
};

// on_setup runs in the parent before fork; on_exec_setup in the child between fork and exec,
// with only async-signal-safe calls.
struct WorkerSetup : bp::extend::handler {
  pid_t launcher_pid;
  int stdout_fd;
  int stderr_fd;
  int session_keeper_fd;
  char** env;
  const CpuMask* cpus;

  template <class Executor>
  void on_setup(Executor& exec) const {
    exec.env = env;
  }

  template <class Executor>
  void on_exec_setup(Executor& exec) const {
    if (cpus->bound && sched_setaffinity(0, sizeof cpus->set, &cpus->set) != 0) {
      exec.set_error(std::error_code(kAffinityError + errno, std::system_category()),
                     "sched_setaffinity");
      _exit(126);
    }
    setsid();
    // Registered before exec, so no window exists in which the worker runs unguarded.
    if (session_keeper_fd >= 0) WritePidLine(session_keeper_fd, getpid());
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher_pid) _exit(128 + SIGKILL);  // the launcher died before prctl
    // The launcher raised its own open-file limit; the worker gets the one it would have had.
    if (const rlimit* files = OriginalOpenFileLimit()) setrlimit(RLIMIT_NOFILE, files);
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    for (int signal = 1; signal < NSIG; ++signal) {
      if (signal != SIGKILL && signal != SIGSTOP) ::signal(signal, SIG_DFL);
    }
    if (stdout_fd >= 0) dup2(stdout_fd, STDOUT_FILENO);
    if (stderr_fd >= 0) dup2(stderr_fd, STDERR_FILENO);
    syscall(SYS_close_range, 3U, ~0U, kCloseRangeCloexec);
  }
};

std::string PathOf(const std::map<std::string, std::string>& env) {
  const auto found = env.find("PATH");
  return found != env.end() ? found->second : "/usr/local/bin:/usr/bin:/bin";
}

// Resolves argv[0] as execvp would, against the worker's PATH.
boost::filesystem::path ResolveProgram(const std::string& name,
                                       const std::map<std::string, std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::vector<boost::filesystem::path> dirs;
  const std::string path = PathOf(env);
  for (std::size_t start = 0; start <= path.size();) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    dirs.emplace_back(end == start ? "." : path.substr(start, end - start));
    start = end + 1;
  }
  return bp::search_path(name, dirs);
}

SpawnResult Failure(const std::string& program, int error, const std::vector<int>& cpus) {
  if (error >= kAffinityError) {
    return {-1, 126,
            ErrnoMessage("cannot start '" + program + "': sched_setaffinity to CPUs " +
                             elastic::CpuListText(cpus),
                         error - kAffinityError)};
  }
  const int code = (error == ENOENT || error == ENOTDIR) ? 127 : 126;
  return {-1, code, "cannot execute '" + program + "': " + std::strerror(error)};
}

}  // namespace

SpawnResult SpawnWorker(const SpawnRequest& request) {
  const std::string& program = request.argv.front();
  const boost::filesystem::path resolved = ResolveProgram(program, request.env);
  if (resolved.empty()) return {-1, 127, "cannot execute '" + program + "': command not found"};
  EnvBlock env(request.env);
  const CpuMask cpus(request.cpus);
  const std::vector<std::string> args(request.argv.begin() + 1, request.argv.end());
  std::error_code error;
  bp::child child(bp::exe = resolved.string(), bp::args = args, bp::std_in < bp::null,
                  WorkerSetup{{}, getpid(), request.stdout_fd, request.stderr_fd,
                              request.session_keeper_fd, env.Get(), &cpus},
                  error);
  if (error) return Failure(program, error.value(), request.cpus);
  const pid_t pid = child.id();
  child.detach();  // the process context reaps it through its pidfd
  return {pid, 0, ""};
}

}  // namespace ddprun::launcher::process
