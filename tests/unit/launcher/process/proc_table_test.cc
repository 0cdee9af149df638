#include "launcher/process/proc_table.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <set>

using namespace ddprun;
using launcher::process::ParseProcStat;

TEST_CASE("a stat line gives pid, session and whether the process is dead", "[launcher][orphans]") {
  const auto sleeping = ParseProcStat("4242 (sleep) S 4200 4201 4100 0 -1 4194560 97 0 0 0\n");
  REQUIRE(sleeping);
  CHECK(sleeping->pid == 4242);
  CHECK(sleeping->session == 4100);
  CHECK_FALSE(sleeping->dead);
  const auto zombie = ParseProcStat("17 (pt_main_thread) Z 1 16 16 0 -1");
  REQUIRE(zombie);
  CHECK(zombie->dead);
}

TEST_CASE("a command name with spaces and parentheses does not shift the fields",
          "[launcher][orphans]") {
  const auto process = ParseProcStat("99 (a) b (c) R 1 98 97 0");
  REQUIRE(process);
  CHECK(process->pid == 99);
  CHECK(process->session == 97);
}

TEST_CASE("a malformed stat line is no process", "[launcher][orphans]") {
  CHECK_FALSE(ParseProcStat(""));
  CHECK_FALSE(ParseProcStat("12 (x"));
  CHECK_FALSE(ParseProcStat("12 (x) S 1 2"));
  CHECK_FALSE(ParseProcStat("z (x) S 1 2 3"));
  CHECK_FALSE(ParseProcStat("12 (x) S 1 2 3x"));
}

TEST_CASE("the /proc table lists this process in its session", "[launcher][orphans]") {
  launcher::process::ProcProcessTable table;
  bool found = false;
  for (const auto& process : table.Snapshot({getsid(0)})) {
    if (process.pid == getpid()) found = process.session == getsid(0) && !process.dead;
  }
  CHECK(found);
}

namespace {
// A child in a session of its own that pauses until killed. The destructor kills and reaps it
// unless the test reaped it already, so a failed REQUIRE leaves no process behind.
struct SessionLeader {
  pid_t pid = -1;
  bool reaped = false;
  SessionLeader() : pid(fork()) {
    if (pid == 0) {
      setsid();
      for (;;) pause();
    }
    // Wait (bounded) until the child has its own session.
    for (int tries = 0; pid > 0 && tries < 2000 && getsid(pid) != pid; ++tries) usleep(1000);
  }
  SessionLeader(const SessionLeader&) = delete;
  SessionLeader& operator=(const SessionLeader&) = delete;
  ~SessionLeader() {
    if (pid <= 0 || reaped) return;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
};
}  // namespace

// The child's session is made here, so the test does not depend on where it runs (a CI
// container may put this process and pid 1 in the same session, 0).
TEST_CASE("the /proc table lists the asked sessions' processes only", "[launcher][orphans]") {
  SessionLeader leader;
  const pid_t child = leader.pid;
  REQUIRE(child > 0);
  REQUIRE(getsid(child) == child);
  launcher::process::ProcProcessTable table;
  const auto in_child_session = table.Snapshot({child});
  CHECK(in_child_session.size() == 1);
  for (const auto& process : in_child_session) {
    CHECK(process.pid == child);
    CHECK(process.session == child);
  }
  const int ours = getsid(0);
  const auto in_our_session = table.Snapshot({ours});
  CHECK_FALSE(in_our_session.empty());
  for (const auto& process : in_our_session) {
    CHECK(process.session == ours);
    CHECK(process.pid != child);
  }
  CHECK(table.Snapshot({}).empty());
}

TEST_CASE("the /proc table kills a process only while it is in the expected session",
          "[launcher][orphans]") {
  SessionLeader leader;
  const pid_t child = leader.pid;
  REQUIRE(child > 0);
  REQUIRE(getsid(child) == child);
  launcher::process::ProcProcessTable table;
  table.Kill({child, child + 1, false});  // a pid that now names someone else's process
  CHECK(waitpid(child, nullptr, WNOHANG) == 0);
  table.Kill({child, child, false});
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  leader.reaped = true;
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}
