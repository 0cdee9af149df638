#include "elastic/progress_watch.h"

#include <catch2/catch.hpp>

using namespace ddprun::elastic;
using Catch::Matchers::Contains;
using std::chrono::milliseconds;

namespace {

ProgressWatch::TimePoint At(int ms) { return ProgressWatch::TimePoint{} + milliseconds(ms); }

// A fixed hang timeout of `hang` ms after the first progress, `startup` ms before it.
HangTimeouts Fixed(int hang, int startup) {
  HangTimeouts timeouts;
  timeouts.hang = milliseconds(hang);
  timeouts.startup = milliseconds(startup);
  return timeouts;
}

// --hang-timeout=auto: factor 5, a warm-up of `warmup` intervals, a floor of `floor` ms.
HangTimeouts Learned(int warmup, int floor, int startup = 60'000) {
  HangTimeouts timeouts;
  timeouts.learn = true;
  timeouts.startup = milliseconds(startup);
  timeouts.learning.factor = 5;
  timeouts.learning.warmup_intervals = warmup;
  timeouts.learning.floor = milliseconds(floor);
  return timeouts;
}

// Every rank shows its first progress at `at` (start-up over).
void FirstProgress(ProgressWatch& watch, int ranks, int at) {
  for (int rank = 0; rank < ranks; ++rank) watch.Note(rank, At(at));
}

}  // namespace

TEST_CASE("progress watch: nothing watched is never hung", "[progress_watch]") {
  ProgressWatch watch(Fixed(1000, 5000));
  CHECK(watch.HangTimeout() == milliseconds(1000));
  CHECK(watch.StartupTimeout() == milliseconds(5000));
  CHECK_FALSE(watch.Hung(At(1'000'000)));
  CHECK_FALSE(watch.NextDeadline());
  watch.Start(0, At(0));
  CHECK_FALSE(watch.Hung(At(1'000'000)));
  CHECK_FALSE(watch.NextDeadline());
}

TEST_CASE("progress watch: before its first progress a rank has the start-up timeout",
          "[progress_watch]") {
  ProgressWatch watch(Fixed(1000, 5000));
  watch.Start(3, At(500));
  CHECK(watch.NextDeadline() == At(5500));
  CHECK_FALSE(watch.Hung(At(1500)));  // the hang timeout does not apply yet
  CHECK_FALSE(watch.Hung(At(5499)));
  const auto hung = watch.Hung(At(5500));  // exactly at the timeout: hung
  REQUIRE(hung);
  CHECK(hung->local_rank == 0);  // a tie: the lowest rank
  CHECK(hung->startup);
  CHECK_FALSE(hung->last);
  CHECK(hung->since == At(500));
  CHECK(hung->length == milliseconds(5000));
  CHECK(hung->timeout == milliseconds(5000));
  CHECK_THAT(watch.Cause(*hung, {}),
             Contains("no first progress within the start-up timeout of 5 s"));
}

TEST_CASE("progress watch: the first progress ends start-up, then the hang timeout runs",
          "[progress_watch]") {
  ProgressWatch watch(Fixed(1000, 5000));
  watch.Start(2, At(0));
  watch.Note(1, At(3000), ProgressKind::kPulse);  // a slow import: 3 s before the first line
  CHECK(watch.NextDeadline() == At(4000));        // rank 1 now has the hang timeout
  CHECK_FALSE(watch.Hung(At(3999)));
  auto hung = watch.Hung(At(4000));
  REQUIRE(hung);
  CHECK(hung->local_rank == 1);
  CHECK_FALSE(hung->startup);
  CHECK(hung->last == ProgressKind::kPulse);
  CHECK(hung->timeout == milliseconds(1000));
  CHECK_THAT(watch.Cause(*hung, {}), Contains("no progress for 1.0 s after its last pulse at"));
  CHECK_THAT(watch.Cause(*hung, {}), Contains("(the hang timeout is 1 s)"));
  watch.Note(1, At(4000));
  CHECK(watch.NextDeadline() == At(5000));  // rank 0, still in start-up
  hung = watch.Hung(At(5000));
  REQUIRE(hung);
  CHECK(hung->local_rank == 0);
  CHECK(hung->startup);
}

TEST_CASE("progress watch: a note restarts one rank's silence", "[progress_watch]") {
  ProgressWatch watch(Fixed(1000, 1000));
  watch.Start(3, At(0));
  FirstProgress(watch, 3, 0);
  watch.Note(0, At(400));
  watch.Note(2, At(300));
  CHECK(watch.NextDeadline() == At(1000));  // rank 1, silent since its first progress
  auto hung = watch.Hung(At(1000));
  REQUIRE(hung);
  CHECK(hung->local_rank == 1);
  watch.Note(1, At(1000));
  CHECK_FALSE(watch.Hung(At(1000)));
  CHECK(watch.NextDeadline() == At(1300));  // now rank 2
  CHECK_FALSE(watch.Hung(At(1299)));
  hung = watch.Hung(At(1750));
  REQUIRE(hung);
  CHECK(hung->local_rank == 2);  // the longest silent, though rank 0 reached the timeout too
  CHECK(hung->since == At(300));
  CHECK(hung->length == milliseconds(1450));
}

TEST_CASE("progress watch: notes out of range or out of order change nothing", "[progress_watch]") {
  ProgressWatch watch(Fixed(100, 100));
  watch.Start(2, At(0));
  FirstProgress(watch, 2, 0);
  watch.Note(-1, At(50));
  watch.Note(2, At(50));
  CHECK(watch.NextDeadline() == At(100));
  watch.Note(0, At(80));
  watch.Note(1, At(90));
  watch.Note(1, At(10));  // an older time does not move its progress back
  CHECK(watch.NextDeadline() == At(180));
}

TEST_CASE("progress watch: forgotten ranks are not watched", "[progress_watch]") {
  ProgressWatch watch(Fixed(1000, 1000));
  watch.Start(2, At(0));
  FirstProgress(watch, 2, 0);
  watch.Note(1, At(600));
  watch.Forget(0);
  CHECK(watch.NextDeadline() == At(1600));
  CHECK_FALSE(watch.Hung(At(1599)));
  watch.Note(0, At(2000));  // not watched any more: ignored
  CHECK(watch.NextDeadline() == At(1600));
  REQUIRE(watch.Hung(At(1600)));
  CHECK(watch.Hung(At(1600))->local_rank == 1);
  watch.Forget(1);
  watch.Forget(7);
  CHECK_FALSE(watch.Hung(At(100'000)));
  CHECK_FALSE(watch.NextDeadline());
}

TEST_CASE("progress watch: a new start puts every rank in start-up again", "[progress_watch]") {
  ProgressWatch watch(Fixed(1000, 3000));
  watch.Start(4, At(0));
  FirstProgress(watch, 4, 0);
  watch.Note(0, At(2000));
  CHECK(watch.ProgressedPastStartup());
  watch.Forget(3);
  watch.Start(2, At(5000));
  CHECK_FALSE(watch.ProgressedPastStartup());
  CHECK(watch.NextDeadline() == At(8000));
  watch.Note(3, At(5500));  // beyond the new world size: ignored
  const auto hung = watch.Hung(At(8000));
  REQUIRE(hung);
  CHECK(hung->local_rank == 0);
  CHECK(hung->startup);
  CHECK(hung->since == At(5000));
}

TEST_CASE("progress watch: progress past start-up is progress after the first sign's window",
          "[progress_watch]") {
  ProgressWatch watch(Fixed(5000, 5000));
  watch.Start(2, At(0));
  watch.Note(0, At(2000));  // the first sign
  watch.Note(0, At(2500));  // written in pieces: still the first sign
  watch.Note(0, At(3000));  // exactly the window: still
  CHECK_FALSE(watch.ProgressedPastStartup());
  watch.Forget(0);
  watch.Note(1, At(3000));
  watch.Note(1, At(4001));  // past the window
  CHECK(watch.ProgressedPastStartup());
  watch.Forget(1);
  CHECK(watch.ProgressedPastStartup());  // forgetting a rank keeps what it did
}

TEST_CASE("progress watch: auto learns factor x the longest interval after the warm-up",
          "[progress_watch][learn]") {
  ProgressWatch watch(Learned(/*warmup=*/3, /*floor=*/1000, /*startup=*/60'000));
  CHECK_FALSE(watch.HangTimeout());
  watch.Start(2, At(0));
  watch.Note(0, At(10'000));  // start-up: 10 s, not an interval
  watch.Note(1, At(10'000));
  watch.Note(0, At(10'400));
  watch.Note(0, At(11'000));         // 600 ms: the longest
  CHECK_FALSE(watch.HangTimeout());  // rank 0: 2 intervals of 3
  // While learning, a rank past its first progress has the start-up timeout.
  CHECK(watch.NextDeadline() == At(70'000));
  auto hung = watch.Hung(At(70'000));
  REQUIRE(hung);
  CHECK(hung->local_rank == 1);
  CHECK(hung->learning);
  CHECK(hung->timeout == milliseconds(60'000));
  CHECK_THAT(watch.Cause(*hung, {}), Contains("still being learned"));
  watch.Note(0, At(11'500));  // the third interval: learned, 5 x 600 ms
  REQUIRE(watch.HangTimeout());
  CHECK(*watch.HangTimeout() == milliseconds(3000));
  CHECK(watch.LongestInterval() == milliseconds(600));
  CHECK(watch.NextDeadline() == At(13'000));  // rank 1, last progress at 10 s, + 3 s
  hung = watch.Hung(At(13'000));
  REQUIRE(hung);
  CHECK(hung->local_rank == 1);
  CHECK_FALSE(hung->learning);
  CHECK(hung->timeout == milliseconds(3000));
  CHECK_THAT(watch.Cause(*hung, {}), Contains("the hang timeout is 3 s, learned: 5 x"));
  watch.Note(1, At(12'000));  // 2 s: raises it to 10 s
  CHECK(*watch.HangTimeout() == milliseconds(10'000));
  watch.Note(1, At(12'100));  // shorter ones never lower it
  CHECK(*watch.HangTimeout() == milliseconds(10'000));
}

TEST_CASE("progress watch: a learned timeout is never below the floor", "[progress_watch][learn]") {
  ProgressWatch watch(Learned(2, 2500));
  watch.Start(1, At(0));
  for (int ms : {0, 100, 200}) watch.Note(0, At(ms));
  REQUIRE(watch.HangTimeout());
  CHECK(*watch.HangTimeout() == milliseconds(2500));  // 5 x 100 ms is below the floor
}

TEST_CASE("progress watch: a timeout learned before applies from the first progress",
          "[progress_watch][learn]") {
  ProgressWatch watch(Learned(20, 1000, 60'000), milliseconds(4000));
  CHECK(watch.HangTimeout() == milliseconds(4000));
  watch.Start(1, At(0));
  CHECK(watch.NextDeadline() == At(60'000));  // start-up still has its own timeout
  watch.Note(0, At(5000));
  CHECK(watch.NextDeadline() == At(9000));
  watch.Note(0, At(6000));  // 1 s: 5 s > 4 s, raised at once (no warm-up once known)
  CHECK(watch.HangTimeout() == milliseconds(5000));
  ProgressWatch fixed(Fixed(1000, 2000), milliseconds(4000));  // ignored without auto
  CHECK(fixed.HangTimeout() == milliseconds(1000));
}

TEST_CASE("learned timeout and its description", "[progress_watch][learn]") {
  HangLearning learning;
  CHECK(learning.factor == 5.0);
  CHECK(learning.warmup_intervals == 20);
  CHECK(learning.floor == milliseconds(30'000));
  CHECK(LearnedTimeout(learning, milliseconds(7'001)) == milliseconds(35'005));
  CHECK(LearnedTimeout(learning, milliseconds(10)) == milliseconds(30'000));
  learning.factor = 2.5;
  learning.floor = milliseconds(1);
  CHECK(LearnedTimeout(learning, milliseconds(3)) == milliseconds(8));  // 7.5, rounded up
  HangTimeouts timeouts;
  CHECK(DescribeHangTimeout(timeouts) == "off");
  CHECK(timeouts.startup == kDefaultStartupTimeout);
  timeouts.hang = milliseconds(1500);
  CHECK(DescribeHangTimeout(timeouts) == "1.5 s");
  timeouts.learn = true;
  timeouts.learning = learning;
  CHECK(DescribeHangTimeout(timeouts) ==
        "auto (2.5 x the longest interval between signs of progress, learned after 20 "
        "intervals of a rank, at least 0.001 s)");
}
