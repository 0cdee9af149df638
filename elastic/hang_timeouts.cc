#include "elastic/hang_timeouts.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/duration.h"

namespace ddprun::elastic {

std::chrono::milliseconds LearnedTimeout(const HangLearning& learning,
                                         std::chrono::milliseconds longest_interval) {
  const double scaled = std::ceil(learning.factor * static_cast<double>(longest_interval.count()));
  return std::max(learning.floor, std::chrono::milliseconds(static_cast<long long>(scaled)));
}

std::string DescribeHangTimeout(const HangTimeouts& timeouts) {
  if (!timeouts.On()) return "off";
  if (!timeouts.learn) return DurationText(timeouts.hang);
  std::ostringstream text;
  text << "auto (" << timeouts.learning.factor << " x the longest interval between signs of "
       << "progress, learned after " << timeouts.learning.warmup_intervals
       << " intervals of a rank, at least " << DurationText(timeouts.learning.floor) << ")";
  return text.str();
}

}  // namespace ddprun::elastic
