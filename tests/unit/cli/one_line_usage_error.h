// The message of the UsageError that `action` throws, checked to be one line; a test failure
// when it throws none.
#pragma once
#include <catch2/catch.hpp>
#include <string>

#include "common/errors.h"

namespace ddprun::cli::testing {

template <typename Action>
std::string OneLineUsageError(Action action) {
  try {
    action();
  } catch (const UsageError& error) {
    const std::string message = error.what();
    CHECK(message.find('\n') == std::string::npos);
    return message;
  }
  FAIL("no UsageError");
  return "";
}

}  // namespace ddprun::cli::testing
