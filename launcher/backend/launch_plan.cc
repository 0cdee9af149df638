#include "launcher/backend/launch_plan.h"

#include "launcher/backend/elastic_backend.h"
#include "launcher/backend/master_endpoint.h"

namespace ddprun::launcher::backend {
namespace {

using elastic::LaunchConfig;

constexpr const char* kUnusedToken =
    "one node: no rendezvous between agents to authenticate; the token is not used";

LaunchKind KindOf(const LaunchConfig& config) {
  if (config.Elastic()) return LaunchKind::kElastic;
  if (!config.standalone && config.max_nodes > 1) return LaunchKind::kStatic;
  return LaunchKind::kSingleNode;
}

// This node's ranks as torchrun assigns them when each of `nodes` runs nproc_per_node workers.
elastic::RankAssignment AssumedRanks(const LaunchConfig& config, int group_rank, int nodes) {
  std::vector<elastic::RoleInfo> infos;
  for (int rank = 0; rank < nodes; ++rank) {
    infos.push_back({config.role, rank, config.nproc_per_node});
  }
  return elastic::AssignRanks(infos).at(group_rank);
}

// The launcher serves the store (SingleNodeStoreEndpoint); its workers are the whole world.
void PlanSingleNode(const LaunchConfig& config, LaunchPlan& plan) {
  const StoreEndpoint endpoint = SingleNodeStoreEndpoint(config);
  plan.served_store = ServedStore{endpoint.server.host, endpoint.server.port};
  FirstRound& round = plan.first_round;
  round.master_addr = endpoint.master_addr;
  round.master_port = endpoint.server.port;
  round.master_port_known = endpoint.server.port == 0 ? Known::kAtLaunch : Known::kNow;
  if (config.rdzv_settings.auth) plan.unused_token_note = kUnusedToken;
  if (!config.share_rdzv_store && config.standalone) {  // c10d: rank 0's worker serves its own
    round.use_agent_store = false;
    round.master_port_known = Known::kAtRendezvous;
  }
}

// Node 0 serves the store at --master_port on store_bind (else every interface); every agent
// is its client (node 0's on loopback). With a token the workers serve their own store.
void PlanStatic(const LaunchConfig& config, LaunchPlan& plan) {
  const int port = config.master_port;
  const bool authenticated = static_cast<bool>(config.rdzv_settings.auth);
  if (config.node_rank == 0) plan.served_store = ServedStore{plan.store_bind.value_or(""), port};
  plan.agent_store = HostPort{config.node_rank == 0 ? "127.0.0.1" : config.master_addr, port};
  FirstRound& round = plan.first_round;
  round.group_rank = config.node_rank;  // the CLI has checked node_rank < max_nodes
  round.group_world_size = config.max_nodes;
  round.master_addr = config.master_addr;
  round.master_port = port;
  round.master_port_known = authenticated ? Known::kAtRendezvous : Known::kNow;
  round.use_agent_store = !authenticated;
  round.ranks_assumed = true;
}

// The rendezvous decides the round; node_rank stands in for the group rank, MAX for the size.
void PlanElastic(const LaunchConfig& config, LaunchPlan& plan) {
  plan.rendezvous_endpoints = RendezvousEndpoints(config);
  plan.serves_rendezvous_store = ServesRendezvousStore(config);
  if (config.Etcd()) plan.etcd = EtcdOptions(config);
  plan.etcd_v2_note = EtcdV2Note(config);
  FirstRound& round = plan.first_round;
  round.group_rank = config.node_rank < config.max_nodes ? config.node_rank : 0;
  round.group_world_size = config.max_nodes;
  round.master_addr_known = round.master_port_known = Known::kAtRendezvous;
  round.use_agent_store = !config.rdzv_settings.auth && config.share_rdzv_store;
  round.ranks_assumed = true;
}

}  // namespace

LaunchPlan PlanLaunch(const LaunchConfig& config) {
  LaunchPlan plan;
  plan.kind = KindOf(config);
  plan.run_id = config.rdzv_id;
  plan.store_bind = config.rdzv_settings.store_bind;
  switch (plan.kind) {
    case LaunchKind::kSingleNode:
      PlanSingleNode(config, plan);
      break;
    case LaunchKind::kStatic:
      PlanStatic(config, plan);
      break;
    case LaunchKind::kElastic:
      PlanElastic(config, plan);
      break;
  }
  FirstRound& round = plan.first_round;
  round.ranks = AssumedRanks(config, round.group_rank, round.group_world_size);
  return plan;
}

elastic::AttemptLaunch FirstAttempt(const LaunchPlan& plan, const elastic::WorkerSpec& spec) {
  const FirstRound& first = plan.first_round;
  rendezvous::RendezvousInfo round;
  round.group_rank = first.group_rank;
  round.group_world_size = first.group_world_size;
  round.master_addr = first.master_addr;
  round.master_port = first.master_port;
  round.use_agent_store = first.use_agent_store;
  return elastic::PlanAttempt(spec,
                              elastic::MakeGroupEnv(spec, round, first.ranks, 0, plan.run_id));
}

}  // namespace ddprun::launcher::backend
