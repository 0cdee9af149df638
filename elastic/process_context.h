// The ProcessContext seam: starts one process per local rank and reports each exit as an
// event; stops the group with a signal, one shared grace deadline, then SIGKILL.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "elastic/cpu_binding.h"
#include "elastic/failure.h"
#include "elastic/hang_timeouts.h"
#include "elastic/worker_env.h"

namespace ddprun::elastic {

// Where one stream of one worker goes.
struct StreamRoute {
  std::string file;        // non-empty: written to this file (redirect or tee)
  bool to_console = true;  // shown on the launcher's console
  bool prefixed = false;   // routed through the launcher with a line prefix (tee)
  // Routed through the launcher even when not prefixed (a pseudo-terminal where the console is
  // one, so workers still see a terminal; a pipe otherwise), passed on byte for byte: its
  // bytes count as the worker's progress and its tail is kept for the failure summary.
  bool watched = false;
};

// --warm-restart: how the node's preloaded interpreter (launcher/process/warm_pool.h) runs a
// worker instead of exec'ing its argv: runpy on `target`, with sys.argv = `argv`.
struct WarmEntry {
  bool module = false;            // runpy.run_module (-m); else runpy.run_path (script, run-path)
  std::string target;             // the script's path or the module's name
  std::vector<std::string> argv;  // sys.argv: the script (module) and its arguments
  bool operator==(const WarmEntry&) const = default;
};

// One worker process to start.
struct WorkerLaunch {
  int local_rank = 0;
  int global_rank = 0;
  std::vector<std::string> argv;  // argv[0] is resolved against PATH when it has no '/'
  Environment env;
  StreamRoute out;
  StreamRoute err;
  std::string prefix;       // console prefix for prefixed streams; "${pid}" is still to fill
  std::string error_file;   // TORCHELASTIC_ERROR_FILE, read back when the worker fails
  std::string pulse_file;   // hang detection: a FIFO each line written to is progress; "": none
  std::string stacks_file;  // where the stacks asked for by DumpStacks are copied; "": none
  CpuBinding cpu_binding;   // --numa-binding: the CPUs it is pinned to before exec; empty: none
  // --warm-restart: what a fork from the warm pool runs; none: always exec'd. The context
  // forks it when its pool is ready (never for its first attempt) and execs it otherwise.
  std::optional<WarmEntry> warm;
};

// One attempt of the local worker group.
struct AttemptLaunch {
  std::string attempt_dir;  // emptied and recreated before the start; empty: no files
  std::vector<WorkerLaunch> workers;
  std::vector<std::string> duplicate_stdout_filters;  // tee'd lines copied to filtered_stdout.log
  std::vector<std::string> duplicate_stderr_filters;
  // Hang detection (--hang-timeout, --hang-startup-timeout): when a silent rank is hung
  // (elastic/progress_watch.h); off unless hang.On().
  HangTimeouts hang;
  // --hang-timeout=auto: the timeout learned by earlier attempts or other nodes; none yet.
  std::optional<std::chrono::milliseconds> learned_hang_timeout;
  // torchelastic's file timer (TORCHELASTIC_ENABLE_FILE_TIMER=1): the FIFO to create and serve
  // for this attempt, removed when the group stops; "": none.
  std::string timer_file;
};

// --hang-timeout=auto: the timeout was learned or raised, and the interval it comes from.
struct LearnedHangTimeout {
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds longest_interval{0};
};

// What the ProcessContext reports besides exits.
struct WorkerEvents {
  WorkerEvents() = default;
  // Only exits (tests and callers that watch nothing else).
  template <typename OnExit,
            typename = std::enable_if_t<std::is_invocable_v<OnExit, const WorkerExit&>>>
  WorkerEvents(OnExit on_exit) : on_exit(std::move(on_exit)) {}  // NOLINT: implicit on purpose

  std::function<void(const WorkerExit&)> on_exit;  // once per worker
  // A rank hung or its file timer expired (at most once per attempt; none once stopping).
  std::function<void(const HangReport&)> on_hang;
  // --hang-timeout=auto: the learned timeout was set or raised (at most once per change).
  std::function<void(const LearnedHangTimeout&)> on_hang_timeout_learned;
  // A worker still alive a bounded time after SIGKILL (state D): one line naming it and its
  // state; the stop completes without it.
  std::function<void(const std::string&)> on_unkillable;
};

class ProcessContext {
 public:
  using ExitCallback = std::function<void(const WorkerExit&)>;

  virtual ~ProcessContext() = default;
  // Starts every worker; `on_exit` runs once per worker, later, from the event loop (a worker
  // that cannot be executed is reported as an exit with code 127 or 126).
  virtual void Start(const AttemptLaunch& attempt, WorkerEvents events) = 0;
  // Evidence before anything is killed: SIGABRT to every live worker process itself (not its
  // group) with its core dumps turned off, so that PYTHONFAULTHANDLER writes every thread's
  // stack to its stderr (copied to its stacks_file); `done` runs once every one of them exited
  // or `window` passed. Their exits are reported as usual, with the dump in `stack_dump`.
  virtual void DumpStacks(std::chrono::milliseconds window, std::function<void()> done) = 0;
  // The started workers' pids by local rank (0 for one that could not be started), for the
  // events that name them; none known by default.
  virtual std::vector<pid_t> Pids() const { return {}; }
  // How each started worker began, by local rank: "warm" (forked from the preloaded
  // interpreter) or "cold" (exec'd); none known by default.
  virtual std::vector<std::string> StartKinds() const { return {}; }
  // Sends `signal` to one live worker process (not its group); nothing if it is gone.
  virtual void Signal(int local_rank, int signal) = 0;
  // Sends `signal` to every worker's process group, SIGKILLs what remains after `grace`, and
  // calls `on_stopped` once every worker has been reaped, or a bounded time after the SIGKILL
  // for workers that will not die (reported through on_unkillable first). Calling it again re-sends
  // the signal, keeps the earlier deadline and replaces the callback. Also cleans up what the
  // workers left in their process groups.
  virtual void Stop(int signal, std::chrono::milliseconds grace,
                    std::function<void()> on_stopped) = 0;
};

}  // namespace ddprun::elastic
