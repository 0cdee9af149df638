// One plan for the run and the dry run: what this node's launch does, decided once from the
// LaunchConfig before anything is bound, connected or started. MakeBackend (launch_backend.h)
// builds the launch from it and --dry_run prints it (launcher/dry_run.cc): what the dry run
// shows is what the run executes.
//
// The plan is data, but planning looks at this machine (its names, its interfaces, DNS: who
// serves the store, what MASTER_ADDR a one-node store is reached by), so it lives with the
// backends that execute it rather than in elastic/, which makes no system call.
//
// Known before the launch, and in the plan: which backend; the store this node serves and
// where; where its agent reaches the agents' store; the rendezvous endpoints; a static job's
// group rank, number of nodes and master. Known only later: a single node's ephemeral
// MASTER_PORT (when the store binds) and an authenticated static job's (node 0 picks it at each
// rendezvous), marked by FirstRound's Known fields; and what each elastic round decides: the
// master (marked so too), the group rank, the number of nodes and the ranks, for which the plan
// holds node_rank and MAX of MIN:MAX. Ranks across nodes assume that every node runs
// nproc_per_node workers (static agents exchange the real counts at each rendezvous).
//
// The workers (argv, environment) are not stored: FirstAttempt derives them from the plan and
// the worker spec, with the function the agent applies to every round, so the plan can be made
// before the run's log directory exists.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "common/host_port.h"
#include "elastic/attempt_plan.h"
#include "elastic/launch_config.h"
#include "elastic/rank_assignment.h"
#include "store/etcd/etcd_store.h"

namespace ddprun::launcher::backend {

enum class LaunchKind {
  kSingleNode,  // one node (--standalone too): the launcher serves the workers' store
  kStatic,      // static across nodes: node 0 serves the store of agents and workers
  kElastic,     // c10d across nodes or with MIN:MAX, or etcd: rounds of the dynamic rendezvous
};

// When a value of the first round is known.
enum class Known { kNow, kAtLaunch, kAtRendezvous };

// A store this node serves from the start: the address it binds ("": every interface) and its
// port (0: ephemeral, chosen when it binds).
struct ServedStore {
  std::string bind;
  int port = 0;
  bool operator==(const ServedStore&) const = default;
};

// This node's first round as far as it is known before the launch. A value known later holds
// what stands in for it (an empty address, port 0, node_rank as the group rank).
struct FirstRound {
  int group_rank = 0;
  int group_world_size = 1;
  elastic::RankAssignment ranks;
  std::string master_addr;  // the workers' MASTER_ADDR
  int master_port = 0;      // the workers' MASTER_PORT
  Known master_addr_known = Known::kNow;
  Known master_port_known = Known::kNow;
  bool use_agent_store = true;  // false: the workers serve their own store
  bool ranks_assumed = false;   // several nodes: as if each ran nproc_per_node workers
  bool operator==(const FirstRound&) const = default;
};

struct LaunchPlan {
  LaunchKind kind = LaunchKind::kSingleNode;
  std::string run_id;
  // Single node: the workers' agent store. Static: node 0's store. Otherwise none (an elastic
  // node may serve the rendezvous store: serves_rendezvous_store).
  std::optional<ServedStore> served_store;
  // Static: where every agent, node 0's included, reaches the agents' store.
  std::optional<HostPort> agent_store;
  // Elastic: --rdzv_endpoint as a list, each with its port (c10d 29400, etcd 2379).
  std::vector<HostPort> rendezvous_endpoints;
  // c10d: this node serves the rendezvous store at the first endpoint (a client if the port is
  // taken); false: a client.
  bool serves_rendezvous_store = false;
  std::optional<store::etcd::EtcdStoreOptions> etcd;  // etcd: the cluster, the key prefix
  std::optional<std::string> store_bind;  // rdzv_conf store_bind: every store served here binds it
  // Said once at launch (the run logs them, the dry run shows them as notes).
  std::optional<std::string> unused_token_note;  // one node with a token
  std::optional<std::string> etcd_v2_note;       // --rdzv_backend=etcd-v2
  FirstRound first_round;
  bool operator==(const LaunchPlan&) const = default;
};

// The plan of `config` (validated by the CLI). Binds and connects nothing.
LaunchPlan PlanLaunch(const elastic::LaunchConfig& config);

// The first attempt's workers (argv, environment, log files) as the agent starts them for the
// plan's first round (elastic::MakeGroupEnv and PlanAttempt, restart count 0). Throws
// UsageError as PlanAttempt does.
elastic::AttemptLaunch FirstAttempt(const LaunchPlan& plan, const elastic::WorkerSpec& spec);

}  // namespace ddprun::launcher::backend
