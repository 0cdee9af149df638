#include "common/integer.h"

#include <catch2/catch.hpp>
#include <limits>

using ddprun::NotAnInteger;
using ddprun::ParseInt;

TEST_CASE("ParseInt: an optional sign, then decimal digits, nothing else", "[integer]") {
  CHECK(ParseInt("42") == 42);
  CHECK(ParseInt("-7") == -7);
  CHECK(ParseInt("+7") == 7);
  CHECK(ParseInt("007") == 7);
  CHECK(ParseInt("9223372036854775807") == 9223372036854775807LL);
  CHECK(ParseInt("-9223372036854775808") == std::numeric_limits<long long>::min());
  for (const char* text : {"", "+", "-", "four", "4 ", " 4", "4x", "0x10", "+-4", "-+4", "++4",
                           "1e3", "4.0", "9223372036854775808"}) {
    INFO(text);
    CHECK_FALSE(ParseInt(text));
  }
}

TEST_CASE("NotAnInteger: the one wording", "[integer]") {
  CHECK(NotAnInteger("four") == "'four' is not an integer");
  CHECK("WORLD_SIZE=" + NotAnInteger("four") == "WORLD_SIZE='four' is not an integer");
}
