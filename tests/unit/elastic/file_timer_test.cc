#include "elastic/file_timer.h"

#include <catch2/catch.hpp>

using namespace ddprun::elastic;

namespace {
TimerRequest Request(pid_t pid, std::string scope, double expiration, int signal = 9) {
  TimerRequest request;
  request.pid = pid;
  request.scope_id = std::move(scope);
  request.expiration_time = expiration;
  request.signal = signal;
  return request;
}

// The error of a line that must not parse.
std::string ErrorOf(std::string_view line) {
  std::string error;
  const auto request = ParseTimerRequest(line, &error);
  CHECK_FALSE(request.has_value());
  return error;
}
}  // namespace

TEST_CASE("file timer requests as FileTimerClient writes them parse", "[file_timer]") {
  std::string error = "stale";
  const auto acquire = ParseTimerRequest(
      R"({"version": 1, "pid": 4242, "scope_id": "step", "expiration_time": 1700000030.5, "signal": 9})",
      &error);
  REQUIRE(acquire);
  CHECK(error.empty());
  CHECK(acquire->version == 1);
  CHECK(acquire->pid == 4242);
  CHECK(acquire->scope_id == "step");
  CHECK(acquire->expiration_time == 1700000030.5);
  CHECK(acquire->signal == 9);

  const auto release = ParseTimerRequest(
      R"({"version": 1, "pid": 4242, "scope_id": "step", "expiration_time": -1, "signal": 0})",
      &error);
  REQUIRE(release);
  CHECK(release->expiration_time == -1);
  CHECK(release->signal == 0);
  // Extra members are ignored; an integer expiration is a number too.
  const auto extra = ParseTimerRequest(
      R"({"signal": 64, "expiration_time": 5, "scope_id": "", "pid": 1, "version": 1, "x": [1]})",
      nullptr);
  REQUIRE(extra);
  CHECK(extra->expiration_time == 5);
  CHECK(extra->signal == 64);
}

TEST_CASE("malformed file timer requests are refused with one line naming why", "[file_timer]") {
  CHECK_THAT(ErrorOf("not json"), Catch::StartsWith("file timer request is not JSON: "));
  CHECK_THAT(ErrorOf(""), Catch::StartsWith("file timer request is not JSON: "));
  CHECK(ErrorOf("[1, 2]") == "file timer request is not a JSON object: array");
  CHECK(ErrorOf(R"({"version": 1, "scope_id": "s", "expiration_time": 1, "signal": 9})") ==
        R"(file timer request lacks "pid")");
  CHECK(ErrorOf(R"({"pid": 5, "scope_id": "s", "expiration_time": 1, "signal": 9})") ==
        R"(file timer request lacks "version")");
  CHECK(ErrorOf(R"({"version": 1, "pid": 5, "expiration_time": 1, "signal": 9})") ==
        R"(file timer request lacks "scope_id")");
  CHECK(ErrorOf(R"({"version": 1, "pid": 5, "scope_id": "s", "signal": 9})") ==
        R"(file timer request lacks "expiration_time")");
  CHECK(ErrorOf(R"({"version": 1, "pid": 5, "scope_id": "s", "expiration_time": 1})") ==
        R"(file timer request lacks "signal")");
  CHECK(
      ErrorOf(R"({"version": 2, "pid": 5, "scope_id": "s", "expiration_time": 1, "signal": 9})") ==
      "file timer request of version 2 (only 1 is known)");
  for (const auto& error : {ErrorOf("{\n"), ErrorOf("\"a\nb\"")}) {
    CHECK(error.find('\n') == std::string::npos);
  }
}

TEST_CASE("file timer requests with mistyped fields are refused", "[file_timer]") {
  CHECK(ErrorOf(
            R"({"version": 1, "pid": "5", "scope_id": "s", "expiration_time": 1, "signal": 9})") ==
        R"(file timer request's "pid" is not an integer: "5")");
  CHECK(ErrorOf(
            R"({"version": 1, "pid": 5.5, "scope_id": "s", "expiration_time": 1, "signal": 9})") ==
        R"(file timer request's "pid" is not an integer: 5.5)");
  CHECK(ErrorOf(R"({"version": 1, "pid": 5, "scope_id": 7, "expiration_time": 1, "signal": 9})") ==
        R"(file timer request's "scope_id" is not a string: 7)");
  CHECK(ErrorOf(
            R"({"version": 1, "pid": 5, "scope_id": "s", "expiration_time": "1", "signal": 9})") ==
        R"(file timer request's "expiration_time" is not a number: "1")");
  CHECK(ErrorOf(
            R"({"version": 1, "pid": 5, "scope_id": "s", "expiration_time": 1, "signal": true})") ==
        R"(file timer request's "signal" is not an integer: true)");
  CHECK(ErrorOf(
            R"({"version": "1", "pid": 5, "scope_id": "s", "expiration_time": 1, "signal": 9})") ==
        R"(file timer request's "version" is not an integer: "1")");
  CHECK(
      ErrorOf(R"({"version": 1, "pid": 5, "scope_id": "s", "expiration_time": 1, "signal": 65})") ==
      R"(file timer request's "signal" 65 is outside 0..64)");
  CHECK(
      ErrorOf(R"({"version": 1, "pid": 5, "scope_id": "s", "expiration_time": 1, "signal": -1})") ==
      R"(file timer request's "signal" -1 is outside 0..64)");
  CHECK(
      ErrorOf(
          R"({"version": 1, "pid": 18446744073709551615, "scope_id": "s", "expiration_time": 1, "signal": 9})") ==
      R"(file timer request's "pid" is not an integer: 18446744073709551615)");
}

TEST_CASE("file timer requests of a non-positive pid are refused", "[file_timer]") {
  CHECK(
      ErrorOf(R"({"version": 1, "pid": 0, "scope_id": "s", "expiration_time": 1, "signal": 9})") ==
      R"(file timer request's "pid" 0 is not a positive pid)");
  CHECK(
      ErrorOf(R"({"version": 1, "pid": -3, "scope_id": "s", "expiration_time": 1, "signal": 9})") ==
      R"(file timer request's "pid" -3 is not a positive pid)");
  CHECK(
      ErrorOf(
          R"({"version": 1, "pid": 4294967296, "scope_id": "s", "expiration_time": 1, "signal": 9})") ==
      R"(file timer request's "pid" 4294967296 is not a positive pid)");
}

TEST_CASE("file timer requests over PIPE_BUF are refused before parsing", "[file_timer]") {
  const std::string head = R"({"version": 1, "pid": 5, "scope_id": ")";
  const std::string tail = R"(", "expiration_time": 1, "signal": 9})";
  const std::string fits =
      head + std::string(kMaxTimerRequestBytes - head.size() - tail.size(), 'a') + tail;
  REQUIRE(fits.size() == kMaxTimerRequestBytes);
  CHECK(ParseTimerRequest(fits, nullptr));
  CHECK(ErrorOf(fits + " ") == "file timer request of 4097 bytes exceeds 4096");
  CHECK(ErrorOf(std::string(5000, 'x')) == "file timer request of 5000 bytes exceeds 4096");
}

TEST_CASE("a file timer release removes its scope only", "[file_timer]") {
  FileTimerTable table;
  table.Apply(Request(10, "a", 100));
  table.Apply(Request(10, "b", 200));
  table.Apply(Request(11, "a", 300));
  CHECK(table.Size() == 3);
  table.Apply(Request(10, "a", -1, 0));
  CHECK(table.Size() == 2);
  CHECK(table.NextExpiration() == 200);
  table.Apply(Request(10, "never armed", -1, 0));
  CHECK(table.Size() == 2);
  CHECK(table.TakeExpired(150).empty());
}

TEST_CASE("re-arming a file timer scope replaces its expiration and signal", "[file_timer]") {
  FileTimerTable table;
  table.Apply(Request(10, "step", 100, 9));
  table.Apply(Request(10, "step", 500, 15));
  CHECK(table.Size() == 1);
  CHECK(table.TakeExpired(499).empty());
  const auto expired = table.TakeExpired(500);  // exactly at the expiration: expired
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].pid == 10);
  CHECK(expired[0].scope_id == "step");
  CHECK(expired[0].expiration_time == 500);
  CHECK(expired[0].signal == 15);
  CHECK(table.Size() == 0);
}

TEST_CASE("an expired pid gets its earliest expired timer with a positive signal", "[file_timer]") {
  FileTimerTable table;
  table.Apply(Request(20, "zero", 100, 0));
  table.Apply(Request(20, "late", 300, 6));
  table.Apply(Request(20, "early", 200, 9));
  table.Apply(Request(20, "future", 1000, 9));
  table.Apply(Request(21, "other", 150, 15));
  table.Apply(Request(22, "future", 2000, 9));
  const auto expired = table.TakeExpired(400);
  REQUIRE(expired.size() == 2);
  // Ordered by the expiration time of the chosen timer.
  CHECK(expired[0].pid == 21);
  CHECK(expired[0].scope_id == "other");
  CHECK(expired[0].signal == 15);
  CHECK(expired[1].pid == 20);
  CHECK(expired[1].scope_id == "early");
  CHECK(expired[1].expiration_time == 200);
  CHECK(expired[1].signal == 9);
  // Every timer of a returned pid went, its future ones too; other pids' stayed.
  CHECK(table.Size() == 1);
  CHECK(table.NextExpiration() == 2000);
}

TEST_CASE("a pid whose expired timers all have signal 0 is not signalled", "[file_timer]") {
  FileTimerTable table;
  table.Apply(Request(30, "quiet", 100, 0));
  table.Apply(Request(30, "armed later", 900, 9));
  CHECK(table.TakeExpired(100).empty());
  // The expired signal-0 timer went; the pid's unexpired timer stays armed.
  CHECK(table.Size() == 1);
  CHECK(table.NextExpiration() == 900);
  const auto expired = table.TakeExpired(900);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].scope_id == "armed later");
}

TEST_CASE("a forgotten pid's file timers go, other pids' stay", "[file_timer]") {
  FileTimerTable table;
  table.Apply(Request(40, "a", 100));
  table.Apply(Request(40, "b", 50));
  table.Apply(Request(41, "a", 200));
  table.ForgetPid(40);
  CHECK(table.Size() == 1);
  CHECK(table.NextExpiration() == 200);
  table.ForgetPid(99);
  CHECK(table.Size() == 1);
  table.Clear();
  CHECK(table.Size() == 0);
}

TEST_CASE("the next file timer expiration is the earliest armed", "[file_timer]") {
  FileTimerTable table;
  CHECK_FALSE(table.NextExpiration());
  table.Apply(Request(50, "a", 300));
  table.Apply(Request(51, "b", 120.25));
  table.Apply(Request(52, "c", 0));  // epoch 0 is armed (only negative releases)
  CHECK(table.NextExpiration() == 0);
  table.Apply(Request(52, "c", -0.5, 0));
  CHECK(table.NextExpiration() == 120.25);
  CHECK(table.TakeExpired(120.25).size() == 1);
  CHECK(table.NextExpiration() == 300);
}
