// Durations as people read them in messages: seconds with the unit, "1.5 s".
#pragma once
#include <chrono>
#include <string>

namespace ddprun {

// The seconds in `duration`, exact to the millisecond, without trailing zeros, and " s":
// 1500 ms -> "1.5 s", 100000 ms -> "100 s", 250 ms -> "0.25 s", -2000 ms -> "-2 s".
std::string DurationText(std::chrono::milliseconds duration);

// The seconds in `duration` rounded (half away from zero) to `decimals` places, 0 to 3 (clamped),
// zeros kept, and " s": (3000 ms, 1) -> "3.0 s", (100000 ms, 2) -> "100.00 s",
// (250 ms, 1) -> "0.3 s".
std::string DurationText(std::chrono::milliseconds duration, int decimals);

}  // namespace ddprun
