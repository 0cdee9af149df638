// The hang detector's timeouts: one between a rank's signs of progress (--hang-timeout, fixed or
// learned with `auto`), one before its first sign (--hang-startup-timeout: importing torch,
// loading data, the first NCCL connection), and the rule that learns the first from what the
// ranks did (docs/hangs.md, "Timeouts").
#pragma once
#include <chrono>
#include <optional>
#include <string>

namespace ddprun::elastic {

// The start-up timeout when none is given (or the hang timeout, when that is longer): PyTorch's
// default collective timeout for NCCL and torchrun's default join timeout, so that a rank that
// gets nowhere is named before its peers give up on it, and a cold import of torch (seconds),
// a dataset load or a first NCCL connection at scale (minutes) are never taken for a hang.
inline constexpr std::chrono::milliseconds kDefaultStartupTimeout{600'000};

// --hang-timeout=auto: after `warmup_intervals` intervals between signs of progress of one
// rank, the timeout is `factor` x the longest interval seen on any rank, never below `floor`.
// Defaults: NVIDIA's resiliency extension's safety factor (5); 20 intervals; 30 s, above a
// garbage collection, a log rotation or a slow metrics write of a job whose steps are short.
struct HangLearning {
  double factor = 5.0;
  int warmup_intervals = 20;
  std::chrono::milliseconds floor{30'000};
};

struct HangTimeouts {
  // Between two signs of progress of a rank; 0 (with learn false): hang detection is off.
  std::chrono::milliseconds hang{0};
  bool learn = false;  // --hang-timeout=auto: `hang` is learned (HangLearning)
  // Before a rank's first sign of progress, and after it while the timeout is being learned.
  std::chrono::milliseconds startup = kDefaultStartupTimeout;
  HangLearning learning;

  bool On() const { return learn || hang.count() > 0; }
};

// max(floor, factor x longest), in whole milliseconds (rounded up).
std::chrono::milliseconds LearnedTimeout(const HangLearning& learning,
                                         std::chrono::milliseconds longest_interval);

// "3 s", "auto (5 x the longest interval after 20 per rank, at least 30 s)", "off": what
// --dry-run and the logs say of the hang timeout.
std::string DescribeHangTimeout(const HangTimeouts& timeouts);

}  // namespace ddprun::elastic
