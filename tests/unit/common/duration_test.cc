#include "common/duration.h"

#include <catch2/catch.hpp>

using ddprun::DurationText;
using std::chrono::milliseconds;

TEST_CASE("DurationText: the seconds exact to the millisecond, no trailing zeros", "[duration]") {
  CHECK(DurationText(milliseconds{1500}) == "1.5 s");  // static rendezvous printed "1 s"
  CHECK(DurationText(milliseconds{100'000}) == "100 s");
  CHECK(DurationText(milliseconds{250}) == "0.25 s");
  CHECK(DurationText(milliseconds{1}) == "0.001 s");
  CHECK(DurationText(milliseconds{0}) == "0 s");
  CHECK(DurationText(milliseconds{600'000}) == "600 s");
  CHECK(DurationText(milliseconds{-2000}) == "-2 s");
  CHECK(DurationText(milliseconds{-1250}) == "-1.25 s");
}

TEST_CASE("DurationText with decimals: rounded, zeros kept", "[duration]") {
  CHECK(DurationText(milliseconds{100'000}, 2) == "100.00 s");  // the etcd client printed "100. s"
  CHECK(DurationText(milliseconds{1000}, 2) == "1.00 s");
  CHECK(DurationText(milliseconds{3000}, 1) == "3.0 s");
  CHECK(DurationText(milliseconds{15'000}, 1) == "15.0 s");
  CHECK(DurationText(milliseconds{1500}, 1) == "1.5 s");
  CHECK(DurationText(milliseconds{250}, 1) == "0.3 s");
  CHECK(DurationText(milliseconds{249}, 1) == "0.2 s");
  CHECK(DurationText(milliseconds{1999}, 2) == "2.00 s");
  CHECK(DurationText(milliseconds{1500}, 0) == "2 s");
  CHECK(DurationText(milliseconds{1234}, 3) == "1.234 s");
  CHECK(DurationText(milliseconds{-2960}, 1) == "-3.0 s");
  CHECK(DurationText(milliseconds{1234}, 7) == "1.234 s");  // clamped to 3
  CHECK(DurationText(milliseconds{1234}, -1) == "1 s");     // clamped to 0
}
