#include "elastic/round_sync.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace ddprun::elastic {
namespace {

std::string RoleInfoKey(int group_rank) {
  return "torchelastic/role_info/" + std::to_string(group_rank);
}

PeerInfo ParsePeer(const store::Bytes& value) {
  const auto json = nlohmann::json::parse(store::Store::ToString(value));
  PeerInfo peer;
  peer.role = json.at("role").get<std::string>();
  peer.group_rank = json.at("rank").get<int>();
  peer.local_world_size = json.at("local_world_size").get<int>();
  peer.host = json.value("host", std::string());
  return peer;
}

}  // namespace

std::vector<PeerInfo> ExchangeRoleInfos(store::Store& store, const PeerInfo& mine,
                                        int group_world_size) {
  const nlohmann::json json = {{"role", mine.role},
                               {"rank", mine.group_rank},
                               {"local_world_size", mine.local_world_size},
                               {"host", mine.host}};
  store.SetString(RoleInfoKey(mine.group_rank), json.dump());
  std::vector<std::string> keys;
  for (int rank = 0; rank < group_world_size; ++rank) keys.push_back(RoleInfoKey(rank));
  std::vector<PeerInfo> peers;
  for (const auto& value : store.MultiGet(keys)) peers.push_back(ParsePeer(value));
  return peers;
}

RankAssignment AssignFromPeers(const std::vector<PeerInfo>& peers, int group_rank) {
  std::vector<RoleInfo> infos;
  for (const auto& peer : peers)
    infos.push_back({peer.role, peer.group_rank, peer.local_world_size});
  const auto assignments = AssignRanks(infos);
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (peers[i].group_rank == group_rank) return assignments[i];
  }
  throw std::logic_error("group rank " + std::to_string(group_rank) + " is not in the round");
}

std::string InboxKey(int node_rank) { return "ddprun/inbox/" + std::to_string(node_rank); }
std::string HeartbeatKey(int node_rank) { return "ddprun/heartbeat/" + std::to_string(node_rank); }

void PublishFailure(store::Store& store, const NodeFailure& record, int group_world_size) {
  const std::string text = EncodeNodeFailure(record);
  std::vector<std::string> keys;
  std::vector<store::Bytes> values;
  for (int rank = 0; rank < group_world_size; ++rank) {
    if (rank == record.node_rank) continue;
    keys.push_back(InboxKey(rank));
    values.push_back(store::Store::ToBytes(text));
  }
  store.MultiSet(keys, values);
}

bool ExitBarrier(store::Store& store, const std::string& name, int world_size,
                 std::chrono::milliseconds timeout) {
  if (store.Add(name + "/num_members", 1) >= world_size) {
    store.SetString(name + "/last_member", "1");
    return true;  // the last one to arrive need not wait
  }
  try {
    store.Wait({name + "/last_member"}, timeout);
    return true;
  } catch (const store::StoreTimeout&) {
    return false;
  }
}

void LeaveBarrier(store::Store& store, const std::string& name, int world_size) {
  if (store.Add(name + "/num_members", 1) >= world_size)
    store.SetString(name + "/last_member", "1");
}

}  // namespace ddprun::elastic
