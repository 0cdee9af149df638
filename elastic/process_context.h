// The ProcessContext seam: starts one process per local rank and reports each exit as an
// event; stops the group with a signal, one shared grace deadline, then SIGKILL.
#pragma once
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "elastic/failure.h"
#include "elastic/worker_env.h"

namespace ddprun::elastic {

// Where one stream of one worker goes.
struct StreamRoute {
  std::string file;          // non-empty: written to this file (redirect or tee)
  bool to_console = true;    // shown on the launcher's console
  bool prefixed = false;     // routed through the launcher with a line prefix (tee)
};

// One worker process to start.
struct WorkerLaunch {
  int local_rank = 0;
  int global_rank = 0;
  std::vector<std::string> argv;  // argv[0] is resolved against PATH when it has no '/'
  Environment env;
  StreamRoute out;
  StreamRoute err;
  std::string prefix;      // console prefix for prefixed streams; "${pid}" is still to fill
  std::string error_file;  // TORCHELASTIC_ERROR_FILE, read back when the worker fails
};

// One attempt of the local worker group.
struct AttemptLaunch {
  std::string attempt_dir;  // emptied and recreated before the start; empty: no files
  std::vector<WorkerLaunch> workers;
  std::vector<std::string> duplicate_stdout_filters;  // tee'd lines copied to filtered_stdout.log
  std::vector<std::string> duplicate_stderr_filters;
};

class ProcessContext {
 public:
  using ExitCallback = std::function<void(const WorkerExit&)>;

  virtual ~ProcessContext() = default;
  // Starts every worker; `on_exit` runs once per worker, later, from the event loop (a worker
  // that cannot be executed is reported as an exit with code 127 or 126).
  virtual void Start(const AttemptLaunch& attempt, ExitCallback on_exit) = 0;
  // Sends `signal` to every worker's process group, SIGKILLs what remains after `grace`, and
  // calls `on_stopped` once every worker has been reaped. Calling it again re-sends the signal,
  // keeps the earlier deadline and replaces the callback. Also cleans up what the workers
  // left in their process groups.
  virtual void Stop(int signal, std::chrono::milliseconds grace,
                    std::function<void()> on_stopped) = 0;
};

}  // namespace ddprun::elastic
