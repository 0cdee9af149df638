// Runs an agent on the launcher's event loop until it is done, forwarding the handled signals
// (--signals_to_handle) to it, and reports its result on stderr as torchrun does.
#pragma once
#include <csignal>
#include <optional>

#include "common/asio.h"
#include "elastic/agent.h"
#include "elastic/launch_config.h"

namespace ddprun::launcher {

// Holds the handled signals (--signals_to_handle) for the whole life of the launcher, so that
// one never kills it: blocked from the start of main (torchrun's default set, before the
// command line is read; then the configured set, Hold()), taken by the event loop while
// RunAgentLoop runs, blocked again once the agent is done. A signal that arrives outside the
// loop waits in the kernel; TakePending() takes it so that the launcher can exit 128+N (it is
// never unblocked again: the launcher is exiting). Threads started meanwhile inherit the mask,
// so the signals reach the event loop only.
class HeldSignals {
 public:
  HeldSignals();  // torchrun's default set: SIGTERM, SIGINT, SIGHUP, SIGQUIT
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

  // Holds `config`'s set instead: lets go of the defaults it does not name (a pending one of
  // those then acts as it would without ddprun).
  void Hold(const elastic::LaunchConfig& config);
  // A held signal waiting in the kernel, taken (the lowest number first); none: nullopt.
  std::optional<int> TakePending();

 private:
  sigset_t held_;
};

// Runs the agent until it is done; `held` is `config`'s set, blocked on entry and on return.
elastic::AgentResult RunAgentLoop(asio::io_context& io, const elastic::LaunchConfig& config,
                                  elastic::Agent& agent);

// The result of a launch that a held signal interrupted after its agent was done (or before it
// started): stopped by that signal, 128+N.
elastic::AgentResult StoppedBySignal(int signal);

// Failure summary (with the root cause's host), stop line or error line; nothing on success.
void ReportResult(const elastic::AgentResult& result, const elastic::LaunchConfig& config);

}  // namespace ddprun::launcher
