#include <catch2/catch.hpp>

#include "elastic/attempt_plan.h"

using namespace ddprun::elastic;

namespace {
WorkerSpec Spec() {
  WorkerSpec spec;
  spec.local_world_size = 3;
  spec.command = {"train", "${local_rank}"};
  spec.run_log_dir = "/l/run";
  return spec;
}
WorkerGroupEnv Group() {
  WorkerGroupEnv group;
  group.local_world_size = 3;
  group.ranks = {0, 3, 0, 3};
  group.restart_count = 2;
  return group;
}
}  // namespace

TEST_CASE("default routing inherits the console and writes no files", "[elastic][logs]") {
  const auto attempt = PlanAttempt(Spec(), Group());
  CHECK(attempt.attempt_dir == "/l/run/attempt_2");
  const auto& worker = attempt.workers[1];
  CHECK(worker.argv == std::vector<std::string>{"train", "1"});
  CHECK(worker.out.file.empty());
  CHECK(worker.out.to_console);
  CHECK_FALSE(worker.out.prefixed);
  CHECK(worker.error_file == "/l/run/attempt_2/1/error.json");
  CHECK(worker.prefix == "[default1]:");
}

TEST_CASE("redirects send streams to files, tee also to the console with a prefix", "[elastic][logs]") {
  auto spec = Spec();
  spec.redirects.all = StreamSelection::kStdout;
  spec.tee.per_rank = {{2, StreamSelection::kStderr}};
  const auto attempt = PlanAttempt(spec, Group());
  const auto& first = attempt.workers[0];
  CHECK(first.out.file == "/l/run/attempt_2/0/stdout.log");
  CHECK_FALSE(first.out.to_console);
  CHECK(first.err.file.empty());
  CHECK(first.err.to_console);
  const auto& third = attempt.workers[2];
  CHECK(third.err.file == "/l/run/attempt_2/2/stderr.log");
  CHECK(third.err.prefixed);
  CHECK(third.err.to_console);
}

TEST_CASE("local_ranks_filter hides other ranks from the console only", "[elastic][logs]") {
  auto spec = Spec();
  spec.tee.all = StreamSelection::kStdout | StreamSelection::kStderr;
  spec.local_ranks_filter = {0};
  const auto attempt = PlanAttempt(spec, Group());
  CHECK(attempt.workers[0].out.to_console);
  CHECK_FALSE(attempt.workers[1].out.to_console);
  CHECK(attempt.workers[1].out.file == "/l/run/attempt_2/1/stdout.log");

  spec.tee = {};
  const auto plain = PlanAttempt(spec, Group());
  CHECK_FALSE(plain.workers[1].out.to_console);  // unredirected and filtered out: dropped
  CHECK(plain.workers[1].out.file.empty());
}
