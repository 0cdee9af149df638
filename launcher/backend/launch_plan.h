// One plan for the run and the dry run: what this node's launch does, decided once from the
// LaunchConfig and the facts of this machine (machine_facts.h) before anything is bound,
// connected or started. PlanLaunch is pure: it asks the system nothing (ReadMachineFacts,
// launcher/machine_facts_reader.h, asked it first), so every decision is a table test with
// made-up facts (tests/unit/launcher/launch_plan_test.cc). MakeBackend (launch_backend.h)
// builds the launch from the plan alone and --dry_run prints it (launcher/dry_run.cc): what the
// dry run shows is what the run executes.
//
// Known before the launch, and in the plan: which backend; the store this node serves and
// where; where its agent reaches the agents' store; the rendezvous endpoints; this node's
// identity and advertised address; every timeout; the token; a static job's group rank, number
// of nodes and master; every local rank's CPUs. Known only later: a single node's ephemeral
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
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/host_port.h"
#include "elastic/attempt_plan.h"
#include "elastic/cpu_binding.h"
#include "elastic/launch_config.h"
#include "elastic/rank_assignment.h"
#include "launcher/backend/machine_facts.h"
#include "store/etcd/etcd_store.h"

namespace ddprun::store {
class AuthKey;
}  // namespace ddprun::store

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

// This node as the other nodes see it.
struct NodeIdentity {
  std::string hostname;         // the workers' and the failure summary's host name
  std::string advertised_addr;  // --local_addr, else the FQDN: where other nodes reach it
  int pid = 0;                  // the launcher's, in its rendezvous record
  bool operator==(const NodeIdentity&) const = default;
};

// Every timeout of the launch, derived once from --rdzv_conf and the flags.
struct LaunchTimeouts {
  std::chrono::milliseconds join{600'000};      // a rendezvous round forms within
  std::chrono::milliseconds last_call{30'000};  // MIN reached: wait for more this long
  std::chrono::milliseconds close{30'000};      // the closing of the rendezvous
  std::chrono::milliseconds read{60'000};       // one rendezvous store request
  std::chrono::milliseconds keep_alive{5'000};  // a node beats this often
  int keep_alive_max_attempt = 3;               // beats a node may miss
  std::chrono::milliseconds heartbeat{15'000};  // silent this long: lost (keep_alive × attempts)
  std::chrono::milliseconds member{20'000};     // a round's member is dropped after (heartbeat +
                                                // one beat)
  std::chrono::milliseconds linger{15'000};     // a served store waits for its clients (≥ 10 s)
  std::chrono::milliseconds agent_store_reply{60'000};  // a static agent's store replies within
  std::chrono::milliseconds shutdown{30'000};           // workers' SIGTERM → SIGKILL
  std::chrono::milliseconds failure_barrier{15'000};    // nodes agree on a failure within
  bool operator==(const LaunchTimeouts&) const = default;
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

// --warm-restart=on with a Python entry point: the node's preloaded interpreter
// (launcher/process/warm_pool.h), which forks the workers of every attempt after the first.
struct WarmPoolPlan {
  std::string python;                // the workers' interpreter
  std::vector<std::string> preload;  // torch, then --warm-preload's modules, each once
  bool operator==(const WarmPoolPlan&) const = default;
};

struct LaunchPlan {
  LaunchKind kind = LaunchKind::kSingleNode;
  std::string run_id;
  int min_nodes = 1;  // the rendezvous's MIN:MAX
  int max_nodes = 1;
  NodeIdentity node;
  LaunchTimeouts timeouts;
  // The job's token (null: none): every store this node serves or reaches authenticates.
  std::shared_ptr<const store::AuthKey> auth;
  std::string auth_source;  // where the token came from, for the dry run
  // Single node: the workers' agent store. Static: node 0's store. Otherwise none (an elastic
  // node may serve the rendezvous store: serves_rendezvous_store).
  std::optional<ServedStore> served_store;
  // Static: where every agent, node 0's included, reaches the agents' store.
  std::optional<HostPort> agent_store;
  // What to tell a user whose store port is taken (the option that gave it).
  std::string free_port_hint;
  // Elastic: --rdzv_endpoint as a list, each with its port (kDefaultRendezvousPort,
  // kDefaultEtcdPort: common/host_port.h).
  std::vector<HostPort> rendezvous_endpoints;
  // c10d: this node serves the rendezvous store at the first endpoint (a client if the port is
  // taken); false: a client.
  bool serves_rendezvous_store = false;
  std::optional<store::etcd::EtcdStoreOptions> etcd;  // etcd: the cluster, the key prefix
  std::optional<std::string> store_bind;  // rdzv_conf store_bind: every store served here binds it
  // TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 was set: whether it takes effect is use_agent_store.
  bool share_store_disabled = false;
  // Said once at launch (the run logs them, the dry run shows them as notes).
  std::optional<std::string> unused_token_note;  // one node with a token
  std::optional<std::string> etcd_v2_note;       // --rdzv_backend=etcd-v2
  FirstRound first_round;
  // --numa-binding: every local rank's CPUs (elastic::PlanCpuBinding); empty: not bound.
  std::vector<elastic::CpuBinding> cpu_bindings;
  std::optional<WarmPoolPlan> warm_pool;  // none: every worker is exec'd
  bool operator==(const LaunchPlan&) const = default;
};

// The names PlanLaunch(config, facts) looks up in facts.resolved: the rendezvous store's host
// when the plan must tell whether it is this machine, a single node's advertised name when the
// plan must tell whether it is loopback. Whether the plan needs the FQDN, the interfaces and
// the CPUs is said by the functions below.
std::vector<std::string> NamesToResolve(const elastic::LaunchConfig& config,
                                        const std::string& fqdn);
bool NeedsFqdn(const elastic::LaunchConfig& config);
bool NeedsInterfaces(const elastic::LaunchConfig& config);

// The plan of `config` (validated by the CLI) on the machine of `facts`. Pure. Throws
// UsageError for a --numa-binding that the facts cannot satisfy.
LaunchPlan PlanLaunch(const elastic::LaunchConfig& config, const MachineFacts& facts);

// --warm-restart: the pool for a Python entry point (--no-python has none: exec only).
std::optional<WarmPoolPlan> WarmPoolOf(const elastic::LaunchConfig& config);

// Whether `host` names the machine of `facts`: localhost or a loopback address, its host name or
// FQDN, `local_addr`, or a name that resolved to one of its interfaces' addresses.
bool NamesThisMachine(const std::string& host, const MachineFacts& facts,
                      const std::string& local_addr);

// The first attempt's workers (argv, environment, log files) as the agent starts them for the
// plan's first round (elastic::MakeGroupEnv and PlanAttempt, restart count 0). Throws
// UsageError as PlanAttempt does.
elastic::AttemptLaunch FirstAttempt(const LaunchPlan& plan, const elastic::WorkerSpec& spec);

}  // namespace ddprun::launcher::backend
