#include "elastic/stack_report.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

using namespace ddprun::elastic;

namespace {
// tests/unit/elastic/fixtures: faulthandler dumps captured from real processes (README.md there).
std::string FixturePath(const std::string& name) {
  return std::string(DDPRUN_ELASTIC_FIXTURES) + "/" + name;
}

std::string Fixture(const std::string& name) {
  std::ifstream in(FixturePath(name));
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The fixtures' script ran as /tmp/job/train.py; its text is fixtures/train.py.sample.
std::optional<std::string> TrainSource(const std::string& file, int line) {
  if (file != "/tmp/job/train.py") return std::nullopt;
  std::ifstream in(FixturePath("train.py.sample"));
  std::string text;
  for (int i = 0; i < line; ++i) {
    if (!std::getline(in, text)) return std::nullopt;
  }
  const auto first = text.find_first_not_of(' ');
  return first == std::string::npos ? "" : text.substr(first);
}

RankPlace PlaceOfFixture(int rank, const std::string& name) {
  return PlaceOf(rank, ParseFaulthandlerDump(Fixture(name)));
}

void CheckFrame(const std::optional<StackFrame>& frame, const std::string& file, int line,
                const std::string& function) {
  REQUIRE(frame);
  CHECK(frame->file == file);
  CHECK(frame->line == line);
  CHECK(frame->function == function);
}

constexpr const char* kTorch2C10d =
    "/root/.cache/ddprun/torch2-venv/lib/python3.11/site-packages/torch/distributed/";
}  // namespace

TEST_CASE("stack report: torch 1.13's gloo all_reduce dumps", "[stack_report]") {
  const auto threads = ParseFaulthandlerDump(Fixture("torch1_gloo_rank0.txt"));
  REQUIRE(threads.size() == 1);
  CHECK(threads[0].thread == "0x00007f3f50db6040");
  CHECK(threads[0].current);
  REQUIRE(threads[0].frames.size() == 4);
  CheckFrame(threads[0].frames[0],
             "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", 1541,
             "all_reduce");
  CheckFrame(threads[0].frames[3], "/tmp/job/train.py", 25, "<module>");

  const auto waiting = PlaceOf(0, threads);
  CHECK(waiting.rank == 0);
  CheckFrame(waiting.innermost,
             "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", 1541,
             "all_reduce");
  CheckFrame(waiting.user, "/tmp/job/train.py", 13, "step");
  CheckFrame(waiting.call, "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py",
             1541, "all_reduce");

  const auto stuck = PlaceOfFixture(1, "torch1_gloo_rank1.txt");
  CheckFrame(stuck.innermost, "/tmp/job/train.py", 12, "step");
  CheckFrame(stuck.user, "/tmp/job/train.py", 12, "step");
  CHECK_FALSE(stuck.call);

  const std::vector<RankPlace> places{waiting, stuck};
  CHECK(DescribePlaces(places, TrainSource) ==
        "rank 1 stuck at train.py:12 in step (time.sleep(600)); "
        "rank 0 waiting in all_reduce at train.py:13 (dist.all_reduce(tensor))");
  CHECK(OddRank(places) == 1);
}

TEST_CASE("stack report: torch 2's all_reduce is named through its logging wrapper",
          "[stack_report]") {
  const auto threads = ParseFaulthandlerDump(Fixture("torch2_gloo_rank0.txt"));
  REQUIRE(threads.size() == 1);
  REQUIRE(threads[0].frames.size() == 5);
  CheckFrame(threads[0].frames[1], std::string(kTorch2C10d) + "c10d_logger.py", 83, "wrapper");

  const auto waiting = PlaceOf(0, threads);
  CheckFrame(waiting.innermost, std::string(kTorch2C10d) + "distributed_c10d.py", 4181,
             "all_reduce");
  CheckFrame(waiting.user, "/tmp/job/train.py", 13, "step");
  CheckFrame(waiting.call, std::string(kTorch2C10d) + "distributed_c10d.py", 4181, "all_reduce");

  const auto stuck = PlaceOfFixture(1, "torch2_gloo_rank1.txt");
  CheckFrame(stuck.innermost, "/tmp/job/train.py", 12, "step");
  CHECK_FALSE(stuck.call);

  // Listed in any order, the odd rank is the one not in torch.distributed.
  const std::vector<RankPlace> places{stuck, waiting};
  CHECK(DescribePlaces(places, TrainSource) ==
        "rank 1 stuck at train.py:12 in step (time.sleep(600)); "
        "rank 0 waiting in all_reduce at train.py:13 (dist.all_reduce(tensor))");
  CHECK(DescribePlaces(places) ==
        "rank 1 stuck at train.py:12 in step; rank 0 waiting in all_reduce at train.py:13");
  CHECK(OddRank(places) == 1);
}

TEST_CASE("stack report: the smallest group is stuck, the others wait", "[stack_report]") {
  const auto waiting = Fixture("torch2_gloo_rank0.txt");
  const auto sleeping = Fixture("torch1_gloo_rank1.txt");
  std::vector<RankPlace> places{
      PlaceOf(3, ParseFaulthandlerDump(waiting)), PlaceOf(0, ParseFaulthandlerDump(waiting)),
      PlaceOf(2, ParseFaulthandlerDump(sleeping)), PlaceOf(1, ParseFaulthandlerDump(waiting))};
  CHECK(DescribePlaces(places, TrainSource) ==
        "rank 2 stuck at train.py:12 in step (time.sleep(600)); "
        "ranks 0, 1, 3 waiting in all_reduce at train.py:13 (dist.all_reduce(tensor))");
  CHECK(OddRank(places) == 2);

  places.push_back(PlaceOf(4, {}));
  places.push_back(PlaceOf(5, ParseFaulthandlerDump(sleeping)));
  CHECK(DescribePlaces(places) ==
        "ranks 2, 5 stuck at train.py:12 in step; "
        "ranks 0, 1, 3 waiting in all_reduce at train.py:13; rank 4: no Python stack");
  CHECK_FALSE(OddRank(places));  // two ranks stuck: no single odd one
}

TEST_CASE("stack report: one group, or none with a stack", "[stack_report]") {
  const auto waiting = ParseFaulthandlerDump(Fixture("torch1_gloo_rank0.txt"));
  const std::vector<RankPlace> same{PlaceOf(1, waiting), PlaceOf(0, waiting)};
  CHECK(DescribePlaces(same, TrainSource) ==
        "ranks 0, 1 in all_reduce at train.py:13 (dist.all_reduce(tensor))");
  CHECK_FALSE(OddRank(same));
  const std::vector<RankPlace> alone{PlaceOf(0, waiting), PlaceOf(1, {})};
  CHECK(DescribePlaces(alone) == "rank 0 in all_reduce at train.py:13; rank 1: no Python stack");
  CHECK_FALSE(OddRank(alone));
  CHECK(DescribePlaces({PlaceOf(2, {}), PlaceOf(0, {})}) == "ranks 0, 2: no Python stack");
  CHECK(DescribePlaces({}).empty());
  CHECK_FALSE(OddRank({}));
  // A source without the line: no parentheses.
  const auto none = [](const std::string&, int) -> std::optional<std::string> { return {}; };
  CHECK(DescribePlaces({PlaceOf(0, waiting)}, none) == "rank 0 in all_reduce at train.py:13");
}

TEST_CASE("stack report: of many threads the one running <module> is the rank's",
          "[stack_report]") {
  const auto threads = ParseFaulthandlerDump(Fixture("threads_sleep.txt"));
  REQUIRE(threads.size() == 3);
  CHECK(threads[0].thread == "0x00007f4c112a96c0");
  CHECK_FALSE(threads[0].current);
  CHECK(threads[1].thread == "0x00007f4c11aaa6c0");
  CHECK(threads[2].current);
  REQUIRE(threads[0].frames.size() == 4);
  CheckFrame(threads[0].frames[0], "/tmp/policy_samples/threads.py", 4, "worker");
  CheckFrame(threads[0].frames[3], "/usr/lib/python3.11/threading.py", 995, "_bootstrap");
  CHECK(MainThread(threads) == &threads[2]);
  const auto place = PlaceOf(0, threads);
  CheckFrame(place.innermost, "/tmp/policy_samples/threads.py", 7, "step");
  CHECK(DescribePlaces({place}) == "rank 0 at threads.py:7 in step");

  // The signal hit another thread: the main thread is still the one that runs <module>.
  auto moved = threads;
  moved[2].current = false;
  moved[0].current = true;
  CHECK(MainThread(moved) == &moved[2]);
  // Without a <module> frame: the current thread, else the first.
  moved[2].frames.pop_back();
  CHECK(MainThread(moved) == &moved[0]);
  moved[0].current = false;
  CHECK(MainThread(moved) == &moved[0]);
  CHECK(MainThread({}) == nullptr);
}

TEST_CASE("stack report: a thread without Python frames gives no place", "[stack_report]") {
  const auto threads = ParseFaulthandlerDump(
      "Fatal Python error: Aborted\n\n"
      "Current thread 0x00007f0000000001 (most recent call first):\n"
      "  <no Python frame>\n");
  REQUIRE(threads.size() == 1);
  CHECK(threads[0].current);
  CHECK(threads[0].frames.empty());
  const auto place = PlaceOf(3, threads);
  CHECK(place.rank == 3);
  CHECK_FALSE(place.innermost);
  CHECK_FALSE(place.user);
  CHECK(DescribePlaces({place}) == "rank 3: no Python stack");
}

TEST_CASE("stack report: text without a dump gives no threads", "[stack_report]") {
  CHECK(ParseFaulthandlerDump("").empty());
  // A Python traceback is not a faulthandler dump.
  CHECK(ParseFaulthandlerDump("Traceback (most recent call last):\n"
                              "  File \"/tmp/job/train.py\", line 25, in <module>\n"
                              "    main()\n"
                              "RuntimeError: boom\n")
            .empty());
  CHECK(ParseFaulthandlerDump("  File \"/tmp/job/train.py\", line 25 in <module>\n").empty());
}

TEST_CASE("stack report: output before and after the dump is ignored", "[stack_report]") {
  const auto text = "epoch 1 loss 0.25\nwarning: something\r\n\n" +
                    Fixture("torch1_gloo_rank0.txt") +
                    "  File \"/tmp/not/a/frame.py\", line 1 in after\n";
  const auto threads = ParseFaulthandlerDump(text);
  REQUIRE(threads.size() == 1);
  REQUIRE(threads[0].frames.size() == 4);
  CHECK(threads[0].frames[0].function == "all_reduce");
  CHECK(threads[0].frames[3].function == "<module>");
}

TEST_CASE("stack report: of two dumps the last wins", "[stack_report]") {
  const auto threads = ParseFaulthandlerDump(Fixture("threads_sleep.txt") + "more output\n" +
                                             Fixture("torch2_gloo_rank0.txt"));
  REQUIRE(threads.size() == 1);
  CHECK(threads[0].thread == "0x00007f13ddfdbb80");
  CHECK(threads[0].frames.size() == 5);

  // dump_traceback_later's repeated dumps, and dumps back to back: a thread seen again starts
  // the next one.
  const std::string block =
      "Thread 0x00000000000000aa (most recent call first):\n"
      "  File \"/tmp/job/train.py\", line 12 in step\n";
  const auto repeated =
      ParseFaulthandlerDump("Timeout (0:00:05)!\n" + block + "Timeout (0:00:05)!\n" + block +
                            "Current thread 0x00000000000000bb (most recent call first):\n"
                            "  File \"/tmp/job/train.py\", line 13 in step\n" +
                            block);
  REQUIRE(repeated.size() == 1);
  CHECK(repeated[0].thread == "0x00000000000000aa");
  // A dump of the current thread alone ("Stack"), after a full one.
  const auto single = ParseFaulthandlerDump(
      Fixture("threads_sleep.txt") +
      "Stack (most recent call first):\n  File \"/tmp/x.py\", line 3 in <module>\n");
  REQUIRE(single.size() == 1);
  CHECK(single[0].thread.empty());
  CHECK(single[0].current);
  CheckFrame(single[0].frames.at(0), "/tmp/x.py", 3, "<module>");
}

TEST_CASE("stack report: library frames and the call the script made", "[stack_report]") {
  CHECK(IsLibraryFile("/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py"));
  CHECK(IsLibraryFile("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py"));
  CHECK(IsLibraryFile("/usr/lib/python3.11/threading.py"));
  CHECK(IsLibraryFile("<frozen importlib._bootstrap>"));
  CHECK_FALSE(IsLibraryFile("/tmp/job/train.py"));
  CHECK_FALSE(IsLibraryFile("train.py"));

  // torch 2's init_process_group under two decorators, blocked in an internal helper.
  const std::string c10d = std::string(kTorch2C10d) + "distributed_c10d.py";
  const std::string logger = std::string(kTorch2C10d) + "c10d_logger.py";
  ThreadStack thread;
  thread.current = true;
  thread.frames = {{c10d, 900, "_store_based_barrier"},
                   {c10d, 1500, "init_process_group"},
                   {logger, 95, "wrapper"},
                   {logger, 83, "wrapper"},
                   {"/tmp/job/train.py", 18, "main"},
                   {"/tmp/job/train.py", 25, "<module>"}};
  auto place = PlaceOf(0, {thread});
  CheckFrame(place.innermost, c10d, 900, "_store_based_barrier");
  CheckFrame(place.user, "/tmp/job/train.py", 18, "main");
  CheckFrame(place.call, c10d, 1500, "init_process_group");
  CHECK(DescribePlaces({place}, TrainSource) ==
        "rank 0 in init_process_group at train.py:18 (dist.init_process_group(\"gloo\"))");

  // Only machinery inside the user frame: the frame just inside it.
  thread.frames.erase(thread.frames.begin(), thread.frames.begin() + 2);
  place = PlaceOf(0, {thread});
  CheckFrame(place.call, logger, 83, "wrapper");

  // Every frame library code (python -m): the innermost frame, no user frame.
  thread.frames = {{c10d, 900, "_store_based_barrier"},
                   {"/usr/lib/python3.11/runpy.py", 88, "_run_code"}};
  place = PlaceOf(1, {thread});
  CHECK_FALSE(place.user);
  CHECK_FALSE(place.call);
  CHECK(DescribePlaces({place}, TrainSource) ==
        "rank 1 in _store_based_barrier at distributed_c10d.py:900");
}
