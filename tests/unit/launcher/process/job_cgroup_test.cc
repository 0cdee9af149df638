// The job cgroup against the real kernel: made, joined by a spawned worker and by a forked
// child, listed by CgroupProcessTable, removed. Where this machine cannot make one (not root
// without delegation, a read-only /sys/fs/cgroup in a container, no cgroup2), each case says so
// and checks nothing more.
#include "launcher/process/job_cgroup.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "launcher/process/cgroup_paths.h"
#include "launcher/process/cgroup_table.h"
#include "launcher/process/proc_table.h"
#include "launcher/process/spawn.h"

using namespace ddprun::launcher::process;

namespace {

constexpr int kDeadlineMs = 5000;

// A job cgroup for the test, removed at its end (after its processes are reaped).
struct TestCgroup {
  JobCgroup cgroup = JobCgroup::Create();
  TestCgroup() {
    if (!cgroup.Exists()) WARN("skipped: this machine cannot make a job cgroup here");
  }
  ~TestCgroup() {
    if (cgroup.Exists()) RemoveJobCgroup(cgroup.Path());
  }
};

// Reads one line (at most 64 bytes) from `fd`, waiting at most kDeadlineMs for each part.
std::string ReadLine(int fd) {
  std::string line;
  char c = 0;
  pollfd ready{fd, POLLIN, 0};
  while (line.size() < 64 && ::poll(&ready, 1, kDeadlineMs) == 1 && ::read(fd, &c, 1) == 1) {
    line.push_back(c);
    if (c == '\n') break;
  }
  return line;
}

// The v2 cgroup path of process `pid`, as the kernel says.
std::string CgroupOf(int pid) {
  return Cgroup2PathOf(ReadKernelFile("/proc/" + std::to_string(pid) + "/cgroup").value_or(""))
      .value_or("?");
}

// A child in a session of its own that joins the cgroup of `procs_fd`, says so on a pipe, and
// pauses until killed; killed and reaped at the end of the test unless reaped already.
struct JoinedChild {
  pid_t pid = -1;
  bool reaped = false;
  explicit JoinedChild(int procs_fd) {
    int ready[2];
    REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
    pid = ::fork();
    if (pid == 0) {
      ::setsid();
      const char joined = ::write(procs_fd, "0", 1) == 1 ? 'y' : 'n';
      [[maybe_unused]] const ssize_t ignored = ::write(ready[1], &joined, 1);
      for (;;) ::pause();
    }
    ::close(ready[1]);
    pollfd said{ready[0], POLLIN, 0};
    char joined = 0;
    const bool heard = ::poll(&said, 1, kDeadlineMs) == 1 && ::read(ready[0], &joined, 1) == 1;
    ::close(ready[0]);
    REQUIRE(heard);
    REQUIRE(joined == 'y');
  }
  JoinedChild(const JoinedChild&) = delete;
  JoinedChild& operator=(const JoinedChild&) = delete;
  void KillAndReap() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    reaped = true;
  }
  ~JoinedChild() {
    if (pid > 0 && !reaped) KillAndReap();
  }
};

}  // namespace

TEST_CASE("a job cgroup is made in this process's cgroup and removed", "[launcher][orphans]") {
  std::string path;
  {
    TestCgroup test;
    if (!test.cgroup.Exists()) return;
    path = test.cgroup.Path();
    CHECK(std::filesystem::is_directory(path));
    CHECK(std::filesystem::path(path).filename().string().rfind(
              "ddprun-" + std::to_string(::getpid()) + "-", 0) == 0);
    CHECK(test.cgroup.ProcsFd() >= 0);
    CHECK(test.cgroup.DirFd() >= 0);
    CHECK((::fcntl(test.cgroup.ProcsFd(), F_GETFD) & FD_CLOEXEC) != 0);
    const auto parent = JobCgroupParent(std::getenv(kJobCgroupVariable),
                                        ReadKernelFile("/proc/self/mountinfo").value_or(""),
                                        ReadKernelFile("/proc/self/cgroup").value_or(""))
                            .parent;
    CHECK(parent == std::filesystem::path(path).parent_path().string());
  }
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("the cgroup table lists the cgroup's processes of the asked sessions",
          "[launcher][orphans]") {
  TestCgroup test;
  if (!test.cgroup.Exists()) return;
  JoinedChild child(test.cgroup.ProcsFd());
  CgroupProcessTable table(test.cgroup.Path());
  const auto in_child_session = table.Snapshot({child.pid});
  REQUIRE(in_child_session.size() == 1);
  CHECK(in_child_session[0].pid == child.pid);
  CHECK(in_child_session[0].session == child.pid);
  CHECK_FALSE(in_child_session[0].dead);
  CHECK(table.Snapshot({::getsid(0)}).empty());  // this process's session, but not in the cgroup
  CHECK(table.Snapshot({}).empty());
  table.Kill({child.pid, child.pid + 1, false});  // the session check of the /proc table's Kill
  CHECK(::waitpid(child.pid, nullptr, WNOHANG) == 0);
  table.Kill({child.pid, child.pid, false});
  int status = 0;
  REQUIRE(::waitpid(child.pid, &status, 0) == child.pid);
  child.reaped = true;
  CHECK(WIFSIGNALED(status));
  CHECK(table.Snapshot({child.pid}).empty());
  CHECK(RemoveJobCgroup(test.cgroup.Path()));
  CHECK_FALSE(std::filesystem::exists(test.cgroup.Path()));
}

TEST_CASE("without its cgroup.procs the cgroup table scans /proc", "[launcher][orphans]") {
  CgroupProcessTable table("/nonexistent/ddprun-cgroup");
  bool found = false;
  for (const auto& process : table.Snapshot({::getsid(0)})) found |= process.pid == ::getpid();
  CHECK(found);
}

TEST_CASE("a job cgroup holding a live process is not removed", "[launcher][orphans]") {
  TestCgroup test;
  if (!test.cgroup.Exists()) return;
  JoinedChild child(test.cgroup.ProcsFd());
  CHECK_FALSE(RemoveJobCgroup(test.cgroup.Path()));  // at once: no wait for a live process
  CHECK(std::filesystem::exists(test.cgroup.Path()));
  child.KillAndReap();
  CHECK(RemoveJobCgroup(test.cgroup.Path()));
}

TEST_CASE("a spawned worker joins the job cgroup before it tells the keeper",
          "[launcher][orphans]") {
  TestCgroup test;
  if (!test.cgroup.Exists()) return;
  int keeper[2];
  REQUIRE(::pipe2(keeper, O_CLOEXEC) == 0);
  const SpawnResult spawned =
      SpawnWorker({{"/bin/sleep", "30"}, {}, -1, -1, keeper[1], test.cgroup.DirFd(), {}});
  ::close(keeper[1]);
  REQUIRE(spawned.pid > 0);
  const std::string line = ReadLine(keeper[0]);
  ::close(keeper[0]);
  CHECK(line == std::to_string(spawned.pid) + " cgroup\n");
  INFO("procs: " << ReadKernelFile(test.cgroup.Path() + "/cgroup.procs").value_or("?"));
  INFO("stat: " << ReadKernelFile("/proc/" + std::to_string(spawned.pid) + "/stat").value_or("?"));
  CHECK(CgroupProcessTable(test.cgroup.Path()).Snapshot({spawned.pid}).size() == 1);
  const std::string name = std::filesystem::path(test.cgroup.Path()).filename().string();
  const std::string in = CgroupOf(spawned.pid);
  CHECK(in.substr(in.size() - std::min(in.size(), name.size())) == name);
  ::kill(spawned.pid, SIGKILL);
  ::waitpid(spawned.pid, nullptr, 0);
}

TEST_CASE("a worker that cannot join says so on its line", "[launcher][orphans]") {
  int keeper[2];
  REQUIRE(::pipe2(keeper, O_CLOEXEC) == 0);
  const int unwritable = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // not a cgroup: refused
  const SpawnResult spawned =
      SpawnWorker({{"/bin/sleep", "30"}, {}, -1, -1, keeper[1], unwritable, {}});
  ::close(keeper[1]);
  ::close(unwritable);
  REQUIRE(spawned.pid > 0);
  const std::string line = ReadLine(keeper[0]);
  ::close(keeper[0]);
  CHECK(line == std::to_string(spawned.pid) + "\n");
  ::kill(spawned.pid, SIGKILL);
  ::waitpid(spawned.pid, nullptr, 0);
}
