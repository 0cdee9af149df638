// What one node tells the others when its worker group fails or its agent stops: the root
// cause's node, host and worker, as one JSON record written into each peer's inbox key.
#pragma once
#include <string>

#include "elastic/failure.h"

namespace ddprun::elastic {

struct NodeFailure {
  int node_rank = 0;
  std::string host;
  ProcessFailure failure;  // global rank, local rank, pid, status, time, error file, message
};

// JSON: node_rank, host, rank, local_rank, exitcode (null when signaled), signal (0 if none),
// pid, time_ms (epoch milliseconds), error_file, message, hang, hang_before_progress,
// hangs_before_progress.
std::string EncodeNodeFailure(const NodeFailure& record);
// Throws std::invalid_argument on anything but a record EncodeNodeFailure wrote.
NodeFailure DecodeNodeFailure(const std::string& text);

}  // namespace ddprun::elastic
