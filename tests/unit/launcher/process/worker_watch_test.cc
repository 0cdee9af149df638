// The real context's hang side, with real processes: watched stderr and its tail, stacks asked
// for with SIGABRT, silence and pulses, torchelastic's timer FIFO, and a worker that will not
// die (simulated through the signaller seam).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <optional>

#include "launcher/process/local_process_context.h"
#include "tests/unit/launcher/process/process_test_util.h"

using namespace ddprun;
using namespace ddprun::elastic;
using Catch::Matchers::Contains;
using ddprun::launcher::process::LocalProcessContext;
using ddprun::launcher::process::testing::ReadAll;
using ddprun::launcher::process::testing::RunUntil;
using ddprun::launcher::process::testing::Shell;
using ddprun::launcher::process::testing::TempDir;

namespace {

WorkerLaunch Python(int local_rank, const std::string& code) {
  WorkerLaunch launch = Shell(local_rank, "");
  launch.argv = {"/usr/bin/python3", "-c", code};
  launch.env["PYTHONFAULTHANDLER"] = "1";
  return launch;
}

// stderr through the launcher, kept off the test's console; stdout into `file` (if given).
WorkerLaunch Watched(WorkerLaunch launch, const std::string& out_file = "") {
  launch.err.watched = true;
  launch.err.to_console = false;
  launch.out.watched = true;
  launch.out.to_console = false;
  launch.out.file = out_file;
  return launch;
}

bool Exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

bool IsFifo(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISFIFO(info.st_mode);
}

// Drops every signal to one pid: a worker that will not die, as one in state D.
class DeafSignaller : public launcher::process::ProcessSignaller {
 public:
  void Kill(pid_t pid, int signal) override {
    if (pid != deaf) ::kill(pid, signal);
  }
  void KillGroup(pid_t group, int signal) override {
    if (group != deaf) ::killpg(group, signal);
  }
  pid_t deaf = -1;
};

}  // namespace

TEST_CASE("stderr is relayed through the launcher and its last lines reach the exit",
          "[launcher][process][hang]") {
  asio::io_context io;
  LocalProcessContext processes(io);
  AttemptLaunch attempt;
  attempt.workers = {Watched(Shell(0, "for i in $(seq 1 30); do echo line$i >&2; done; exit 3"))};
  std::optional<WorkerExit> exit;
  processes.Start(attempt, [&](const WorkerExit& e) { exit = e; });
  RunUntil(io, [&] { return exit.has_value(); });
  CHECK(exit->status.ShellCode() == 3);
  CHECK(exit->stderr_tail.rfind("line11\n", 0) == 0);
  CHECK_THAT(exit->stderr_tail, Contains("line29\nline30"));
  CHECK(exit->stderr_tail.find("line10\n") == std::string::npos);
}

TEST_CASE("a stderr the worker writes to its log directly gives the tail of the file",
          "[launcher][process][hang]") {
  TempDir dir;
  asio::io_context io;
  LocalProcessContext processes(io);
  AttemptLaunch attempt;
  WorkerLaunch worker =
      Shell(0, "for i in $(seq 1 3000); do echo line$i >&2; done; exit 3");  // 30 KB of log
  worker.err.file = dir.path + "/stderr.log";
  worker.err.to_console = false;
  attempt.workers = {worker};
  std::optional<WorkerExit> exit;
  processes.Start(attempt, [&](const WorkerExit& e) { exit = e; });
  RunUntil(io, [&] { return exit.has_value(); });
  CHECK(exit->stderr_tail.rfind("line2981\n", 0) == 0);
  CHECK_THAT(exit->stderr_tail, Contains("line2999\nline3000"));
}

TEST_CASE("DumpStacks gets every thread's Python stack before the worker dies",
          "[launcher][process][hang]") {
  TempDir dir;
  asio::io_context io;
  LocalProcessContext processes(io);
  AttemptLaunch attempt;
  WorkerLaunch worker =
      Watched(Python(0,
                     "import threading, time\n"
                     "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
                     "print('ready', flush=True)\n"
                     "time.sleep(60)\n"),
              dir.path + "/out.log");
  worker.stacks_file = dir.path + "/stacks.log";
  attempt.workers = {worker};
  std::optional<WorkerExit> exit;
  processes.Start(attempt, [&](const WorkerExit& e) { exit = e; });
  RunUntil(io, [&] { return ReadAll(dir.path + "/out.log") == "ready\n"; });
  bool dumped = false;
  const auto asked = std::chrono::steady_clock::now();
  processes.DumpStacks(std::chrono::seconds(15), [&] { dumped = true; });
  RunUntil(io, [&] { return dumped; });
  CHECK(std::chrono::steady_clock::now() - asked < std::chrono::seconds(10));  // not the window
  REQUIRE(exit);
  CHECK(exit->status.Signaled());
  CHECK(exit->status.code == SIGABRT);
  CHECK_THAT(exit->stack_dump, Contains("Fatal Python error: Aborted"));
  CHECK_THAT(exit->stack_dump, Contains("File \"<string>\", line 4 in <module>"));
  CHECK_THAT(exit->stack_dump, Contains("threading.py"));  // the other thread too
  CHECK(ReadAll(dir.path + "/stacks.log") == exit->stack_dump);
}

TEST_CASE("a silent worker is reported hung once, a chatty one is not",
          "[launcher][process][hang]") {
  asio::io_context io;
  LocalProcessContext processes(io);
  AttemptLaunch attempt;
  attempt.hang.hang = std::chrono::milliseconds(1500);  // ample for a loaded machine
  attempt.hang.startup = std::chrono::milliseconds(1500);
  attempt.workers = {Watched(Shell(0, "for i in $(seq 1 40); do echo tick; sleep 0.1; done")),
                     Watched(Shell(1, "exec sleep 30"))};
  std::vector<HangReport> hangs;
  std::map<int, WorkerExit> exits;
  WorkerEvents events([&](const WorkerExit& e) { exits[e.local_rank] = e; });
  events.on_hang = [&](const HangReport& report) { hangs.push_back(report); };
  processes.Start(attempt, std::move(events));
  const auto started = std::chrono::steady_clock::now();
  RunUntil(io, [&] { return !hangs.empty(); });
  CHECK(std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(1500));
  CHECK(hangs[0].kind == HangReport::Kind::kNoProgress);
  CHECK(hangs[0].local_rank == 1);
  CHECK(hangs[0].startup);     // it never wrote a byte
  CHECK(hangs[0].progressed);  // rank 0 did, past its first line
  CHECK_THAT(hangs[0].cause, Contains("no first progress within the start-up timeout of 1.5 s"));
  RunUntil(io, [&] { return exits.count(0) == 1; });  // the chatty one finishes, unreported
  CHECK(hangs.size() == 1);
  bool stopped = false;
  processes.Stop(SIGKILL, std::chrono::milliseconds(0), [&] { stopped = true; });
  RunUntil(io, [&] { return stopped; });
}

TEST_CASE("a worker slow to its first line is left alone: start-up has its own timeout",
          "[launcher][process][hang]") {
  asio::io_context io;
  LocalProcessContext processes(io);
  AttemptLaunch attempt;
  attempt.hang.hang = std::chrono::milliseconds(500);
  attempt.hang.startup = std::chrono::seconds(60);
  // 2 s before its first line (an import), then a line every 0.1 s.
  attempt.workers = {Watched(Shell(0,
                                   "sleep 2; for i in $(seq 1 10); do echo step; sleep 0.1; "
                                   "done"))};
  std::vector<HangReport> hangs;
  std::optional<WorkerExit> exit;
  WorkerEvents events([&](const WorkerExit& e) { exit = e; });
  events.on_hang = [&](const HangReport& report) { hangs.push_back(report); };
  processes.Start(attempt, std::move(events));
  RunUntil(io, [&] { return exit.has_value() || !hangs.empty(); });
  CHECK(hangs.empty());
  REQUIRE(exit);
  CHECK(exit->status.Success());
}

TEST_CASE("after its first line a worker has the hang timeout, not the start-up one",
          "[launcher][process][hang]") {
  asio::io_context io;
  LocalProcessContext processes(io);
  AttemptLaunch attempt;
  attempt.hang.hang = std::chrono::milliseconds(500);
  attempt.hang.startup = std::chrono::seconds(60);
  attempt.workers = {Watched(Shell(0, "echo started; exec sleep 60"))};
  std::vector<HangReport> hangs;
  WorkerEvents events([](const WorkerExit&) {});
  events.on_hang = [&](const HangReport& report) { hangs.push_back(report); };
  const auto started = std::chrono::steady_clock::now();
  processes.Start(attempt, std::move(events));
  RunUntil(io, [&] { return !hangs.empty(); });
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
  CHECK_FALSE(hangs[0].startup);
  CHECK_FALSE(hangs[0].progressed);  // one line, then nothing
  CHECK_THAT(hangs[0].cause, Contains("after its last output at"));
  bool stopped = false;
  processes.Stop(SIGKILL, std::chrono::milliseconds(0), [&] { stopped = true; });
  RunUntil(io, [&] { return stopped; });
}

TEST_CASE("hang timeout auto: the timeout learned from the intervals catches a later silence",
          "[launcher][process][hang]") {
  asio::io_context io;
  LocalProcessContext processes(io);
  AttemptLaunch attempt;
  attempt.hang.learn = true;
  attempt.hang.startup = std::chrono::seconds(60);
  attempt.hang.learning.warmup_intervals = 5;
  attempt.hang.learning.floor = std::chrono::milliseconds(1000);
  // Steps of 0.1 s, then a silence of 60 s (the start-up timeout would wait it out).
  attempt.workers = {Watched(Shell(0,
                                   "for i in $(seq 1 12); do echo step; sleep 0.1; done; "
                                   "exec sleep 60"))};
  std::vector<HangReport> hangs;
  std::vector<LearnedHangTimeout> learned;
  WorkerEvents events([](const WorkerExit&) {});
  events.on_hang = [&](const HangReport& report) { hangs.push_back(report); };
  events.on_hang_timeout_learned = [&](const LearnedHangTimeout& l) { learned.push_back(l); };
  const auto started = std::chrono::steady_clock::now();
  processes.Start(attempt, std::move(events));
  RunUntil(io, [&] { return !hangs.empty(); });
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
  REQUIRE_FALSE(learned.empty());
  CHECK(learned.front().timeout >= std::chrono::milliseconds(1000));
  CHECK(learned.back().timeout ==
        std::max(std::chrono::milliseconds(1000), 5 * learned.back().longest_interval));
  CHECK_FALSE(hangs[0].startup);
  CHECK(hangs[0].progressed);
  CHECK_THAT(hangs[0].cause, Contains("after its last output at") && Contains("learned: 5 x"));
  bool stopped = false;
  processes.Stop(SIGKILL, std::chrono::milliseconds(0), [&] { stopped = true; });
  RunUntil(io, [&] { return stopped; });
}

TEST_CASE("pulses on the worker's FIFO are progress, and the FIFO goes with the group",
          "[launcher][process][hang]") {
  TempDir dir;
  asio::io_context io;
  LocalProcessContext processes(io);
  AttemptLaunch attempt;
  attempt.attempt_dir = dir.path + "/attempt_0";
  attempt.hang.hang = std::chrono::milliseconds(1500);  // ample for a loaded machine
  WorkerLaunch worker = Watched(Shell(0,
                                      "for i in $(seq 1 30); do echo > \"$DDPRUN_PULSE_FILE\"; "
                                      "sleep 0.1; done"));
  worker.pulse_file = attempt.attempt_dir + "/0/pulse";
  worker.env["DDPRUN_PULSE_FILE"] = worker.pulse_file;
  attempt.workers = {worker};
  std::vector<HangReport> hangs;
  std::optional<WorkerExit> exit;
  WorkerEvents events([&](const WorkerExit& e) { exit = e; });
  events.on_hang = [&](const HangReport& report) { hangs.push_back(report); };
  processes.Start(attempt, std::move(events));
  CHECK(IsFifo(worker.pulse_file));
  RunUntil(io, [&] { return exit.has_value(); });
  CHECK(exit->status.Success());
  CHECK(hangs.empty());
  bool stopped = false;
  processes.Stop(SIGTERM, std::chrono::seconds(1), [&] { stopped = true; });
  RunUntil(io, [&] { return stopped; });
  CHECK_FALSE(Exists(worker.pulse_file));
}

TEST_CASE("the timer FIFO: a released scope never fires, an expired one is reported",
          "[launcher][process][hang]") {
  TempDir dir;
  asio::io_context io;
  LocalProcessContext processes(io);
  AttemptLaunch attempt;
  attempt.timer_file = dir.path + "/timer";
  // What FileTimerClient writes: a request per scope, a release with expiration -1; a bad
  // line on the way is ignored.
  const std::string client =
      "import json, os, sys, time\n"
      "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)\n"
      "def send(scope, expiry, sig):\n"
      "    os.write(fd, (json.dumps({'version': 1, 'pid': os.getpid(), 'scope_id': scope,\n"
      "        'expiration_time': expiry, 'signal': sig}) + '\\n').encode())\n"
      "os.write(fd, b'not json\\n')\n"
      "send('released', time.time() + 0.3, 9)\n"
      "send('released', -1, 0)\n"
      "time.sleep(0.6)\n"
      "send('step', time.time() + 0.3, 9)\n"
      "time.sleep(30)\n";
  WorkerLaunch worker = Watched(Python(0, client));
  worker.argv.push_back(attempt.timer_file);
  attempt.workers = {worker};
  std::vector<HangReport> hangs;
  WorkerEvents events([](const WorkerExit&) {});
  events.on_hang = [&](const HangReport& report) { hangs.push_back(report); };
  processes.Start(attempt, std::move(events));
  CHECK(IsFifo(attempt.timer_file));
  RunUntil(io, [&] { return !hangs.empty(); });
  CHECK(hangs[0].kind == HangReport::Kind::kTimerExpired);
  CHECK(hangs[0].scope == "step");
  CHECK(hangs[0].signal == SIGKILL);
  CHECK(hangs[0].local_rank == 0);
  CHECK_THAT(hangs[0].cause, Contains("file timer expired: scope \"step\" of pid"));
  CHECK_THAT(hangs[0].cause, Contains("(armed for 0.3 s)"));
  bool stopped = false;
  processes.Stop(SIGKILL, std::chrono::milliseconds(0), [&] { stopped = true; });
  RunUntil(io, [&] { return stopped; });
  CHECK(hangs.size() == 1);
  CHECK_FALSE(Exists(attempt.timer_file));
}

TEST_CASE("a worker still alive after SIGKILL is named and not waited for",
          "[launcher][process][hang]") {
  asio::io_context io;
  DeafSignaller deaf;
  launcher::process::LocalProcessOptions options;
  options.unkillable_wait = std::chrono::milliseconds(300);
  options.signaller = &deaf;
  std::optional<WorkerExit> exit;
  std::vector<std::string> unkillable;
  pid_t pid = -1;
  // The real case: every signal to the worker is dropped.
  {
    LocalProcessContext processes(io, options);
    AttemptLaunch attempt;
    TempDir dir;
    attempt.workers = {Watched(Shell(0, "echo $$ > " + dir.path + "/pid; exec sleep 30"))};
    WorkerEvents events([&](const WorkerExit& e) { exit = e; });
    events.on_unkillable = [&](const std::string& line) { unkillable.push_back(line); };
    exit.reset();
    processes.Start(attempt, std::move(events));
    RunUntil(io, [&] { return !ReadAll(dir.path + "/pid").empty(); });
    pid = std::stoi(ReadAll(dir.path + "/pid"));
    deaf.deaf = pid;
    bool stopped = false;
    const auto asked = std::chrono::steady_clock::now();
    processes.Stop(SIGTERM, std::chrono::milliseconds(100), [&] { stopped = true; });
    RunUntil(io, [&] { return stopped; });
    CHECK(std::chrono::steady_clock::now() - asked >= std::chrono::milliseconds(400));
    REQUIRE(unkillable.size() == 1);
    CHECK_THAT(unkillable[0], Contains("worker pid " + std::to_string(pid) + " (local rank 0)"));
    CHECK_THAT(unkillable[0], Contains("after SIGKILL, in state S (sleeping)"));
    CHECK_FALSE(exit.has_value());
  }  // the context is destroyed without waiting for it
  ::kill(pid, SIGKILL);
  int status = 0;
  CHECK(::waitpid(pid, &status, 0) == pid);
}
