#include "elastic/failure.h"

#include <catch2/catch.hpp>

using namespace ddprun;
using namespace ddprun::elastic;

namespace {
WorkerExit Exit(int local_rank, ExitStatus status, int seconds) {
  WorkerExit exit;
  exit.local_rank = local_rank;
  exit.pid = 1000 + local_rank;
  exit.status = status;
  exit.time = SystemTime{std::chrono::seconds{seconds}};
  return exit;
}
}  // namespace

TEST_CASE("a failure without error file gets torchrun's fallback messages", "[elastic][failure]") {
  const auto code = MakeFailure(Exit(1, ExitStatus::Exited(3), 10), 5, "/e.json");
  CHECK(code.error_file == "<N/A>");
  CHECK(code.global_rank == 5);
  CHECK(code.message ==
        "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html");
  const auto killed = MakeFailure(Exit(0, ExitStatus::Signaled(9), 10), 0, "/e.json");
  CHECK(killed.message == "Signal 9 (SIGKILL) received by PID 1000");
  CHECK(killed.status.TorchrunCode() == -9);
  CHECK(killed.status.ShellCode() == 137);
}

TEST_CASE("without an error file the summary shows the last lines of stderr",
          "[elastic][failure]") {
  WorkerExit exit = Exit(1, ExitStatus::Exited(1), 10);
  exit.stderr_tail = "Traceback (most recent call last):\n  File \"t.py\", line 3\nKeyError: 'x'";
  CHECK(MakeFailure(exit, 1, "/e.json").message == "last lines of stderr:\n" + exit.stderr_tail);
  exit.status = ExitStatus::Signaled(9);
  CHECK(MakeFailure(exit, 1, "/e.json").message ==
        "Signal 9 (SIGKILL) received by PID 1001\nlast lines of stderr:\n" + exit.stderr_tail);
  exit.error_file_json = R"({"message": "from the error file"})";  // @record still wins
  CHECK(MakeFailure(exit, 1, "/e.json").message == "from the error file");
}

TEST_CASE("error files in both torchrun formats give message and timestamp", "[elastic][failure]") {
  auto exit = Exit(0, ExitStatus::Exited(1), 500);
  exit.error_file_json =
      R"({"message": {"message": "ValueError: boom", "extraInfo": {"py_callstack": "Traceback:\n  line", "timestamp": "100"}}})";
  auto failure = MakeFailure(exit, 0, "/e.json");
  CHECK(failure.error_file == "/e.json");
  CHECK(failure.message == "Traceback:\n  line");
  CHECK(failure.time == SystemTime{std::chrono::seconds{100}});

  exit.error_file_json = R"({"message": "plain failure", "timestamp": 42})";
  failure = MakeFailure(exit, 0, "/e.json");
  CHECK(failure.message == "plain failure");
  CHECK(failure.time == SystemTime{std::chrono::seconds{42}});

  exit.error_file_json = "{not json";
  failure = MakeFailure(exit, 0, "/e.json");
  CHECK(failure.message.rfind("unreadable error file", 0) == 0);
}

TEST_CASE("the root cause is the earliest failure", "[elastic][failure]") {
  std::vector<ProcessFailure> failures{MakeFailure(Exit(0, ExitStatus::Signaled(15), 20), 0, ""),
                                       MakeFailure(Exit(1, ExitStatus::Exited(3), 10), 1, ""),
                                       MakeFailure(Exit(2, ExitStatus::Signaled(15), 10), 2, "")};
  CHECK(RootCauseIndex(failures) == 1);
}

TEST_CASE("the summary has torchrun's layout", "[elastic][failure]") {
  std::vector<ProcessFailure> failures{MakeFailure(Exit(0, ExitStatus::Signaled(15), 20), 0, ""),
                                       MakeFailure(Exit(1, ExitStatus::Exited(3), 10), 1, "")};
  const std::string text = FormatFailureSummary("train.py", "node-a", failures);
  CHECK(text.rfind(std::string(60, '=') + "\ntrain.py FAILED\n" + std::string(60, '-') +
                       "\nFailures:\n[0]:\n",
                   0) == 0);
  CHECK(text.find("Root Cause (first observed failure):\n[1]:\n") != std::string::npos);
  CHECK(text.find("  rank      : 1 (local_rank: 1)\n  exitcode  : 3 (pid: 1001)\n") !=
        std::string::npos);
  CHECK(text.find("  exitcode  : -15 (pid: 1000)\n  error_file: <N/A>\n  traceback : Signal 15 "
                  "(SIGTERM) received by PID 1000") != std::string::npos);
  CHECK(text.find("  host      : node-a\n") != std::string::npos);

  const std::string alone = FormatFailureSummary("x", "h", {failures[1]});
  CHECK(alone.find("Failures:\n  <NO_OTHER_FAILURES>\n") != std::string::npos);
}
