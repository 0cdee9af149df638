// --numa-binding's last step (launcher/process/spawn.cc): the worker runs on its CPUs from its
// first instruction, and a CPU set the kernel refuses is a start failure naming
// sched_setaffinity.
#include <catch2/catch.hpp>
#include <map>

#include "common/asio.h"
#include "launcher/process/hwloc_topology.h"
#include "launcher/process/local_process_context.h"
#include "tests/unit/launcher/process/process_test_util.h"

using namespace ddprun;
using namespace ddprun::elastic;
using ddprun::launcher::process::testing::ReadAll;
using ddprun::launcher::process::testing::RunUntil;
using ddprun::launcher::process::testing::Shell;
using ddprun::launcher::process::testing::TempDir;

TEST_CASE("a bound worker's Cpus_allowed_list is its binding, an unbound one keeps the mask",
          "[launcher][process][numa]") {
  const CpuList mine = launcher::process::AllowedCpus();
  TempDir dir;
  asio::io_context io;
  launcher::process::LocalProcessContext processes(io);
  AttemptLaunch attempt;
  for (int rank = 0; rank < 2; ++rank) {
    attempt.workers.push_back(Shell(rank, "grep Cpus_allowed_list /proc/self/status > " + dir.path +
                                              "/" + std::to_string(rank)));
  }
  attempt.workers[0].cpu_binding.cpus = {mine.back()};
  std::map<int, WorkerExit> exits;
  processes.Start(attempt, [&](const WorkerExit& exit) { exits[exit.local_rank] = exit; });
  RunUntil(io, [&] { return exits.size() == 2; });
  CHECK(exits[0].status.Success());
  CHECK(ReadAll(dir.path + "/0") == "Cpus_allowed_list:\t" + std::to_string(mine.back()) + "\n");
  CHECK(ReadAll(dir.path + "/1") == "Cpus_allowed_list:\t" + CpuListText(mine) + "\n");
}

TEST_CASE("a CPU set the kernel refuses is a start failure naming sched_setaffinity",
          "[launcher][process][numa]") {
  asio::io_context io;
  launcher::process::LocalProcessContext processes(io);
  AttemptLaunch attempt;
  attempt.workers = {Shell(0, "exit 0")};
  attempt.workers[0].cpu_binding.cpus = {1000};  // no such CPU here
  std::map<int, WorkerExit> exits;
  processes.Start(attempt, [&](const WorkerExit& exit) { exits[exit.local_rank] = exit; });
  RunUntil(io, [&] { return exits.size() == 1; });
  CHECK(exits[0].status.ShellCode() == 126);
  CHECK(exits[0].spawn_error ==
        "cannot start '/bin/sh': sched_setaffinity to CPUs 1000: Invalid argument");
}
