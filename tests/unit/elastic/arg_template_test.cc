#include "elastic/arg_template.h"

#include <catch2/catch.hpp>

using ddprun::elastic::SafeSubstitute;

TEST_CASE("local_rank macro follows Python's Template.safe_substitute", "[elastic][template]") {
  const std::map<std::string, std::string> values{{"local_rank", "3"}};
  CHECK(SafeSubstitute("${local_rank}", values) == "3");
  CHECK(SafeSubstitute("x${local_rank}y", values) == "x3y");
  CHECK(SafeSubstitute("$local_rank", values) == "3");
  CHECK(SafeSubstitute("$local_rank.txt", values) == "3.txt");
  CHECK(SafeSubstitute("a$$b", values) == "a$b");
  CHECK(SafeSubstitute("$$local_rank", values) == "$local_rank");
  CHECK(SafeSubstitute("${rank}", values) == "${rank}");
  CHECK(SafeSubstitute("$HOME/x", values) == "$HOME/x");
  CHECK(SafeSubstitute("${local_rank", values) == "${local_rank");
  CHECK(SafeSubstitute("$", values) == "$");
  CHECK(SafeSubstitute("100$", values) == "100$");
  CHECK(SafeSubstitute("$1", values) == "$1");
  CHECK(SafeSubstitute("$local_ranks", values) == "$local_ranks");
}

TEST_CASE("prefix templates substitute several macros", "[elastic][template]") {
  CHECK(SafeSubstitute("[${role_name}${local_rank}]:",
                       {{"role_name", "trainer"}, {"local_rank", "0"}}) == "[trainer0]:");
  CHECK(SafeSubstitute("${hostname}:${rank}: ${pid}", {{"hostname", "h"}, {"rank", "7"}}) ==
        "h:7: ${pid}");
}
