#include "launcher/process/local_process_context.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/duration.h"
#include "common/errors.h"
#include "common/logging.h"
#include "elastic/arg_template.h"
#include "launcher/process/log_pipe.h"
#include "launcher/process/pidfd.h"
#include "launcher/process/proc_table.h"
#include "launcher/process/spawn.h"
#include "launcher/process/worker_watchdog.h"

namespace ddprun::launcher::process {
namespace fs = std::filesystem;
using elastic::StreamRoute;
using elastic::WorkerExit;
using elastic::WorkerLaunch;

struct LocalProcessContext::Worker {
  WorkerLaunch launch;
  pid_t pid = -1;
  bool alive = false;
  bool abandoned = false;          // alive long after SIGKILL: no longer waited for
  bool dumping = false;            // asked for its stacks (DumpStacks)
  bool group_left_behind = false;  // members of its process group outlived the worker
  bool warm = false;               // forked by the warm pool: its status comes from the pool
  bool gone = false;               // warm: its pidfd said it ended; the pool's status is due
  std::unique_ptr<asio::posix::stream_descriptor> exit_watch;
  std::unique_ptr<LogPipe> out_pipe;
  std::unique_ptr<LogPipe> err_pipe;
  std::string stderr_tail;  // the last kTailBytes of its stderr
  std::string stack_dump;   // its stderr since DumpStacks
  std::unique_ptr<OutputFile> stacks_file;
};

namespace {

constexpr std::size_t kTailBytes = 8 * 1024;
constexpr std::size_t kTailLines = 20;
constexpr std::size_t kMaxStackDump = 512 * 1024;
// A wait status: killed by SIGKILL (how a warm worker ends when its pool dies).
constexpr int kKilledBySigkill = SIGKILL;

class KillSignaller : public ProcessSignaller {
 public:
  void Kill(pid_t pid, int signal) override { ::kill(pid, signal); }
  void KillGroup(pid_t group, int signal) override { ::killpg(group, signal); }
};

std::optional<std::string> ReadFile(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The last `bytes` of a file (a redirected log may be large); empty when unreadable.
std::string ReadTail(const std::string& path, std::size_t bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  const std::streamoff size = in.tellg();
  const std::streamoff start =
      std::max<std::streamoff>(0, size - static_cast<std::streamoff>(bytes));
  in.seekg(start);
  std::string text(static_cast<std::size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

bool MatchesAny(std::string_view line, const std::vector<std::string>& filters) {
  for (const auto& filter : filters) {
    if (line.find(filter) != std::string_view::npos) return true;
  }
  return false;
}

// The last `lines` lines of `text` (a partial first line of the tail is dropped).
std::string LastLines(const std::string& text, std::size_t lines) {
  std::size_t end = text.size();
  while (end > 0 && text[end - 1] == '\n') --end;
  std::size_t begin = end;
  for (std::size_t count = 0; begin > 0 && count < lines;) {
    --begin;
    if (text[begin] == '\n') {
      if (++count == lines) {
        ++begin;
        break;
      }
    }
  }
  return text.substr(begin, end - begin);
}

void AppendBounded(std::string& text, std::string_view chunk, std::size_t limit) {
  text.append(chunk);
  if (text.size() > limit) text.erase(0, text.size() - limit);
}

std::string StateName(char state) {
  switch (state) {
    case 'D':
      return "D (uninterruptible sleep: a driver or filesystem call that does not return)";
    case 'R':
      return "R (running)";
    case 'S':
      return "S (sleeping)";
    case 'T':
      return "T (stopped)";
    case 't':
      return "t (traced)";
    case 'Z':
      return "Z (zombie)";
    default:
      return std::string(1, state);
  }
}

// A pipe whose write end goes to the child and whose read end the launcher keeps.
struct Pipe {
  int read_fd = -1;
  int write_fd = -1;
};

Pipe MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw SystemError(ErrnoMessage("pipe2", errno));
  return {fds[0], fds[1]};
}

// A pseudo-terminal for a worker whose console is a terminal: the worker gets the slave (so it
// still sees a terminal: colours, progress bars, isatty), the launcher relays the master. The
// slave starts with the console's settings and size, less output post-processing (the
// console's own turns "\n" into "\r\n"; log copies keep plain newlines).
Pipe MakePty(int console_fd) {
  termios settings{};
  winsize size{};
  const bool have_settings = ::tcgetattr(console_fd, &settings) == 0;
  if (have_settings) settings.c_oflag &= ~static_cast<tcflag_t>(OPOST);
  const bool have_size = ::ioctl(console_fd, TIOCGWINSZ, &size) == 0;
  int master = -1;
  int slave = -1;
  if (::openpty(&master, &slave, nullptr, have_settings ? &settings : nullptr,
                have_size ? &size : nullptr) != 0) {
    return MakePipe();  // no pseudo-terminals here (a container without /dev/pts): a pipe
  }
  ::fcntl(master, F_SETFD, FD_CLOEXEC);
  ::fcntl(slave, F_SETFD, FD_CLOEXEC);
  return {master, slave};
}

int OpenDevNull() { return ::open("/dev/null", O_WRONLY | O_CLOEXEC); }

}  // namespace

ProcessSignaller& RealSignaller() {
  static KillSignaller signaller;
  return signaller;
}

LocalProcessContext::LocalProcessContext(asio::io_context& io, int session_keeper_fd)
    : LocalProcessContext(io, LocalProcessOptions{.session_keeper_fd = session_keeper_fd}) {}

LocalProcessContext::LocalProcessContext(asio::io_context& io, LocalProcessOptions options)
    : io_(io), options_(options), kill_timer_(io), unkillable_timer_(io), dump_timer_(io) {}

LocalProcessContext::~LocalProcessContext() {
  for (const auto& worker : workers_) {
    if (!worker->alive || worker->abandoned) continue;
    ::killpg(worker->pid, SIGKILL);
    // Bounded: a worker in state D ignores SIGKILL until its call returns.
    if (worker->exit_watch) {
      pollfd exited{worker->exit_watch->native_handle(), POLLIN, 0};
      const auto wait = static_cast<int>(options_.unkillable_wait.count());
      while (::poll(&exited, 1, wait) < 0 && errno == EINTR) {
      }
      if ((exited.revents & POLLIN) == 0) continue;
    }
    int status = 0;
    while (::waitpid(worker->pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void LocalProcessContext::PrepareAttemptDir(const elastic::AttemptLaunch& attempt) {
  if (attempt.attempt_dir.empty()) return;
  std::error_code error;
  fs::remove_all(attempt.attempt_dir, error);
  for (const auto& worker : attempt.workers) {
    fs::create_directories(fs::path(attempt.attempt_dir) / std::to_string(worker.local_rank),
                           error);
    if (error) {
      throw SystemError("create log directory " + attempt.attempt_dir + ": " + error.message() +
                        " — pass a writable --log_dir");
    }
  }
  if (!attempt.duplicate_stdout_filters.empty()) {
    filtered_stdout_ = std::make_shared<OutputFile>(attempt.attempt_dir + "/filtered_stdout.log");
  }
  if (!attempt.duplicate_stderr_filters.empty()) {
    filtered_stderr_ = std::make_shared<OutputFile>(attempt.attempt_dir + "/filtered_stderr.log");
  }
}

std::optional<std::chrono::steady_clock::time_point> LocalProcessContext::LastActivity() const {
  auto last = last_output_;
  if (const auto pulse = watchdog_ ? watchdog_->LastActivity() : std::nullopt) {
    if (!last || *pulse > *last) last = pulse;
  }
  return last;
}

std::vector<pid_t> LocalProcessContext::Pids() const {
  std::vector<pid_t> pids;
  for (const auto& worker : workers_) pids.push_back(worker->pid > 0 ? worker->pid : 0);
  return pids;
}

void LocalProcessContext::Start(const elastic::AttemptLaunch& attempt,
                                elastic::WorkerEvents events) {
  watchdog_.reset();  // the previous attempt's FIFOs go
  workers_.clear();
  filtered_stdout_.reset();
  filtered_stderr_.reset();
  events_ = std::move(events);
  on_dumped_ = nullptr;
  stopping_ = false;
  deadline_armed_ = false;
  stdout_filters_ = attempt.duplicate_stdout_filters;
  stderr_filters_ = attempt.duplicate_stderr_filters;
  PrepareAttemptDir(attempt);
  // The FIFOs exist before any worker runs: a pulse or a timer request written to a missing
  // path would create a plain file nobody reads.
  watchdog_ = std::make_unique<WorkerWatchdog>(
      io_, attempt,
      [this](const elastic::HangReport& r) {
        if (!stopping_ && events_.on_hang) events_.on_hang(r);
      },
      [this](const elastic::LearnedHangTimeout& learned) {
        if (events_.on_hang_timeout_learned) events_.on_hang_timeout_learned(learned);
      });
  for (const auto& launch : attempt.workers) StartWorker(launch);
  MaybeStartPool(attempt);
  std::vector<pid_t> pids;
  for (const auto& worker : workers_) pids.push_back(worker->alive ? worker->pid : -1);
  watchdog_->Arm(pids);
}

namespace {

// The descriptor the child gets for one stream, and what the launcher keeps to read it.
struct StreamSetup {
  int child_fd = -1;                 // -1: inherit
  int read_fd = -1;                  // >= 0: route through a LogPipe
  std::shared_ptr<OutputFile> file;  // the file the LogPipe copies into
};

StreamSetup SetUpStream(const StreamRoute& route, int console_fd) {
  StreamSetup setup;
  if (route.prefixed || route.watched) {
    const bool terminal = !route.prefixed && route.to_console && ::isatty(console_fd) == 1;
    const Pipe pipe = terminal ? MakePty(console_fd) : MakePipe();
    setup.child_fd = pipe.write_fd;
    setup.read_fd = pipe.read_fd;
    if (!route.file.empty()) setup.file = std::make_shared<OutputFile>(route.file);
    return setup;
  }
  if (!route.file.empty()) {
    setup.file = std::make_shared<OutputFile>(route.file);
    setup.child_fd = ::dup(setup.file->Fd());
    ::fcntl(setup.child_fd, F_SETFD, FD_CLOEXEC);
    setup.file.reset();
    return setup;
  }
  if (!route.to_console) setup.child_fd = OpenDevNull();
  return setup;
}

}  // namespace

void LocalProcessContext::StartWorker(const WorkerLaunch& launch) {
  auto worker = std::make_shared<Worker>();
  worker->launch = launch;
  workers_.push_back(worker);
  StreamSetup out = SetUpStream(launch.out, STDOUT_FILENO);
  StreamSetup err = SetUpStream(launch.err, STDERR_FILENO);
  const SpawnResult spawned = Spawn(launch, out.child_fd, err.child_fd, worker->warm);
  for (const int fd : {out.child_fd, err.child_fd}) {
    if (fd >= 0) ::close(fd);
  }
  if (spawned.pid < 0) {
    for (const int fd : {out.read_fd, err.read_fd}) {
      if (fd >= 0) ::close(fd);
    }
    ReportSpawnFailure(worker, spawned.exit_code, spawned.error);
    return;
  }
  worker->pid = spawned.pid;
  worker->alive = true;
  const std::string prefix =
      elastic::SafeSubstitute(launch.prefix, {{"pid", std::to_string(spawned.pid)}});
  const int rank = launch.local_rank;
  Worker* self = worker.get();
  auto make_pipe = [&](const StreamSetup& setup, const StreamRoute& route, int console_fd,
                       bool is_stderr, std::shared_ptr<OutputFile> filtered,
                       const std::vector<std::string>& filters) -> std::unique_ptr<LogPipe> {
    if (setup.read_fd < 0) return nullptr;
    const bool raw_to_console = route.to_console && !route.prefixed;
    auto on_chunk = [this, file = setup.file, raw_to_console, console_fd, is_stderr, rank,
                     self](std::string_view chunk) {
      if (file) file->Write(chunk);
      if (raw_to_console) WriteAll(console_fd, chunk);
      if (is_stderr) OnStderr(*self, chunk);
      last_output_ = std::chrono::steady_clock::now();
      if (watchdog_) watchdog_->Progress(rank);
    };
    LogPipe::LineHandler on_line;
    if (route.prefixed) {
      on_line = [prefix, console_fd, to_console = route.to_console, filtered,
                 &filters](std::string_view line) {
        const std::string text = prefix + std::string(line) + "\n";
        if (to_console) WriteAll(console_fd, text);
        if (filtered && MatchesAny(line, filters)) filtered->Write(text);
      };
    }
    auto pipe = std::make_unique<LogPipe>(io_, setup.read_fd, on_chunk, on_line);
    pipe->Start();
    return pipe;
  };
  worker->out_pipe =
      make_pipe(out, launch.out, STDOUT_FILENO, false, filtered_stdout_, stdout_filters_);
  worker->err_pipe =
      make_pipe(err, launch.err, STDERR_FILENO, true, filtered_stderr_, stderr_filters_);
  WatchExit(worker);
}

// Forked from the warm pool when the worker has a WarmEntry and the pool is ready; exec'd
// otherwise, and when the pool fails to fork it (the pool is then off for good).
SpawnResult LocalProcessContext::Spawn(const WorkerLaunch& launch, int stdout_fd, int stderr_fd,
                                       bool& warm) {
  warm = false;
  if (launch.warm && pool_ && pool_->Ready()) {
    SpawnResult forked =
        pool_->Fork(*launch.warm, launch.env, launch.cpu_binding.cpus, stdout_fd, stderr_fd);
    if (forked.pid > 0) {
      warm = true;
      return forked;
    }
  }
  return SpawnWorker({launch.argv, launch.env, stdout_fd, stderr_fd, options_.session_keeper_fd,
                      options_.job_cgroup_fd, launch.cpu_binding.cpus});
}

void LocalProcessContext::MaybeStartPool(const elastic::AttemptLaunch& attempt) {
  if (pool_ || !options_.warm_pool) return;
  const bool any_warm = std::any_of(attempt.workers.begin(), attempt.workers.end(),
                                    [](const WorkerLaunch& launch) { return launch.warm; });
  if (!any_warm) return;
  pool_ = std::make_unique<WarmPool>(
      io_, *options_.warm_pool,
      [this](pid_t pid, int wait_status) { OnPoolExit(pid, wait_status); },
      [this] { OnPoolGone(); });
}

void LocalProcessContext::OnPoolExit(pid_t pid, int wait_status) {
  for (const auto& worker : workers_) {
    if (worker->warm && worker->alive && worker->pid == pid) {
      OnExit(worker, wait_status);
      return;
    }
  }
}

// The pool's forked workers die with it (PR_SET_PDEATHSIG); those whose end was seen are
// reported now, the others when their pidfd says so (WatchExit).
void LocalProcessContext::OnPoolGone() {
  const auto workers = workers_;
  for (const auto& worker : workers) {
    if (worker->warm && worker->alive && worker->gone) OnExit(worker, kKilledBySigkill);
  }
}

std::vector<std::string> LocalProcessContext::StartKinds() const {
  std::vector<std::string> kinds;
  for (const auto& worker : workers_) kinds.push_back(worker->warm ? "warm" : "cold");
  return kinds;
}

void LocalProcessContext::OnStderr(Worker& worker, std::string_view chunk) {
  AppendBounded(worker.stderr_tail, chunk, kTailBytes);
  if (!worker.dumping) return;
  if (worker.stack_dump.size() < kMaxStackDump) worker.stack_dump.append(chunk);
  if (worker.stacks_file) worker.stacks_file->Write(chunk);
}

void LocalProcessContext::ReportSpawnFailure(const std::shared_ptr<Worker>& worker, int code,
                                             const std::string& why) {
  WriteAll(STDERR_FILENO, "ddprun: " + why + "\n");
  WorkerExit exit;
  exit.local_rank = worker->launch.local_rank;
  exit.status = ExitStatus::Exited(code);
  exit.time = std::chrono::system_clock::now();
  exit.spawn_error = why;
  asio::post(io_, [this, exit] {
    if (events_.on_exit) events_.on_exit(exit);
    MaybeFinishStop();
  });
}

void LocalProcessContext::WatchExit(const std::shared_ptr<Worker>& worker) {
  const int pidfd = PidfdOpen(worker->pid);
  if (pidfd < 0) throw SystemError(ErrnoMessage("pidfd_open", errno) + " (Linux 5.3+ needed)");
  worker->exit_watch = std::make_unique<asio::posix::stream_descriptor>(io_, pidfd);
  worker->exit_watch->async_wait(
      asio::posix::stream_descriptor::wait_read,
      [this, worker](const boost::system::error_code& error) {
        if (error || !worker->alive) return;
        if (worker->warm) {  // the pool reaps it and reports its status (OnPoolExit)
          worker->gone = true;
          if (!pool_ || pool_->Failed()) OnExit(worker, kKilledBySigkill);  // died with the pool
          return;
        }
        int status = 0;
        pid_t reaped;
        while ((reaped = ::waitpid(worker->pid, &status, WNOHANG)) < 0 && errno == EINTR) {
        }
        if (reaped == 0) {
          WatchExit(worker);  // readable without an exit: watch again
          return;
        }
        OnExit(worker, status);
      });
}

void LocalProcessContext::OnExit(const std::shared_ptr<Worker>& worker, int wait_status) {
  worker->alive = false;
  worker->exit_watch.reset();
  // While a group has members its id cannot be reused, so killing it later is safe.
  worker->group_left_behind = ::killpg(worker->pid, 0) == 0;
  if (worker->out_pipe) worker->out_pipe->Finish();
  if (worker->err_pipe) worker->err_pipe->Finish();
  if (watchdog_) watchdog_->Exited(worker->launch.local_rank);
  WorkerExit exit;
  exit.local_rank = worker->launch.local_rank;
  exit.pid = worker->pid;
  exit.status = ExitStatus::FromWaitStatus(wait_status);
  exit.time = std::chrono::system_clock::now();
  if (!exit.status.Success()) exit.error_file_json = ReadFile(worker->launch.error_file);
  const StreamRoute& err = worker->launch.err;
  if (!exit.status.Success() && !err.watched && !err.prefixed && !err.file.empty()) {
    worker->stderr_tail = ReadTail(err.file, kTailBytes);  // the worker wrote it directly
  }
  exit.stderr_tail = LastLines(worker->stderr_tail, kTailLines);
  exit.stack_dump = std::move(worker->stack_dump);
  worker->stacks_file.reset();
  if (events_.on_exit) events_.on_exit(exit);
  MaybeFinishDump();
  MaybeFinishStop();
}

void LocalProcessContext::DumpStacks(std::chrono::milliseconds window, std::function<void()> done) {
  if (watchdog_) watchdog_->Quiet();
  on_dumped_ = std::move(done);
  for (const auto& worker : workers_) {
    if (!worker->alive || worker->abandoned) continue;
    worker->dumping = true;
    if (!worker->launch.stacks_file.empty()) {
      try {
        worker->stacks_file = std::make_unique<OutputFile>(worker->launch.stacks_file);
      } catch (const std::exception& error) {
        spdlog::warn("cannot keep the stacks of pid {}: {}", worker->pid, error.what());
      }
    }
    // faulthandler re-raises SIGABRT after the dump: no multi-gigabyte core for it.
    const rlimit no_core{0, 0};
    ::prlimit(worker->pid, RLIMIT_CORE, &no_core, nullptr);
    spdlog::info("Asking process {} (local rank {}) for its stacks with SIGABRT", worker->pid,
                 worker->launch.local_rank);
    options_.signaller->Kill(worker->pid, SIGABRT);
  }
  dump_timer_.expires_after(window);
  dump_timer_.async_wait([this](const boost::system::error_code& error) {
    if (error || !on_dumped_) return;
    asio::post(io_, std::exchange(on_dumped_, nullptr));
  });
  MaybeFinishDump();
}

void LocalProcessContext::MaybeFinishDump() {
  if (!on_dumped_) return;
  for (const auto& worker : workers_) {
    if (worker->alive && !worker->abandoned && worker->dumping) return;
  }
  dump_timer_.cancel();
  asio::post(io_, std::exchange(on_dumped_, nullptr));
}

void LocalProcessContext::Signal(int local_rank, int signal) {
  for (const auto& worker : workers_) {
    if (worker->launch.local_rank == local_rank && worker->alive) {
      options_.signaller->Kill(worker->pid, signal);
    }
  }
}

void LocalProcessContext::KillAlive(int signal) {
  for (const auto& worker : workers_) {
    if (!worker->alive || worker->abandoned) continue;
    spdlog::info("Sending process {} closing signal {}", worker->pid,
                 SignalName(signal).value_or(std::to_string(signal)));
    options_.signaller->KillGroup(worker->pid, signal);
  }
}

void LocalProcessContext::Stop(int signal, std::chrono::milliseconds grace,
                               std::function<void()> on_stopped) {
  if (watchdog_) watchdog_->Quiet();
  on_stopped_ = std::move(on_stopped);
  stopping_ = true;
  KillAlive(signal);
  if (!deadline_armed_) {
    deadline_armed_ = true;
    kill_timer_.expires_after(grace);
    kill_timer_.async_wait([this, signal](const boost::system::error_code& error) {
      if (!error) OnKillDeadline(signal);
    });
  }
  MaybeFinishStop();
}

void LocalProcessContext::OnKillDeadline(int signal) {
  bool killed = false;
  for (const auto& worker : workers_) {
    if (!worker->alive || worker->abandoned) continue;
    if (signal != SIGKILL) {
      spdlog::warn("Unable to shutdown process {} via {}, forcefully exiting via SIGKILL",
                   worker->pid, SignalName(signal).value_or(std::to_string(signal)));
    }
    options_.signaller->KillGroup(worker->pid, SIGKILL);
    killed = true;
  }
  if (!killed) return;
  unkillable_timer_.expires_after(options_.unkillable_wait);
  unkillable_timer_.async_wait([this](const boost::system::error_code& error) {
    if (!error) GiveUpOnUnkillable();
  });
}

// A worker in state D (an uninterruptible kernel call: a hung GPU driver, NFS) ignores SIGKILL
// until the call returns, which may be never: name it and stop waiting, so that the node can
// exit (its peers then see a lost node) instead of wedging with its allocation.
void LocalProcessContext::GiveUpOnUnkillable() {
  for (const auto& worker : workers_) {
    if (!worker->alive || worker->abandoned) continue;
    const auto stat = ReadProcStat(worker->pid);
    const std::string state = stat ? StateName(stat->state) : "unknown";
    const std::string line = "worker pid " + std::to_string(worker->pid) + " (local rank " +
                             std::to_string(worker->launch.local_rank) + ") is still alive " +
                             DurationText(options_.unkillable_wait) + " after SIGKILL, in state " +
                             state + "; not waiting for it any longer (the host may need a reboot)";
    spdlog::error("{}", line);
    worker->abandoned = true;
    if (events_.on_unkillable) events_.on_unkillable(line);
  }
  MaybeFinishDump();
  MaybeFinishStop();
}

void LocalProcessContext::MaybeFinishStop() {
  if (!stopping_) return;
  for (const auto& worker : workers_) {
    if (worker->alive && !worker->abandoned) return;
  }
  stopping_ = false;
  kill_timer_.cancel();
  unkillable_timer_.cancel();
  watchdog_.reset();  // the FIFOs go with the group
  // What the workers left behind in their process groups (daemonised grandchildren that did
  // not follow them) goes too: the launcher leaves no process behind.
  for (const auto& worker : workers_) {
    if (worker->group_left_behind) ::killpg(worker->pid, SIGKILL);
  }
  asio::post(io_, [callback = std::move(on_stopped_)] {
    if (callback) callback();
  });
}

}  // namespace ddprun::launcher::process
