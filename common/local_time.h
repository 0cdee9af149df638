// Wall-clock times as people read them in this machine's time zone, one helper for every
// format the launcher prints ("12:03:04", torchrun's "2026-11-27_12:03:04").
#pragma once
#include <chrono>
#include <string>

namespace ddprun {

// `time` in local time through strftime's `format` (at most 63 characters of output).
std::string LocalTimeText(std::chrono::system_clock::time_point time, const char* format);

}  // namespace ddprun
