#include "elastic/progress_watch.h"

#include <catch2/catch.hpp>

using namespace ddprun::elastic;
using std::chrono::milliseconds;

namespace {
ProgressWatch::TimePoint At(int ms) { return ProgressWatch::TimePoint{} + milliseconds(ms); }
}  // namespace

TEST_CASE("progress watch: nothing watched is never hung", "[progress_watch]") {
  ProgressWatch watch(milliseconds(1000));
  CHECK(watch.Timeout() == milliseconds(1000));
  CHECK_FALSE(watch.Hung(At(1'000'000)));
  CHECK_FALSE(watch.NextDeadline());
  watch.Start(0, At(0));
  CHECK_FALSE(watch.Hung(At(1'000'000)));
  CHECK_FALSE(watch.NextDeadline());
}

TEST_CASE("progress watch: every rank counts as progressing at the start", "[progress_watch]") {
  ProgressWatch watch(milliseconds(1000));
  watch.Start(3, At(500));
  CHECK(watch.NextDeadline() == At(1500));
  CHECK_FALSE(watch.Hung(At(1499)));
  const auto hung = watch.Hung(At(1500));  // exactly at the timeout: hung
  REQUIRE(hung);
  CHECK(hung->local_rank == 0);  // a tie: the lowest rank
  CHECK(hung->since == At(500));
  CHECK(hung->length == milliseconds(1000));
}

TEST_CASE("progress watch: a note restarts one rank's silence", "[progress_watch]") {
  ProgressWatch watch(milliseconds(1000));
  watch.Start(3, At(0));
  watch.Note(0, At(400));
  watch.Note(2, At(300));
  CHECK(watch.NextDeadline() == At(1000));  // rank 1, silent since the start
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
  ProgressWatch watch(milliseconds(100));
  watch.Start(2, At(0));
  watch.Note(-1, At(50));
  watch.Note(2, At(50));
  CHECK(watch.NextDeadline() == At(100));
  watch.Note(0, At(80));
  watch.Note(1, At(90));
  watch.Note(1, At(10));  // an older time does not move its progress back
  CHECK(watch.NextDeadline() == At(180));
}

TEST_CASE("progress watch: forgotten ranks are not watched", "[progress_watch]") {
  ProgressWatch watch(milliseconds(1000));
  watch.Start(2, At(0));
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

TEST_CASE("progress watch: a new start watches every rank again", "[progress_watch]") {
  ProgressWatch watch(milliseconds(1000));
  watch.Start(4, At(0));
  watch.Forget(3);
  watch.Start(2, At(5000));
  CHECK(watch.NextDeadline() == At(6000));
  watch.Note(3, At(5500));  // beyond the new world size: ignored
  const auto hung = watch.Hung(At(6000));
  REQUIRE(hung);
  CHECK(hung->local_rank == 0);
  CHECK(hung->since == At(5000));
}
