// torchelastic's file timer, the policy half (the FIFO itself is served in launcher/process):
// the request lines FileTimerClient writes, and the table of armed timers that decides which
// worker to signal when. Wire format (torch/distributed/elastic/timer/file_based_local_timer.py):
//   {"version": 1, "pid": <int>, "scope_id": "<str>", "expiration_time": <epoch s>, "signal":
//   <int>}
// A release is the same line with expiration_time -1 (any negative value) and signal 0.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddprun::elastic {

// torch's clients write at most PIPE_BUF bytes per request (one atomic write).
inline constexpr std::size_t kMaxTimerRequestBytes = 4096;

struct TimerRequest {
  int version = 1;
  pid_t pid = 0;
  std::string scope_id;
  double expiration_time = 0;  // epoch seconds; negative: release the scope
  int signal = 0;
};

// Parses one line (without its '\n'). nullopt, with `error` set to one line naming what is
// wrong, for anything but a version-1 request of a positive pid: bad JSON, missing or mistyped
// fields, a line over kMaxTimerRequestBytes, a signal outside 0..64.
std::optional<TimerRequest> ParseTimerRequest(std::string_view line, std::string* error);

// A timer that expired, as the server acts on it.
struct TimerExpiry {
  pid_t pid = 0;
  std::string scope_id;
  double expiration_time = 0;
  int signal = 0;  // > 0
};

// Armed timers keyed by (pid, scope_id), as FileTimerServer keeps them.
class FileTimerTable {
 public:
  // Arms (or re-arms) a scope; a negative expiration releases it.
  void Apply(const TimerRequest& request);
  // Timers with expiration_time <= now. For each pid that has one: the earliest expired timer
  // with a positive signal (torch's rule; a pid whose expired timers all have signal 0 is not
  // signalled). Every timer of a returned pid and every expired timer is removed. Ordered by
  // expiration time.
  std::vector<TimerExpiry> TakeExpired(double now_epoch_s);
  // The earliest armed expiration; nullopt when nothing is armed.
  std::optional<double> NextExpiration() const;
  // A worker that exited: its timers go (torch clears timers of pids that no longer exist).
  void ForgetPid(pid_t pid);
  void Clear() { timers_.clear(); }
  std::size_t Size() const { return timers_.size(); }

 private:
  std::map<std::pair<pid_t, std::string>, TimerRequest> timers_;
};

}  // namespace ddprun::elastic
