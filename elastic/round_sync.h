// The agents' conversations in one round's store (multi-node only): torchrun's role_info
// exchange, inbox and heartbeat key names, failure publishing and the exit barrier.
#pragma once
#include <chrono>
#include <string>
#include <vector>

#include "elastic/node_failure.h"
#include "elastic/rank_assignment.h"
#include "store/store.h"

namespace ddprun::elastic {

// One agent of the round, as announced in torchrun/role_info/<group_rank> (plus its host).
struct PeerInfo {
  std::string role = "default";
  int group_rank = 0;
  int local_world_size = 1;
  std::string host;
};

// Writes `mine`, then blocks (store timeout) until every agent's info is there; ordered by rank.
std::vector<PeerInfo> ExchangeRoleInfos(store::Store& store, const PeerInfo& mine,
                                        int group_world_size);
// torchrun's prefix sums over `peers` (ordered by group rank), for `group_rank`.
RankAssignment AssignFromPeers(const std::vector<PeerInfo>& peers, int group_rank);

std::string InboxKey(int node_rank);
std::string HeartbeatKey(int node_rank);

// Writes `record` into the inbox of every node but `record.node_rank`.
void PublishFailure(store::Store& store, const NodeFailure& record, int group_world_size);

// Counts this agent in barrier `name`, then waits until all `world_size` agents arrived. False
// on timeout; an interrupted store (the barrier cancelled) throws StoreConnectionError.
bool ExitBarrier(store::Store& store, const std::string& name, int world_size,
                 std::chrono::milliseconds timeout);
// Counts this agent in barrier `name` without waiting (an agent that leaves early).
void LeaveBarrier(store::Store& store, const std::string& name, int world_size);

}  // namespace ddprun::elastic
