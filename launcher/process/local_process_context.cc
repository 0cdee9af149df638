#include "launcher/process/local_process_context.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/filesystem.hpp>
#include <csignal>
#include <fstream>
#include <sstream>

#include "common/errors.h"
#include "common/logging.h"
#include "elastic/arg_template.h"
#include "launcher/process/log_pipe.h"
#include "launcher/process/spawn.h"

namespace ddprun::launcher::process {
namespace fs = boost::filesystem;
using elastic::StreamRoute;
using elastic::WorkerExit;
using elastic::WorkerLaunch;

struct LocalProcessContext::Worker {
  WorkerLaunch launch;
  pid_t pid = -1;
  bool alive = false;
  bool group_left_behind = false;  // members of its process group outlived the worker
  std::unique_ptr<asio::posix::stream_descriptor> exit_watch;
  std::unique_ptr<LogPipe> out_pipe;
  std::unique_ptr<LogPipe> err_pipe;
};

namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

std::optional<std::string> ReadFile(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool MatchesAny(std::string_view line, const std::vector<std::string>& filters) {
  for (const auto& filter : filters) {
    if (line.find(filter) != std::string_view::npos) return true;
  }
  return false;
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

int OpenDevNull() { return ::open("/dev/null", O_WRONLY | O_CLOEXEC); }

}  // namespace

LocalProcessContext::LocalProcessContext(asio::io_context& io, int session_keeper_fd)
    : io_(io), session_keeper_fd_(session_keeper_fd), kill_timer_(io) {}

LocalProcessContext::~LocalProcessContext() {
  for (const auto& worker : workers_) {
    if (!worker->alive) continue;
    ::killpg(worker->pid, SIGKILL);
    int status = 0;
    while (::waitpid(worker->pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void LocalProcessContext::PrepareAttemptDir(const elastic::AttemptLaunch& attempt) {
  if (attempt.attempt_dir.empty()) return;
  boost::system::error_code error;
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

void LocalProcessContext::Start(const elastic::AttemptLaunch& attempt,
                                elastic::WorkerEvents events) {
  workers_.clear();
  filtered_stdout_.reset();
  filtered_stderr_.reset();
  on_exit_ = std::move(events.on_exit);
  stopping_ = false;
  deadline_armed_ = false;
  stdout_filters_ = attempt.duplicate_stdout_filters;
  stderr_filters_ = attempt.duplicate_stderr_filters;
  PrepareAttemptDir(attempt);
  for (const auto& launch : attempt.workers) StartWorker(launch);
}

namespace {

// The descriptor the child gets for one stream, and what the launcher keeps to read it.
struct StreamSetup {
  int child_fd = -1;  // -1: inherit
  int read_fd = -1;   // >= 0: route through a LogPipe
  std::shared_ptr<OutputFile> file;  // the tee file the LogPipe copies into
};

StreamSetup SetUpStream(const StreamRoute& route) {
  StreamSetup setup;
  if (route.prefixed) {
    const Pipe pipe = MakePipe();
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
  StreamSetup out = SetUpStream(launch.out);
  StreamSetup err = SetUpStream(launch.err);
  const SpawnResult spawned =
      SpawnWorker({launch.argv, launch.env, out.child_fd, err.child_fd, session_keeper_fd_});
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
  const std::string prefix = elastic::SafeSubstitute(launch.prefix, {{"pid", std::to_string(spawned.pid)}});
  auto make_pipe = [&](const StreamSetup& setup, int console_fd, bool to_console,
                       std::shared_ptr<OutputFile> filtered,
                       const std::vector<std::string>& filters) -> std::unique_ptr<LogPipe> {
    if (setup.read_fd < 0) return nullptr;
    auto file = setup.file;
    auto on_chunk = [file](std::string_view chunk) {
      if (file) file->Write(chunk);
    };
    auto on_line = [prefix, console_fd, to_console, filtered, &filters](std::string_view line) {
      const std::string text = prefix + std::string(line) + "\n";
      if (to_console) WriteAll(console_fd, text);
      if (filtered && MatchesAny(line, filters)) filtered->Write(text);
    };
    auto pipe = std::make_unique<LogPipe>(io_, setup.read_fd, on_chunk, on_line);
    pipe->Start();
    return pipe;
  };
  worker->out_pipe = make_pipe(out, STDOUT_FILENO, launch.out.to_console, filtered_stdout_,
                               stdout_filters_);
  worker->err_pipe = make_pipe(err, STDERR_FILENO, launch.err.to_console, filtered_stderr_,
                               stderr_filters_);
  WatchExit(worker);
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
    on_exit_(exit);
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
  WorkerExit exit;
  exit.local_rank = worker->launch.local_rank;
  exit.pid = worker->pid;
  exit.status = ExitStatus::FromWaitStatus(wait_status);
  exit.time = std::chrono::system_clock::now();
  if (!exit.status.Success()) exit.error_file_json = ReadFile(worker->launch.error_file);
  on_exit_(exit);
  MaybeFinishStop();
}

void LocalProcessContext::KillAlive(int signal) {
  for (const auto& worker : workers_) {
    if (!worker->alive) continue;
    spdlog::info("Sending process {} closing signal {}", worker->pid,
                 SignalName(signal).value_or(std::to_string(signal)));
    ::killpg(worker->pid, signal);
  }
}

void LocalProcessContext::Stop(int signal, std::chrono::milliseconds grace,
                               std::function<void()> on_stopped) {
  on_stopped_ = std::move(on_stopped);
  stopping_ = true;
  KillAlive(signal);
  if (!deadline_armed_) {
    deadline_armed_ = true;
    kill_timer_.expires_after(grace);
    kill_timer_.async_wait([this, signal](const boost::system::error_code& error) {
      if (error) return;
      for (const auto& worker : workers_) {
        if (!worker->alive) continue;
        spdlog::warn("Unable to shutdown process {} via {}, forcefully exiting via SIGKILL",
                     worker->pid, SignalName(signal).value_or(std::to_string(signal)));
        ::killpg(worker->pid, SIGKILL);
      }
    });
  }
  MaybeFinishStop();
}

void LocalProcessContext::MaybeFinishStop() {
  if (!stopping_) return;
  for (const auto& worker : workers_) {
    if (worker->alive) return;
  }
  stopping_ = false;
  kill_timer_.cancel();
  // What the workers left behind in their process groups (daemonised grandchildren that did
  // not follow them) goes too: the launcher leaves no process behind.
  for (const auto& worker : workers_) {
    if (worker->group_left_behind) ::killpg(worker->pid, SIGKILL);
  }
  asio::post(io_, [callback = std::move(on_stopped_)] {
    if (callback) callback();
  });
}

void LocalProcessContext::DumpStacks(std::chrono::milliseconds, std::function<void()> done) {
  asio::post(io_, std::move(done));
}

void LocalProcessContext::Signal(int, int) {}

}  // namespace ddprun::launcher::process
