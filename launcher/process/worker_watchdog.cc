#include "launcher/process/worker_watchdog.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <csignal>

#include "common/duration.h"
#include "common/errors.h"
#include "common/exit_status.h"
#include "common/logging.h"

namespace ddprun::launcher::process {
namespace {

using std::chrono::milliseconds;

double EpochSeconds(Clock::WallTime time) {
  return std::chrono::duration<double>(time.time_since_epoch()).count();
}

// A fresh FIFO at `path` (whatever was there is replaced, as torch's server does), opened
// read-write so that writers never block or fail for want of a reader and reads never see EOF.
int MakeFifo(const std::string& path) {
  ::unlink(path.c_str());
  if (::mkfifo(path.c_str(), 0600) != 0) {
    throw SystemError(ErrnoMessage("mkfifo " + path, errno) +
                      " — the directory must exist and be writable (check --log-dir, "
                      "TORCHELASTIC_TIMER_FILE)");
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw SystemError(ErrnoMessage("open " + path, errno));
  return fd;
}

}  // namespace

struct WorkerWatchdog::Fifo {
  std::string path;
  std::unique_ptr<LogPipe> pipe;
  ~Fifo() {
    pipe.reset();
    ::unlink(path.c_str());
  }
};

WorkerWatchdog::WorkerWatchdog(asio::io_context& io, const elastic::AttemptLaunch& attempt,
                               HangCallback on_hang, LearnedCallback on_learned, Clock& clock)
    : io_(io),
      clock_(clock),
      on_hang_(std::move(on_hang)),
      on_learned_(std::move(on_learned)),
      progress_(attempt.hang, attempt.learned_hang_timeout),
      hang_on_(attempt.hang.On()),
      reported_learned_(attempt.hang.learn ? attempt.learned_hang_timeout : std::nullopt),
      deadline_(io) {
  for (const auto& worker : attempt.workers) {
    if (worker.pulse_file.empty() || !hang_on_) continue;
    const int rank = worker.local_rank;
    OpenFifo(worker.pulse_file, nullptr,
             [this, rank] { Progress(rank, elastic::ProgressKind::kPulse); });
  }
  if (!attempt.timer_file.empty()) {
    timer_on_ = true;
    OpenFifo(
        attempt.timer_file, [this](std::string_view line) { OnTimerLine(line); }, nullptr);
  }
}

WorkerWatchdog::~WorkerWatchdog() { *alive_ = false; }

void WorkerWatchdog::OpenFifo(const std::string& path,
                              std::function<void(std::string_view)> on_line,
                              std::function<void()> on_bytes) {
  auto fifo = std::make_unique<Fifo>();
  fifo->path = path;
  const int fd = MakeFifo(path);
  fifo->pipe = std::make_unique<LogPipe>(
      io_, fd,
      [on_bytes = std::move(on_bytes)](std::string_view) {
        if (on_bytes) on_bytes();
      },
      on_line ? LogPipe::LineHandler(std::move(on_line)) : LogPipe::LineHandler());
  fifo->pipe->Start();
  fifos_.push_back(std::move(fifo));
}

void WorkerWatchdog::Arm(const std::vector<pid_t>& pids) {
  pids_ = pids;
  armed_ = true;
  progress_.Start(static_cast<int>(pids.size()), clock_.Now());
  for (std::size_t rank = 0; rank < pids.size(); ++rank) {
    if (pids[rank] <= 0) progress_.Forget(static_cast<int>(rank));
  }
  Schedule();
}

void WorkerWatchdog::Progress(int local_rank, elastic::ProgressKind kind) {
  last_activity_ = clock_.Now();
  // Once a hang is reported the workers' stack dumps follow: not progress, nor an interval.
  if (!armed_ || quiet_) return;
  const auto before = progress_.NextDeadline();
  progress_.Note(local_rank, *last_activity_, kind);
  if (progress_.HangTimeout() != reported_learned_ && progress_.Timeouts().learn) {
    ReportLearned();
  } else if (const auto after = progress_.NextDeadline(); after && before && *after < *before) {
    if (!quiet_) Schedule();  // a first sign of progress: the hang timeout is shorter
  }
}

// The learned timeout moves the deadlines: tell the agent, and re-arm the timer.
void WorkerWatchdog::ReportLearned() {
  reported_learned_ = progress_.HangTimeout();
  elastic::LearnedHangTimeout learned{*reported_learned_, progress_.LongestInterval()};
  asio::post(io_, [callback = on_learned_, learned, alive = alive_] {
    if (*alive && callback) callback(learned);
  });
  if (!quiet_) Schedule();
}

void WorkerWatchdog::Exited(int local_rank) {
  progress_.Forget(local_rank);
  if (local_rank >= 0 && local_rank < static_cast<int>(pids_.size())) {
    timers_.ForgetPid(pids_[local_rank]);
  }
  if (armed_ && !quiet_) Schedule();
}

void WorkerWatchdog::Quiet() {
  quiet_ = true;
  deadline_.cancel();
}

// The worker a request came from: the worker itself, or a process in its process group (each
// worker leads its own, so DataLoader workers and other children are found through it).
std::optional<int> WorkerWatchdog::RankOfPid(pid_t pid) const {
  const pid_t group = ::getpgid(pid);
  for (std::size_t rank = 0; rank < pids_.size(); ++rank) {
    if (pids_[rank] > 0 && (pids_[rank] == pid || pids_[rank] == group)) {
      return static_cast<int>(rank);
    }
  }
  return std::nullopt;
}

void WorkerWatchdog::OnTimerLine(std::string_view line) {
  if (line.empty()) return;
  std::string error;
  const auto request = elastic::ParseTimerRequest(line, &error);
  if (!request) {
    if (!bad_line_logged_) {
      spdlog::warn(
          "ignoring a file timer request: {} (further bad requests are ignored "
          "silently)",
          error);
      bad_line_logged_ = true;
    }
    return;
  }
  const auto rank = RankOfPid(request->pid);
  if (rank) Progress(*rank, elastic::ProgressKind::kTimerRequest);
  if (request->expiration_time >= 0) {
    armed_at_[{request->pid, request->scope_id}] = EpochSeconds(clock_.WallNow());
  }
  timers_.Apply(*request);
  if (armed_ && !quiet_) Schedule();
}

// One timer for the earliest of: a rank's silence reaching the timeout, a file timer's expiry.
void WorkerWatchdog::Schedule() {
  if (quiet_) return;
  const Clock::TimePoint now = clock_.Now();
  std::optional<Clock::TimePoint> next;
  if (hang_on_) next = progress_.NextDeadline();
  if (const auto expiry = timers_.NextExpiration()) {
    const double wait_s = std::max(0.0, *expiry - EpochSeconds(clock_.WallNow()));
    const auto at = now + milliseconds(static_cast<long long>(std::ceil(wait_s * 1000)));
    if (!next || at < *next) next = at;
  }
  if (!next) {
    deadline_.cancel();
    return;
  }
  // The timer waits in real time for what is left on the watchdog's clock.
  deadline_.expires_after(std::max(*next - now, Clock::TimePoint::duration::zero()));
  deadline_.async_wait([this, alive = alive_](const boost::system::error_code& error) {
    if (error || !*alive) return;
    CheckDeadlines();
  });
}

void WorkerWatchdog::CheckDeadlines() {
  if (quiet_) return;
  const auto expired = timers_.TakeExpired(EpochSeconds(clock_.WallNow()));
  for (const auto& timer : expired) {
    const auto rank = RankOfPid(timer.pid);
    const auto armed = armed_at_.find({timer.pid, timer.scope_id});
    const double armed_for =
        armed == armed_at_.end() ? 0 : std::max(0.0, timer.expiration_time - armed->second);
    elastic::HangReport report;
    report.kind = elastic::HangReport::Kind::kTimerExpired;
    report.local_rank = rank.value_or(-1);
    report.pid = timer.pid;
    report.scope = timer.scope_id;
    report.signal = timer.signal;
    report.cause = "file timer expired: scope \"" + timer.scope_id + "\" of pid " +
                   std::to_string(timer.pid) + " (armed for " +
                   DurationText(milliseconds(std::llround(armed_for * 1000)), 1) + ")";
    if (!rank) {
      // Not one of ours (torch signals it anyway; so does ddprun, but no group fails for it).
      spdlog::warn("{}; it is not a worker of this node, sending it {}", report.cause,
                   SignalName(timer.signal).value_or(std::to_string(timer.signal)));
      ::kill(timer.pid, timer.signal);
      continue;
    }
    Report(std::move(report));
    return;
  }
  if (hang_on_) {
    const auto now = clock_.Now();
    if (const auto silence = progress_.Hung(now)) {
      elastic::HangReport report;
      report.kind = elastic::HangReport::Kind::kNoProgress;
      report.local_rank = silence->local_rank;
      report.pid = pids_.at(silence->local_rank);
      report.startup = silence->startup;
      const auto silent = now - silence->since;
      const auto last_wall =
          clock_.WallNow() - std::chrono::duration_cast<Clock::WallTime::duration>(silent);
      report.cause = progress_.Cause(*silence, last_wall);
      Report(std::move(report));
      return;
    }
  }
  Schedule();
}

void WorkerWatchdog::Report(elastic::HangReport report) {
  quiet_ = true;
  report.progressed = progress_.ProgressedPastStartup();
  report.time = clock_.WallNow();
  asio::post(io_, [callback = on_hang_, report = std::move(report), alive = alive_] {
    if (*alive && callback) callback(report);
  });
}

}  // namespace ddprun::launcher::process
