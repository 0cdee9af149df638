// --hang-timeout=auto's learned timeout, kept for the job in its rendezvous store so that a
// restart or a node that joins later does not learn from nothing: the largest timeout any node
// learned, in milliseconds, under one key of RendezvousInfo::job_store.
#pragma once
#include <chrono>
#include <optional>

#include "store/store.h"

namespace ddprun::elastic {

inline constexpr const char* kLearnedHangTimeoutKey = "ddprun/hang_timeout_ms";

// Raises the job's value to `mine` (compare-and-set: a larger one written meanwhile stays) and
// returns the larger of the two; none when neither exists. A stored value that is not a positive
// integer is replaced. Blocking (store calls): runs on the agent's runner; store errors pass.
std::optional<std::chrono::milliseconds> ShareLearnedHangTimeout(
    store::Store& job_store, std::optional<std::chrono::milliseconds> mine);

}  // namespace ddprun::elastic
