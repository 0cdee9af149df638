// WorkerWatchdog (launcher/process/worker_watchdog.h) on a fake clock: a rank's silence, the
// start-up timeout and torchelastic's file timers are decided at the watchdog's clock's time, so
// these tests move that time instead of waiting it out, and call CheckDeadlines (what the
// watchdog's timer calls when the next deadline comes). With real processes and real time:
// worker_watch_test.cc.
#include "launcher/process/worker_watchdog.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <memory>
#include <vector>

#include "tests/unit/common/fake_clock.h"
#include "tests/unit/launcher/process/process_test_util.h"

namespace {

using namespace ddprun;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using ddprun::testing::FakeClock;
using elastic::AttemptLaunch;
using elastic::HangReport;
using launcher::process::WorkerWatchdog;
using launcher::process::testing::RunUntil;
using launcher::process::testing::TempDir;

// `ranks` workers, hang detection with `hang` between signs of progress and `startup` before the
// first; no FIFOs.
AttemptLaunch Attempt(int ranks, std::chrono::milliseconds hang,
                      std::chrono::milliseconds startup) {
  AttemptLaunch attempt;
  for (int rank = 0; rank < ranks; ++rank) {
    elastic::WorkerLaunch worker;
    worker.local_rank = rank;
    attempt.workers.push_back(worker);
  }
  attempt.hang.hang = hang;
  attempt.hang.startup = startup;
  return attempt;
}

struct Harness {
  explicit Harness(const AttemptLaunch& attempt)
      : watchdog(
            io, attempt, [this](const HangReport& report) { hangs.push_back(report); }, nullptr,
            clock) {}

  // Evaluates the deadlines at the clock's time and delivers what that posted.
  void Check() {
    watchdog.CheckDeadlines();
    io.restart();
    io.poll();
  }

  asio::io_context io;
  FakeClock clock;
  std::vector<HangReport> hangs;
  WorkerWatchdog watchdog;
};

}  // namespace

TEST_CASE("watchdog: a rank silent for the hang timeout on its clock is hung, once",
          "[launcher][process][hang]") {
  Harness h(Attempt(2, 30s, 600s));
  h.watchdog.Arm({101, 102});
  h.watchdog.Progress(0);
  h.watchdog.Progress(1);
  h.clock.Advance(20s);
  h.watchdog.Progress(0);  // rank 0 goes on; rank 1 is silent from here
  h.Check();
  h.clock.Advance(10s - 1ms);
  h.Check();
  CHECK(h.hangs.empty());
  h.clock.Advance(1ms);
  h.Check();
  REQUIRE(h.hangs.size() == 1);
  CHECK(h.hangs[0].kind == HangReport::Kind::kNoProgress);
  CHECK(h.hangs[0].local_rank == 1);
  CHECK(h.hangs[0].pid == 102);
  CHECK_FALSE(h.hangs[0].startup);
  CHECK(h.hangs[0].time == h.clock.WallNow());
  CHECK_THAT(h.hangs[0].cause, Contains("no progress for 30.0 s"));
  CHECK(h.watchdog.LastActivity() == h.clock.Now() - 10s);
  h.clock.Advance(60s);
  h.Check();
  CHECK(h.hangs.size() == 1);  // one report per attempt
}

TEST_CASE("watchdog: before its first sign of progress a rank has the start-up timeout",
          "[launcher][process][hang]") {
  Harness h(Attempt(1, 30s, 120s));
  h.watchdog.Arm({101});
  h.clock.Advance(120s - 1ms);  // four hang timeouts: start-up is not a hang
  h.Check();
  CHECK(h.hangs.empty());
  h.clock.Advance(1ms);
  h.Check();
  REQUIRE(h.hangs.size() == 1);
  CHECK(h.hangs[0].startup);
  CHECK(h.hangs[0].local_rank == 0);
}

TEST_CASE("watchdog: a file timer expires on the watchdog's wall clock",
          "[launcher][process][hang]") {
  // The timer's signal goes to this process only if the watchdog took it for a stranger's.
  struct sigaction ignore {
  }, saved{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGUSR2, &ignore, &saved);
  TempDir dir;
  AttemptLaunch attempt = Attempt(1, 0s, 600s);  // hang detection off
  attempt.timer_file = dir.path + "/timer";
  Harness h(attempt);
  h.watchdog.Arm({::getpid()});
  const double now_s = std::chrono::duration<double>(h.clock.WallNow().time_since_epoch()).count();
  const std::string request =
      "{\"version\": 1, \"pid\": " + std::to_string(::getpid()) +
      ", \"scope_id\": \"step\", \"expiration_time\": " + std::to_string(now_s + 5) +
      ", \"signal\": " + std::to_string(SIGUSR2) + "}\n";
  const int fd = ::open(attempt.timer_file.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  ::close(fd);
  RunUntil(h.io, [&] { return h.watchdog.LastActivity().has_value(); });  // the request is read
  h.clock.Advance(5s - 1ms);
  h.Check();
  CHECK(h.hangs.empty());
  h.clock.Advance(1ms);
  h.Check();
  REQUIRE(h.hangs.size() == 1);
  CHECK(h.hangs[0].kind == HangReport::Kind::kTimerExpired);
  CHECK(h.hangs[0].scope == "step");
  CHECK(h.hangs[0].signal == SIGUSR2);
  CHECK(h.hangs[0].local_rank == 0);
  CHECK_THAT(h.hangs[0].cause, Contains("(armed for 5.0 s)"));
  ::sigaction(SIGUSR2, &saved, nullptr);
}
