#include "elastic/session_sweep.h"

#include <catch2/catch.hpp>
#include <map>

using namespace ddprun::elastic;
using std::chrono::milliseconds;

namespace {

// A process table in memory. A killed process is gone after the next pause (as a zombie when
// `zombies` is set), unless it is unkillable (setuid, say) or dies slowly; one may fork a child
// at the moment it is killed. `views` replaces what given snapshots (numbered from 1) show: a
// real snapshot is not atomic, and can miss a child forked while it was taken.
class FakeTable : public ProcessTable {
 public:
  std::vector<ProcessInfo> processes;
  std::set<int> unkillable;
  std::map<int, int> pauses_to_die;              // pid -> pauses it stays alive after a kill
  std::map<int, ProcessInfo> forks_when_killed;  // pid -> the child it leaves
  bool zombies = false;
  std::vector<int> kills;
  std::vector<milliseconds> pauses;
  std::chrono::steady_clock::time_point now{};
  std::map<int, std::vector<ProcessInfo>> views;
  int snapshots = 0;

  std::vector<std::set<int>> asked;  // the sessions each snapshot was asked for

  std::vector<ProcessInfo> Snapshot(const std::set<int>& sessions) override {
    asked.push_back(sessions);
    ++snapshots;
    if (const auto view = views.find(snapshots); view != views.end()) return view->second;
    return processes;
  }
  void Kill(const ProcessInfo& process) override {
    kills.push_back(process.pid);
    if (const auto child = forks_when_killed.find(process.pid); child != forks_when_killed.end()) {
      processes.push_back(child->second);
      forks_when_killed.erase(child);
    }
    if (!unkillable.count(process.pid)) dying_.insert(process.pid);
  }
  void Pause(milliseconds duration) override {
    pauses.push_back(duration);
    now += duration;
    std::vector<ProcessInfo> left;
    for (auto process : processes) {
      if (dying_.count(process.pid) && pauses_to_die[process.pid]-- <= 0) {
        if (!zombies) continue;
        process.dead = true;
      }
      left.push_back(process);
    }
    processes = left;
  }
  std::chrono::steady_clock::time_point Now() override { return now; }

 private:
  std::set<int> dying_;
};

// Two workers (sessions 100 and 200, each with a child and a grandchild) beside the launcher's
// own session (50) and a stranger's (7).
FakeTable Job() {
  FakeTable table;
  table.processes = {{50, 50, false},   {7, 7, false},     {100, 100, false}, {101, 100, false},
                     {102, 100, false}, {200, 200, false}, {201, 200, false}, {202, 200, false}};
  return table;
}

SessionSweep Guarding(std::initializer_list<int> sessions) {
  SessionSweep sweep;
  for (const int session : sessions) sweep.Guard(session);
  return sweep;
}

std::vector<int> Pids(const std::vector<ProcessInfo>& processes) {
  std::vector<int> pids;
  for (const auto& process : processes) pids.push_back(process.pid);
  return pids;
}

}  // namespace

TEST_CASE("the launcher's lines name the sessions to guard", "[elastic][orphans]") {
  SessionSweep sweep;
  sweep.Feed("100\n20");
  sweep.Feed("0\n");
  CHECK(sweep.Sessions() == std::set<int>{100, 200});
  sweep.Feed("x1\n-5\n0\n1\n12a\n\n300");  // malformed, below 2, or not finished yet
  CHECK(sweep.Sessions() == std::set<int>{100, 200});
  sweep.Feed(std::string(100, '9') + "\n400\n");  // an over-long line is skipped, not parsed
  CHECK(sweep.Sessions() == std::set<int>{100, 200, 400});
}

TEST_CASE("a line may say its worker joined the job cgroup", "[elastic][orphans]") {
  SessionSweep sweep;
  CHECK(sweep.EverySessionInCgroup());  // nothing guarded: any table will do
  sweep.Feed("100 cgroup\n200 cgr");
  CHECK(sweep.Sessions() == std::set<int>{100});
  sweep.Feed("oup\n");
  CHECK(sweep.Sessions() == std::set<int>{100, 200});
  CHECK(sweep.EverySessionInCgroup());
  sweep.Feed("300 cgroupx\n300  cgroup\n cgroup\n1 cgroup\n300 Cgroup\n");  // all malformed
  CHECK(sweep.Sessions() == std::set<int>{100, 200});
  CHECK(sweep.EverySessionInCgroup());
  sweep.Feed("400\n");  // the old form: a worker outside the cgroup
  CHECK(sweep.Sessions() == std::set<int>{100, 200, 400});
  CHECK_FALSE(sweep.EverySessionInCgroup());
}

TEST_CASE("the cgroup is trusted again once the sessions outside it are forgotten",
          "[elastic][orphans]") {
  FakeTable table = Job();  // sessions 100 and 200 live, 400 has no process
  SessionSweep sweep;
  sweep.Feed("100 cgroup\n200 cgroup\n400\n");
  CHECK_FALSE(sweep.EverySessionInCgroup());
  sweep.Prune(table);
  CHECK(sweep.Sessions() == std::set<int>{100, 200});
  CHECK(sweep.EverySessionInCgroup());
  sweep.Feed("200\n");  // a session id fed again speaks for the new worker
  CHECK_FALSE(sweep.EverySessionInCgroup());
  sweep.Feed("200 cgroup\n");
  CHECK(sweep.EverySessionInCgroup());
}

TEST_CASE("the targets are the live processes of the guarded sessions", "[elastic][orphans]") {
  FakeTable table = Job();
  table.processes.push_back({103, 100, true});  // a zombie: nothing to kill
  CHECK(Pids(Guarding({100}).Targets(table.processes)) == std::vector<int>{100, 101, 102});
  CHECK(Guarding({}).Targets(table.processes).empty());
}

TEST_CASE("a session is forgotten once none of its processes lives", "[elastic][orphans]") {
  SessionSweep sweep = Guarding({100, 200, 300});
  // Worker 100 is gone but its child lives; 200 left only a zombie; 300 left nothing.
  FakeTable table;
  table.processes = {{101, 100, false}, {200, 200, true}, {7, 7, false}};
  sweep.Prune(table);
  CHECK(sweep.Sessions() == std::set<int>{100});
  CHECK(table.snapshots == 2);  // empty in both
}

TEST_CASE("while every guarded session lives, one snapshot is enough", "[elastic][orphans]") {
  SessionSweep sweep = Guarding({100, 200});
  FakeTable table = Job();
  sweep.Prune(table);
  CHECK(sweep.Sessions() == std::set<int>{100, 200});
  CHECK(table.snapshots == 1);
}

TEST_CASE("a session one snapshot shows empty is kept when the next shows its child",
          "[elastic][orphans]") {
  // Worker 100 forked 101 after the first snapshot listed /proc, and had exited by the time
  // that snapshot read it: a zombie, and no child (the keeper's launch under load, issue 37).
  SessionSweep sweep = Guarding({100, 200});
  FakeTable table;
  table.processes = {{100, 100, true}, {101, 100, false}, {200, 200, false}};
  table.views[1] = {{100, 100, true}, {200, 200, false}};
  sweep.Prune(table);
  CHECK(sweep.Sessions() == std::set<int>{100, 200});
}

TEST_CASE("a sweep kills every guarded process and nothing else", "[elastic][orphans]") {
  FakeTable table = Job();
  const SweepReport report = Guarding({100, 200}).Sweep(table);
  CHECK(report.survivors.empty());
  CHECK(report.killed == 6);
  CHECK(report.passes == 3);  // kill, then two snapshots that show none
  CHECK(table.kills == std::vector<int>{100, 101, 102, 200, 201, 202});
  CHECK(Pids(table.processes) == std::vector<int>{50, 7});
}

TEST_CASE("zombies left by a sweep do not count as survivors", "[elastic][orphans]") {
  FakeTable table = Job();
  table.zombies = true;
  const SweepReport report = Guarding({100}).Sweep(table);
  CHECK(report.survivors.empty());
  CHECK(report.passes == 3);
  CHECK(table.kills.size() == 3);
}

TEST_CASE("a child forked at the moment of a kill is caught by the next pass",
          "[elastic][orphans]") {
  FakeTable table = Job();
  table.forks_when_killed[102] = {103, 100, false};
  const SweepReport report = Guarding({100}).Sweep(table);
  CHECK(report.survivors.empty());
  CHECK(report.passes == 4);
  CHECK(report.killed == 4);
  CHECK(table.kills == std::vector<int>{100, 101, 102, 103});
}

TEST_CASE("a child that one snapshot missed is caught by the next", "[elastic][orphans]") {
  FakeTable table = Job();
  table.views[1] = table.processes;                   // 103 not forked yet
  table.processes.push_back({103, 100, false});       // forked by 102 while snapshot 2 was taken,
  table.views[2] = {{50, 50, false}, {7, 7, false}};  // by then without 100..102
  const SweepReport report = Guarding({100}).Sweep(table);
  CHECK(report.survivors.empty());
  CHECK(table.kills == std::vector<int>{100, 101, 102, 103});
  CHECK(report.passes == 5);  // kill, missed, kill 103, two that show none
}

TEST_CASE("a slow death is killed again until it is gone", "[elastic][orphans]") {
  FakeTable table = Job();
  table.pauses_to_die[101] = 2;
  const SweepReport report = Guarding({100}).Sweep(table);
  CHECK(report.survivors.empty());
  CHECK(report.killed == 3);
  CHECK(report.passes == 5);
  CHECK(table.pauses ==
        std::vector<milliseconds>{milliseconds(1), milliseconds(2), milliseconds(4)});
}

TEST_CASE("an unkillable process ends the sweep at the pass limit", "[elastic][orphans]") {
  FakeTable table = Job();
  table.unkillable = {201};
  SweepLimits limits;
  limits.max_passes = 5;
  const SweepReport report = Guarding({100, 200}).Sweep(table, limits);
  CHECK(report.passes == 5);
  CHECK(report.survivors == std::vector<int>{201});
  CHECK(report.killed == 6);
  CHECK(table.snapshots == 5);
}

TEST_CASE("the sweep's time limit holds and pauses grow to their cap", "[elastic][orphans]") {
  FakeTable table = Job();
  table.unkillable = {100};
  SweepLimits limits;        // 5 s, pauses up to 100 ms
  limits.max_passes = 1000;  // (the default 50 passes end it first, after about 4.3 s)
  const SweepReport report = Guarding({100}).Sweep(table, limits);
  CHECK(report.survivors == std::vector<int>{100});
  CHECK(table.now - std::chrono::steady_clock::time_point{} >= limits.max_time);
  CHECK(table.now - std::chrono::steady_clock::time_point{} < limits.max_time + limits.max_pause);
  CHECK(report.passes < limits.max_passes);
  CHECK(table.pauses.front() == milliseconds(1));
  CHECK(table.pauses.back() == limits.max_pause);
}

TEST_CASE("a sweep with nothing to kill takes two looks", "[elastic][orphans]") {
  FakeTable table = Job();
  const SweepReport report = Guarding({300}).Sweep(table);
  CHECK(report.passes == 2);
  CHECK(report.killed == 0);
  CHECK(table.kills.empty());
  CHECK(table.pauses.empty());
}

TEST_CASE("a snapshot is asked for the guarded sessions only", "[elastic][orphans]") {
  // The real table reads /proc/<pid>/stat only for these (launcher/process/proc_table.h).
  FakeTable table = Job();
  SessionSweep sweep = Guarding({100, 200, 300});
  sweep.Prune(table);  // 300 is gone: forgotten after two snapshots
  CHECK(table.asked == std::vector<std::set<int>>{{100, 200, 300}, {100, 200, 300}});
  const SweepReport report = sweep.Sweep(table);
  CHECK(report.killed == 6);
  CHECK(table.asked.back() == std::set<int>{100, 200});
}
