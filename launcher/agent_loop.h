// Runs an agent on the launcher's event loop until it is done, forwarding the handled signals
// (--signals_to_handle) to it, and reports its result on stderr as torchrun does.
#pragma once
#include <csignal>

#include "common/asio.h"
#include "elastic/agent.h"
#include "elastic/launch_config.h"

namespace ddprun::launcher {

// Blocks the handled signals (--signals_to_handle) from construction until RunAgentLoop listens
// for them, so that a signal arriving during start-up (while node 0's store already accepts
// peers, say) is handled instead of killing the launcher. Threads started meanwhile inherit the
// mask, so the signals reach the event loop only. The destructor restores the mask.
class HeldSignals {
 public:
  explicit HeldSignals(const elastic::LaunchConfig& config);
  ~HeldSignals();
  HeldSignals(const HeldSignals&) = delete;
  HeldSignals& operator=(const HeldSignals&) = delete;

 private:
  sigset_t held_;
};

elastic::AgentResult RunAgentLoop(asio::io_context& io, const elastic::LaunchConfig& config,
                                  elastic::Agent& agent);

// Failure summary (with the root cause's host), stop line or error line; nothing on success.
void ReportResult(const elastic::AgentResult& result, const elastic::LaunchConfig& config);

}  // namespace ddprun::launcher
