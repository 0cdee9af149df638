#include "common/open_files.h"

#include <sys/resource.h>

#include <catch2/catch.hpp>

using namespace ddprun;
using Catch::Matchers::Contains;

TEST_CASE("the open-file limit is raised to the hard limit, the original kept for children",
          "[common][open_files]") {
  rlimit before{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &before) == 0);
  const OpenFileLimit now = RaiseOpenFileLimit();
  CHECK(now.soft == now.hard);
  CHECK(now.hard == before.rlim_max);
  REQUIRE(OriginalOpenFileLimit() != nullptr);
  CHECK(OriginalOpenFileLimit()->rlim_max == before.rlim_max);
  CHECK(RaiseOpenFileLimit().soft == now.soft);  // idempotent
}

TEST_CASE("a connection count beyond the limit is one line naming the flag and the fix",
          "[common][open_files]") {
  CHECK_FALSE(
      ConnectionShortfall("--max-connections=900", 900, {1024, 4096}, "lower --max-connections"));
  const auto line = ConnectionShortfall("--max-connections=16384", 16384, {1024, 4096},
                                        "lower --max-connections");
  REQUIRE(line);
  CHECK(*line ==
        "--max-connections=16384 needs about 16448 open files, but the limit is 1024 "
        "(hard limit 4096), so not every connection can be served: raise the hard limit "
        "(ulimit -Hn, systemd LimitNOFILE=, /etc/security/limits.conf) or lower "
        "--max-connections");
  CHECK(line->find('\n') == std::string::npos);
}
