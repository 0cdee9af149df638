#include "launcher/process/local_process_context.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>

#include "common/asio.h"
#include "tests/unit/launcher/process/process_test_util.h"

using namespace ddprun;
using namespace ddprun::elastic;

using ddprun::launcher::process::testing::ReadAll;
using ddprun::launcher::process::testing::RunUntil;
using ddprun::launcher::process::testing::Shell;
using ddprun::launcher::process::testing::TempDir;

TEST_CASE("exits are reported with their codes and signals", "[launcher][process]") {
  asio::io_context io;
  launcher::process::LocalProcessContext processes(io);
  AttemptLaunch attempt;
  attempt.workers = {Shell(0, "exit 0"), Shell(1, "exit 3"), Shell(2, "kill -9 $$")};
  std::map<int, ExitStatus> exits;
  processes.Start(attempt, [&](const WorkerExit& exit) { exits[exit.local_rank] = exit.status; });
  RunUntil(io, [&] { return exits.size() == 3; });
  CHECK(exits[0].Success());
  CHECK(exits[1].ShellCode() == 3);
  CHECK(exits[2].Signaled());
  CHECK(exits[2].code == SIGKILL);
}

TEST_CASE("a program that cannot be executed is an exit with 127 or 126", "[launcher][process]") {
  asio::io_context io;
  launcher::process::LocalProcessContext processes(io);
  AttemptLaunch attempt;
  attempt.workers = {Shell(0, ""), Shell(1, "")};
  attempt.workers[0].argv = {"/nonexistent/program"};
  attempt.workers[1].argv = {"/etc/hostname"};
  std::map<int, WorkerExit> exits;
  processes.Start(attempt, [&](const WorkerExit& exit) { exits[exit.local_rank] = exit; });
  RunUntil(io, [&] { return exits.size() == 2; });
  CHECK(exits[0].status.ShellCode() == 127);
  CHECK(exits[0].spawn_error.find("/nonexistent/program") != std::string::npos);
  CHECK(exits[1].status.ShellCode() == 126);
}

TEST_CASE("stop sends the signal, then SIGKILL at the shared deadline", "[launcher][process]") {
  asio::io_context io;
  launcher::process::LocalProcessContext processes(io);
  TempDir dir;
  const std::string ready = dir.path + "/ready";
  AttemptLaunch attempt;
  attempt.workers = {Shell(0, "exec sleep 30"),
                     Shell(1, "trap '' TERM; touch " + ready + "; while :; do sleep 1; done")};
  std::map<int, ExitStatus> exits;
  processes.Start(attempt, [&](const WorkerExit& exit) { exits[exit.local_rank] = exit.status; });
  RunUntil(io, [&] { return std::ifstream(ready).good(); });
  bool stopped = false;
  const auto start = std::chrono::steady_clock::now();
  processes.Stop(SIGTERM, std::chrono::milliseconds(300), [&] { stopped = true; });
  RunUntil(io, [&] { return stopped; });
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(300));
  CHECK(exits[0].code == SIGTERM);
  CHECK(exits[1].code == SIGKILL);
}

TEST_CASE("tee'd output goes to the log file and error files are read back",
          "[launcher][process]") {
  asio::io_context io;
  launcher::process::LocalProcessContext processes(io);
  TempDir dir;
  AttemptLaunch attempt;
  attempt.attempt_dir = dir.path + "/attempt_0";
  auto worker =
      Shell(0, "printf 'a\\nb'; echo '{\"message\": \"boom\", \"timestamp\": 5}' > $ERR; exit 1");
  worker.env["ERR"] = attempt.attempt_dir + "/0/error.json";
  worker.error_file = worker.env["ERR"];
  worker.out = {attempt.attempt_dir + "/0/stdout.log", false, true};
  attempt.workers = {worker};
  std::optional<WorkerExit> exit;
  processes.Start(attempt, [&](const WorkerExit& e) { exit = e; });
  RunUntil(io, [&] { return exit.has_value(); });
  CHECK(ReadAll(attempt.attempt_dir + "/0/stdout.log") == "a\nb");
  REQUIRE(exit->error_file_json);
  CHECK(exit->error_file_json->find("boom") != std::string::npos);
}
