// Worker failures, the root cause (first failure by time) and torchrun's failure summary.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_status.h"

namespace ddprun::elastic {

using SystemTime = std::chrono::system_clock::time_point;

// How one worker process ended, as the ProcessContext reports it.
struct WorkerExit {
  int local_rank = 0;
  pid_t pid = 0;
  ExitStatus status;
  SystemTime time;                             // when the exit was observed
  std::optional<std::string> error_file_json;  // TORCHELASTIC_ERROR_FILE's content, if written
  std::string spawn_error;                     // why exec failed (status 126/127), else empty
  std::string stderr_tail;  // the last lines of its stderr, when the launcher saw them
  std::string stack_dump;   // what it wrote to stderr after DumpStacks asked for its stacks
};

// A worker group that stopped making progress: a rank was silent for the hang timeout, or a
// file timer expired.
struct HangReport {
  enum class Kind { kNoProgress, kTimerExpired };
  Kind kind = Kind::kNoProgress;
  int local_rank = 0;  // the silent rank / the rank whose timer expired
  pid_t pid = 0;
  SystemTime time;          // when it was detected
  std::string cause;        // one line: "no progress from local rank 1 for 10 s (...)"
  std::string scope;        // kTimerExpired: the scope_id
  int signal = 0;           // kTimerExpired: the signal the request asked for
  bool startup = false;     // kNoProgress: the rank never showed progress (start-up timeout)
  bool progressed = false;  // a rank of this node showed progress past start-up this attempt
};

struct ProcessFailure {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = 0;
  ExitStatus status;
  SystemTime time;
  std::string error_file;  // path, or "<N/A>" when the worker wrote none
  std::string message;     // traceback, error message, or torchrun's fallback text
  bool hang = false;       // a hang or an expired file timer, not an exit of its own
  // A hang found before any rank of its node made progress past start-up, and how many attempts
  // in a row of the job ended so (this one included): --max-no-progress-hangs stops the job.
  bool hang_before_progress = false;
  int hangs_before_progress = 0;
};

// Builds the failure record, taking message and timestamp from the error file when present
// (both of torchrun's JSON formats; an unreadable file is reported in the message).
// Without an error file, the message is the last lines of the worker's stderr when the launcher
// saw them (else torchrun's fallback text).
ProcessFailure MakeFailure(const WorkerExit& exit, int global_rank, const std::string& error_file);

// Index of the first failure by time (ties: the earliest in the list). `failures` is non-empty.
std::size_t RootCauseIndex(const std::vector<ProcessFailure>& failures);

// torchrun's ChildFailedError table: "<title> FAILED", other failures, root cause.
std::string FormatFailureSummary(const std::string& entrypoint, const std::string& host,
                                 const std::vector<ProcessFailure>& failures);

}  // namespace ddprun::elastic
