// The OS half of hang detection and of torchelastic's file timer, on the event loop: the
// per-worker pulse FIFOs and the timer FIFO (created before the workers start, read as lines,
// removed at the end), one steady timer for the next deadline, and the policies that decide
// (elastic/progress_watch.h: which rank is silent too long; elastic/file_timer.h: which timer
// expired). Reports at most one hang per attempt, then stays quiet until destroyed. Its time is a
// Clock (steady for the silences and the timer's next deadline, wall for the file timers'
// expirations and the reports), so that its tests move a fake one and call CheckDeadlines().
#pragma once
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/asio.h"
#include "common/clock.h"
#include "elastic/failure.h"
#include "elastic/file_timer.h"
#include "elastic/process_context.h"
#include "elastic/progress_watch.h"
#include "launcher/process/log_pipe.h"

namespace ddprun::launcher::process {

class WorkerWatchdog {
 public:
  using HangCallback = std::function<void(const elastic::HangReport&)>;
  using LearnedCallback = std::function<void(const elastic::LearnedHangTimeout&)>;

  // Creates the FIFOs the attempt names (throws SystemError naming the path and the fix).
  // Nothing is watched until Arm(). `on_learned` hears of each learned or raised timeout
  // (--hang-timeout=auto), posted to the loop.
  WorkerWatchdog(asio::io_context& io, const elastic::AttemptLaunch& attempt, HangCallback on_hang,
                 LearnedCallback on_learned = nullptr, Clock& clock = RealClock());
  // Closes and removes the FIFOs.
  ~WorkerWatchdog();
  WorkerWatchdog(const WorkerWatchdog&) = delete;
  WorkerWatchdog& operator=(const WorkerWatchdog&) = delete;

  // The workers started (pid per local rank; <= 0 for one that could not start): every rank
  // counts as progressing from now.
  void Arm(const std::vector<pid_t>& pids);
  // Progress of a worker: any bytes on a watched stream, a pulse, a file timer request.
  void Progress(int local_rank, elastic::ProgressKind kind = elastic::ProgressKind::kOutput);
  // When a worker last showed progress here (a pulse, a timer request, output); none yet.
  std::optional<Clock::TimePoint> LastActivity() const { return last_activity_; }
  void Exited(int local_rank);
  // No more reports (the group is being stopped); the FIFOs stay until destruction.
  void Quiet();
  // Reports what is due at the clock's now (an expired file timer first, then a hung rank) and
  // sets the timer for the next deadline. The timer calls it when that deadline comes; a caller
  // whose clock moved without the timer (a test's fake clock) calls it itself.
  void CheckDeadlines();

 private:
  struct Fifo;
  void OpenFifo(const std::string& path, std::function<void(std::string_view)> on_line,
                std::function<void()> on_bytes);
  void OnTimerLine(std::string_view line);
  std::optional<int> RankOfPid(pid_t pid) const;
  void Schedule();
  void Report(elastic::HangReport report);
  void ReportLearned();

  asio::io_context& io_;
  Clock& clock_;
  HangCallback on_hang_;
  LearnedCallback on_learned_;
  // Every rank's progress; hangs are reported from it only with hang detection on (hang_on_).
  elastic::ProgressWatch progress_;
  bool hang_on_ = false;
  std::optional<std::chrono::milliseconds> reported_learned_;
  bool timer_on_ = false;
  elastic::FileTimerTable timers_;
  std::map<std::pair<pid_t, std::string>, double> armed_at_;  // epoch s of each scope's request
  std::vector<pid_t> pids_;
  std::vector<std::unique_ptr<Fifo>> fifos_;
  asio::steady_timer deadline_;
  bool armed_ = false;
  bool quiet_ = false;
  std::optional<Clock::TimePoint> last_activity_;
  bool bad_line_logged_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ddprun::launcher::process
