// The keeper process itself (session_keeper.h): started by the launcher, never by hand.
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <optional>
#include <string>

#include "elastic/session_sweep.h"
#include "launcher/process/cgroup_table.h"
#include "launcher/process/job_cgroup.h"
#include "launcher/process/proc_table.h"
#include "launcher/process/session_keeper.h"

namespace ddprun::launcher::process {
namespace {

void WriteError(const std::string& line) {
  const std::string text = std::string(kSessionKeeperName) + ": " + line + "\n";
  [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
}

// The keeper must outlive the launcher: no terminal or group signal ends it, no directory is
// kept busy, and no descriptor but the pipe and stderr is held.
void Detach() {
  ::prctl(PR_SET_NAME, "ddprun-keeper");
  ::setsid();  // already a session leader when the launcher started it: then a no-op
  for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) ::signal(signal, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  [[maybe_unused]] const int ignored = ::chdir("/");
  ::syscall(SYS_close_range, STDERR_FILENO + 1, ~0U, 0U);
}

bool StdinIsPipe() {
  struct stat info {};
  return ::fstat(STDIN_FILENO, &info) == 0 && S_ISFIFO(info.st_mode);
}

std::string Pids(const std::vector<int>& pids) {
  std::string text;
  for (const int pid : pids) text += (text.empty() ? "" : " ") + std::to_string(pid);
  return text;
}

// The two tables and which one to use: the job cgroup's while every guarded session is in it
// (elastic::SessionSweep::EverySessionInCgroup), else all of /proc.
class Tables {
 public:
  explicit Tables(const char* cgroup) {
    if (cgroup != nullptr) listed_.emplace(cgroup);
  }
  elastic::ProcessTable& For(const elastic::SessionSweep& sweep) {
    if (listed_ && sweep.EverySessionInCgroup()) return *listed_;
    return scan_;
  }

 private:
  ProcProcessTable scan_;
  std::optional<CgroupProcessTable> listed_;
};

}  // namespace

int RunSessionKeeper(int argc, char** argv) {
  Detach();
  if (!StdinIsPipe()) {
    WriteError("an internal helper of ddprun, not to be run by hand");
    return 2;
  }
  const char* cgroup = argc >= 2 && *argv[1] != '\0' ? argv[1] : nullptr;  // the job cgroup
  elastic::SessionSweep sweep;
  Tables tables(cgroup);
  char buffer[4096];
  for (;;) {
    const ssize_t size = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (size < 0 && errno == EINTR) continue;
    if (size <= 0) break;  // end of file: the launcher is gone
    sweep.Feed(std::string_view(buffer, static_cast<std::size_t>(size)));
    sweep.Prune(tables.For(sweep));
  }
  const elastic::SweepReport report = sweep.Sweep(tables.For(sweep));
  if (cgroup != nullptr) RemoveJobCgroup(cgroup);
  if (report.survivors.empty()) return 0;
  WriteError("processes of ddprun's workers survived SIGKILL after " +
             std::to_string(report.passes) + " passes: " + Pids(report.survivors));
  return 1;
}

}  // namespace ddprun::launcher::process
