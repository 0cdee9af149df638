// Hang detection's options: --hang-timeout (SECONDS or auto), the start-up timeout, the learning
// of `auto` and the stop after hangs before progress. An option that only means something with
// hang detection (or a learned timeout) is refused without it rather than ignored.
#include <algorithm>
#include <climits>
#include <cmath>

#include "cli/cli_internal.h"
#include "common/errors.h"

namespace ddprun::cli {
namespace {

using elastic::LaunchConfig;
using std::chrono::milliseconds;

milliseconds PositiveSeconds(const std::string& text, const std::string& name) {
  if (text == "auto") {
    throw UsageError(name +
                     "=auto: must be a number of seconds > 0 (only --hang-timeout learns "
                     "its value: --hang-timeout=auto)");
  }
  const double seconds = ParsePositiveSeconds(text, name);
  if (seconds > 1e9) throw UsageError(name + "=" + text + ": must be at most 1e9 seconds");
  return milliseconds(std::max<long long>(1, std::llround(seconds * 1000)));
}

void RequireHangDetection(const LaunchConfig& config, const std::string& text,
                          const std::string& name) {
  if (config.hang.On()) return;
  throw UsageError(name + "=" + text +
                   ": applies only with hang detection, which is off; add "
                   "--hang-timeout=SECONDS or --hang-timeout=auto, or drop " +
                   name);
}

void RequireLearning(const LaunchConfig& config, const std::string& text, const std::string& name) {
  if (config.hang.learn) return;
  throw UsageError(name + "=" + text +
                   ": applies only to a learned hang timeout; add "
                   "--hang-timeout=auto, or drop " +
                   name);
}

double Factor(const std::string& text, const std::string& name) {
  const double factor = text == "auto" ? 0.0 : ParsePositiveSeconds(text, name);
  if (!(factor >= 1.0) || factor > 1000.0) {
    throw UsageError(name + "=" + text +
                     ": must be a number between 1 and 1000 (the learned "
                     "timeout is this many times the longest interval seen; default 5)");
  }
  return factor;
}

void FillLearning(const RawValues& raw, LaunchConfig& config) {
  elastic::HangLearning& learning = config.hang.learning;
  IfGiven(raw, "hang_timeout_factor", [&](const std::string& text, const std::string& name) {
    RequireLearning(config, text, name);
    learning.factor = Factor(text, name);
  });
  IfGiven(raw, "hang_timeout_warmup", [&](const std::string& text, const std::string& name) {
    RequireLearning(config, text, name);
    learning.warmup_intervals = ParseIntInRange(text, name, 1, 1'000'000, "an integer >= 1");
  });
  IfGiven(raw, "hang_timeout_floor", [&](const std::string& text, const std::string& name) {
    RequireLearning(config, text, name);
    learning.floor = PositiveSeconds(text, name);
  });
}

}  // namespace

void FillHangDetection(const RawValues& raw, LaunchConfig& config) {
  elastic::HangTimeouts& hang = config.hang;
  IfGiven(raw, "hang_timeout", [&](const std::string& text, const std::string& name) {
    hang.learn = text == "auto";
    hang.hang = hang.learn ? milliseconds{0} : ParseSecondsOrOff(text, name, "hang detection");
  });
  hang.startup = std::max(elastic::kDefaultStartupTimeout, hang.hang);
  IfGiven(raw, "hang_startup_timeout", [&](const std::string& text, const std::string& name) {
    RequireHangDetection(config, text, name);
    hang.startup = PositiveSeconds(text, name);
  });
  FillLearning(raw, config);
  IfGiven(raw, "max_no_progress_hangs", [&](const std::string& text, const std::string& name) {
    config.max_no_progress_hangs = ParseIntInRange(text, name, 0, INT_MAX, "an integer >= 0");
  });
}

}  // namespace ddprun::cli
