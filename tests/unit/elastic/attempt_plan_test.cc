#include "elastic/attempt_plan.h"

#include <catch2/catch.hpp>

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

TEST_CASE("redirects send streams to files, tee also to the console with a prefix",
          "[elastic][logs]") {
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

TEST_CASE("stderr is always watched, stdout only with hang detection", "[elastic][logs][hang]") {
  auto spec = Spec();
  spec.redirects.per_rank = {{1, StreamSelection::kStdout | StreamSelection::kStderr}};
  const auto off = PlanAttempt(spec, Group());
  CHECK_FALSE(off.hang.On());
  for (const auto& worker : off.workers) {
    INFO(worker.local_rank);
    CHECK(worker.err.watched);
    CHECK_FALSE(worker.out.watched);
    CHECK(worker.pulse_file.empty());
    CHECK(worker.env.count("DDPRUN_PULSE_FILE") == 0);
  }
  spec.hang.hang = std::chrono::seconds(30);
  spec.hang.startup = std::chrono::seconds(45);
  const auto on = PlanAttempt(spec, Group());
  CHECK(on.hang.hang == std::chrono::seconds(30));
  CHECK(on.hang.startup == std::chrono::seconds(45));
  for (const auto& worker : on.workers) {
    INFO(worker.local_rank);
    CHECK(worker.out.watched);
    CHECK(worker.err.watched);
  }
  // Redirected to files only: still watched (the launcher copies the stream to its file).
  CHECK(on.workers[1].out.file == "/l/run/attempt_2/1/stdout.log");
  CHECK_FALSE(on.workers[1].out.to_console);
}

TEST_CASE("per-rank files: pulse with hang detection, stacks always", "[elastic][logs][hang]") {
  auto spec = Spec();
  CHECK(PlanAttempt(spec, Group()).workers[2].stacks_file == "/l/run/attempt_2/2/stacks.log");
  spec.hang.learn = true;  // learned: on too
  const auto attempt = PlanAttempt(spec, Group());
  const auto& worker = attempt.workers[2];
  CHECK(worker.pulse_file == "/l/run/attempt_2/2/pulse");
  CHECK(worker.stacks_file == "/l/run/attempt_2/2/stacks.log");
  CHECK(worker.env.at("DDPRUN_PULSE_FILE") == "/l/run/attempt_2/2/pulse");
  CHECK(worker.env.at("TORCH_FR_DUMP_TEMP_FILE") == "/l/run/attempt_2/2/nccl_trace_rank_");
  CHECK(worker.env.at("PYTHONFAULTHANDLER") == "1");
  spec.run_log_dir.clear();
  const auto no_files = PlanAttempt(spec, Group());
  CHECK(no_files.workers[2].pulse_file.empty());
  CHECK(no_files.workers[2].stacks_file.empty());
  CHECK(no_files.workers[2].out.watched);
  CHECK(no_files.workers[2].env.count("DDPRUN_PULSE_FILE") == 0);
  CHECK(no_files.workers[2].env.count("TORCH_NCCL_DEBUG_INFO_TEMP_FILE") == 0);
}

TEST_CASE("the file timer reaches the attempt and every worker", "[elastic][hang]") {
  auto spec = Spec();
  CHECK(PlanAttempt(spec, Group()).timer_file.empty());
  CHECK(PlanAttempt(spec, Group()).workers[0].env.count("TORCHELASTIC_TIMER_FILE") == 0);
  spec.timer_file = "/tmp/ddprun-timer-ab";
  const auto attempt = PlanAttempt(spec, Group());
  CHECK(attempt.timer_file == "/tmp/ddprun-timer-ab");
  for (const auto& worker : attempt.workers) {
    CHECK(worker.env.at("TORCHELASTIC_TIMER_FILE") == "/tmp/ddprun-timer-ab");
  }
}

TEST_CASE("warm restart: each worker's entry point and sys.argv, ${local_rank} substituted",
          "[elastic][warm]") {
  auto spec = Spec();
  spec.command = {"python3", "-u", "train.py", "--local-rank=${local_rank}", "x"};
  CHECK_FALSE(PlanAttempt(spec, Group()).workers[1].warm);
  spec.warm = WorkerSpec::WarmStart{2, false};
  const auto attempt = PlanAttempt(spec, Group());
  const auto& worker = attempt.workers[1];
  REQUIRE(worker.warm);
  CHECK_FALSE(worker.warm->module);
  CHECK(worker.warm->target == "train.py");
  CHECK(worker.warm->argv == std::vector<std::string>{"train.py", "--local-rank=1", "x"});
  spec.command = {"python3", "-u", "-m", "pkg.train"};
  spec.warm = WorkerSpec::WarmStart{3, true};
  const auto module_attempt = PlanAttempt(spec, Group());
  const auto& module = module_attempt.workers[0];
  REQUIRE(module.warm);
  CHECK(module.warm->module);
  CHECK(module.warm->argv == std::vector<std::string>{"pkg.train"});
  spec.warm = WorkerSpec::WarmStart{9, false};  // past the command: no entry, exec'd
  CHECK_FALSE(PlanAttempt(spec, Group()).workers[0].warm);
}
