// Runs an agent on the launcher's event loop until it is done, forwarding the handled signals
// (--signals_to_handle) to it, and reports its result on stderr as torchrun does.
#pragma once
#include "common/asio.h"
#include "elastic/agent.h"
#include "elastic/launch_config.h"

namespace ddprun::launcher {

elastic::AgentResult RunAgentLoop(asio::io_context& io, const elastic::LaunchConfig& config,
                                  elastic::Agent& agent);

// Failure summary (with the root cause's host), stop line or error line; nothing on success.
void ReportResult(const elastic::AgentResult& result, const elastic::LaunchConfig& config);

}  // namespace ddprun::launcher
