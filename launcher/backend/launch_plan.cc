#include "launcher/backend/launch_plan.h"

#include <algorithm>
#include <stdexcept>

#include "common/errors.h"

namespace ddprun::launcher::backend {
namespace {

using elastic::LaunchConfig;
using std::chrono::milliseconds;

constexpr const char* kUnusedToken =
    "one node: no rendezvous between agents to authenticate; the token is not used";

LaunchKind KindOf(const LaunchConfig& config) {
  if (config.Elastic()) return LaunchKind::kElastic;
  if (!config.standalone && config.max_nodes > 1) return LaunchKind::kStatic;
  return LaunchKind::kSingleNode;
}

// A single node whose store and MASTER_ADDR follow torchrun's static agent store (every
// interface at --master_port, --master_addr), not its c10d shared store.
bool StaticSingleNode(const LaunchConfig& config) {
  return config.rdzv_backend == "static" && !config.standalone;
}

bool ServesByEndpoint(const LaunchConfig& config) {
  return config.Elastic() && !config.Etcd() && !config.rdzv_settings.is_host.has_value();
}

// This node's ranks as torchrun assigns them when each of `nodes` runs nproc_per_node workers.
elastic::RankAssignment AssumedRanks(const LaunchConfig& config, int group_rank, int nodes) {
  std::vector<elastic::RoleInfo> infos;
  for (int rank = 0; rank < nodes; ++rank) {
    infos.push_back({config.role, rank, config.nproc_per_node});
  }
  return elastic::AssignRanks(infos).at(group_rank);
}

LaunchTimeouts TimeoutsOf(const LaunchConfig& config) {
  const elastic::RendezvousSettings& settings = config.rdzv_settings;
  LaunchTimeouts timeouts;
  timeouts.join = settings.join_timeout;
  timeouts.last_call = settings.last_call_timeout;
  timeouts.close = settings.close_timeout;
  timeouts.read = settings.read_timeout;
  timeouts.keep_alive = settings.keep_alive_interval;
  timeouts.keep_alive_max_attempt = settings.keep_alive_max_attempt;
  timeouts.heartbeat = settings.HeartbeatTimeout();
  timeouts.member = timeouts.heartbeat + timeouts.keep_alive;
  // Live peers beat every keep_alive_interval, so a client quiet for the heartbeat timeout
  // belongs to a lost node and is not waited for; the others get at least 10 s.
  timeouts.linger = std::max(milliseconds{10'000}, timeouts.heartbeat);
  timeouts.shutdown = config.shutdown_timeout;
  timeouts.failure_barrier = timeouts.heartbeat;
  return timeouts;
}

// --rdzv_endpoint as a list, each with its port.
std::vector<HostPort> EndpointsOf(const LaunchConfig& config) {
  std::vector<HostPort> endpoints =
      ParseHostPortList(config.rdzv_endpoint, config.GivenAs("rdzv_endpoint"));
  const int port = config.Etcd() ? kDefaultEtcdPort : kDefaultRendezvousPort;
  for (HostPort& endpoint : endpoints) endpoint.port = endpoint.port.value_or(port);
  return endpoints;
}

std::optional<std::string> EtcdV2Note(const LaunchConfig& config) {
  if (!config.Etcd() || config.rdzv_backend != "etcd-v2") return std::nullopt;
  return config.Given("rdzv_backend", config.rdzv_backend) +
         ": ddprun speaks etcd's v3 API (the v2 API is off by default since etcd 3.4); the "
         "rendezvous is etcd's";
}

// The EtcdStore options of an etcd launch: every member, the per-request timeout, the prefix.
store::etcd::EtcdStoreOptions EtcdOptionsOf(const LaunchConfig& config,
                                            std::vector<HostPort> members) {
  const auto& settings = config.rdzv_settings;
  store::etcd::EtcdStoreOptions options;
  options.client.endpoints = std::move(members);
  // Short enough that a member that went silent costs a heartbeat less than its timeout before
  // the client fails over to the next; never above read_timeout.
  options.client.timeout = std::min(settings.read_timeout,
                                    std::max(milliseconds{1'000}, settings.HeartbeatTimeout() / 2));
  // An outage shorter than the heartbeat timeout, and at least 5 s (a leader election after the
  // leader member's loss, slower on a loaded machine), is waited out: leases survive it (only a
  // leader expires them, and a new one renews them all), so nothing notices. Never beyond
  // read_timeout, within which a wrong endpoint must fail.
  options.client.patience =
      std::min(settings.read_timeout, std::max(settings.HeartbeatTimeout(), milliseconds{5'000}));
  if (settings.etcd_tls) {
    options.client.tls =
        store::etcd::EtcdTls{settings.etcd_cacert, settings.etcd_cert, settings.etcd_key};
  }
  options.prefix = settings.etcd_prefix;
  return options;
}

std::string FreePortHint(const LaunchConfig& config) {
  if (config.rdzv_backend == "static" && config.given_as.contains("rdzv_endpoint")) {
    return "pass a free port in " + config.GivenAs("rdzv_endpoint");
  }
  return "pass a free " + config.GivenAs("master_port");
}

// True when `name` resolved, and only to IPv4 loopback addresses, so that a store listening on
// 127.0.0.1 is reachable through that name.
bool ResolvesToIpv4LoopbackOnly(const std::string& name, const MachineFacts& facts) {
  const std::vector<std::string>& addresses = facts.Resolved(name);
  return !addresses.empty() &&
         std::all_of(addresses.begin(), addresses.end(), IsIpv4LoopbackAddress);
}

// Where a single node's store listens and its workers' MASTER_ADDR, without store_bind. Static:
// --master_addr:--master_port on every interface, as torchrun's agent store. c10d on one node:
// an ephemeral port and --local_addr or the FQDN, as torchrun's shared store. --standalone
// keeps the store on loopback: MASTER_ADDR is the FQDN when that resolves to 127.0.0.0/8 only
// (as torchrun's value on such hosts), else 127.0.0.1.
void PlanSingleNodeStore(const LaunchConfig& config, LaunchPlan& plan, const MachineFacts& facts) {
  ServedStore served;
  std::string& master = plan.first_round.master_addr;
  if (StaticSingleNode(config)) {
    served = {"", config.master_port};
    master = config.master_addr;
  } else if (!config.standalone) {
    master = plan.node.advertised_addr;
  } else {
    served.bind = "127.0.0.1";
    const std::string& advertised = plan.node.advertised_addr;
    master = ResolvesToIpv4LoopbackOnly(advertised, facts) ? advertised : "127.0.0.1";
  }
  // store_bind replaces the bound address; one that is not every interface is also what the
  // workers reach.
  if (plan.store_bind) {
    served.bind = *plan.store_bind;
    if (served.bind != "::" && served.bind != "0.0.0.0") master = served.bind;
  }
  plan.served_store = served;
}

// The launcher serves the store; its workers are the whole world.
void PlanSingleNode(const LaunchConfig& config, LaunchPlan& plan, const MachineFacts& facts) {
  PlanSingleNodeStore(config, plan, facts);
  FirstRound& round = plan.first_round;
  round.master_port = plan.served_store->port;
  round.master_port_known = round.master_port == 0 ? Known::kAtLaunch : Known::kNow;
  if (plan.auth) plan.unused_token_note = kUnusedToken;
  if (!config.share_rdzv_store && config.standalone) {  // c10d: rank 0's worker serves its own
    round.use_agent_store = false;
    round.master_port_known = Known::kAtRendezvous;
  }
}

// Node 0 serves the store at --master_port on store_bind (else every interface); every agent
// is its client (node 0's on loopback). With a token the workers serve their own store.
void PlanStatic(const LaunchConfig& config, LaunchPlan& plan) {
  const int port = config.master_port;
  const bool authenticated = plan.auth != nullptr;
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

// Whether this node serves the c10d rendezvous store: rdzv_conf is_host, else whether the first
// endpoint's host names this machine.
bool ServesRendezvousStore(const LaunchConfig& config, const HostPort& first,
                           const MachineFacts& facts) {
  if (config.Etcd()) return false;
  if (config.rdzv_settings.is_host) return *config.rdzv_settings.is_host;
  return NamesThisMachine(first.host, facts, config.local_addr.value_or(""));
}

// The rendezvous decides the round; node_rank stands in for the group rank, MAX for the size.
void PlanElastic(const LaunchConfig& config, LaunchPlan& plan, const MachineFacts& facts) {
  plan.rendezvous_endpoints = EndpointsOf(config);
  plan.serves_rendezvous_store =
      ServesRendezvousStore(config, plan.rendezvous_endpoints.front(), facts);
  if (config.Etcd()) plan.etcd = EtcdOptionsOf(config, plan.rendezvous_endpoints);
  plan.etcd_v2_note = EtcdV2Note(config);
  FirstRound& round = plan.first_round;
  round.group_rank = config.node_rank < config.max_nodes ? config.node_rank : 0;
  round.group_world_size = config.max_nodes;
  round.master_addr_known = round.master_port_known = Known::kAtRendezvous;
  round.use_agent_store = !plan.auth && config.share_rdzv_store;
  round.ranks_assumed = true;
}

// Each visible GPU's NUMA node, by index; empty for a CPU-only job.
std::vector<int> GpuNodes(const LaunchConfig& config, const std::string& given,
                          const GpuFacts& gpus) {
  if (config.nproc_per_node_text == "cpu") return {};
  if (!elastic::BindsByGpu(config.nproc_per_node_text, gpus.devices)) return {};
  if (gpus.bus_ids.empty()) {
    throw UsageError(given + ": cannot find the GPUs' PCI bus ids (" + gpus.reason +
                     "); update the CUDA driver, or pass --nproc_per_node=cpu for a CPU-only job");
  }
  std::vector<int> nodes;
  for (std::size_t gpu = 0; gpu < gpus.bus_ids.size(); ++gpu) {
    if (gpu >= gpus.nodes.size() || !gpus.nodes[gpu]) {
      throw UsageError(given + ": cannot read GPU " + std::to_string(gpu) +
                       "'s NUMA node (/sys/bus/pci/devices/" + gpus.bus_ids[gpu] +
                       "/numa_node); mount /sys, or drop --numa-binding");
    }
    nodes.push_back(*gpus.nodes[gpu]);
  }
  return nodes;
}

// --numa-binding: elastic::PlanCpuBinding on the facts' topology.
std::vector<elastic::CpuBinding> CpuBindingsOf(const LaunchConfig& config,
                                               const MachineFacts& facts) {
  if (!config.numa_binding) return {};
  if (!facts.cpus) throw std::invalid_argument("--numa-binding planned without the CPU facts");
  elastic::CpuBindingRequest request;
  request.given = config.Given("numa_binding", *config.numa_binding);
  request.mode = elastic::CpuBindingModeNamed(*config.numa_binding).value();  // the CLI checked
  request.local_ranks = config.nproc_per_node;
  request.allowed = facts.cpus->allowed;
  elastic::CpuTopology topology = facts.cpus->topology;
  topology.gpu_nodes = GpuNodes(config, request.given, facts.cpus->gpus);
  request.gpu_job = !topology.gpu_nodes.empty();
  return elastic::PlanCpuBinding(topology, request);
}

}  // namespace

bool NeedsFqdn(const LaunchConfig& config) {
  if (ServesByEndpoint(config)) return true;  // is the endpoint this machine's name?
  if (config.local_addr) return false;
  return KindOf(config) == LaunchKind::kElastic ||
         (KindOf(config) == LaunchKind::kSingleNode && !StaticSingleNode(config));
}

bool NeedsInterfaces(const LaunchConfig& config) { return ServesByEndpoint(config); }

std::vector<std::string> NamesToResolve(const LaunchConfig& config, const std::string& fqdn) {
  std::vector<std::string> names;
  if (ServesByEndpoint(config)) names.push_back(EndpointsOf(config).front().host);
  if (KindOf(config) == LaunchKind::kSingleNode && config.standalone) {
    names.push_back(config.local_addr.value_or(fqdn));
  }
  return names;
}

bool NamesThisMachine(const std::string& host, const MachineFacts& facts,
                      const std::string& local_addr) {
  if (host == "localhost" || IsLoopbackAddress(host)) return true;
  if (host == facts.hostname || host == facts.fqdn || host == local_addr) return !host.empty();
  const std::vector<std::string>& local = facts.interface_addresses;
  for (const std::string& address : facts.Resolved(host)) {
    if (std::find(local.begin(), local.end(), address) != local.end()) return true;
  }
  return false;
}

LaunchPlan PlanLaunch(const LaunchConfig& config, const MachineFacts& facts) {
  LaunchPlan plan;
  plan.kind = KindOf(config);
  plan.run_id = config.rdzv_id;
  plan.min_nodes = config.min_nodes;
  plan.max_nodes = config.max_nodes;
  plan.node = {facts.hostname, config.local_addr.value_or(facts.fqdn), facts.pid};
  plan.timeouts = TimeoutsOf(config);
  plan.auth = config.rdzv_settings.auth;
  plan.auth_source = config.rdzv_settings.auth_source;
  plan.store_bind = config.rdzv_settings.store_bind;
  plan.free_port_hint = FreePortHint(config);
  plan.share_store_disabled = !config.share_rdzv_store;
  switch (plan.kind) {
    case LaunchKind::kSingleNode:
      PlanSingleNode(config, plan, facts);
      break;
    case LaunchKind::kStatic:
      PlanStatic(config, plan);
      break;
    case LaunchKind::kElastic:
      PlanElastic(config, plan, facts);
      break;
  }
  FirstRound& round = plan.first_round;
  round.ranks = AssumedRanks(config, round.group_rank, round.group_world_size);
  plan.cpu_bindings = CpuBindingsOf(config, facts);
  plan.warm_pool = WarmPoolOf(config);
  return plan;
}

std::optional<WarmPoolPlan> WarmPoolOf(const elastic::LaunchConfig& config) {
  if (!config.warm_restart || config.run_mode == elastic::RunMode::kNoPython) return std::nullopt;
  WarmPoolPlan pool{config.python, {"torch"}};
  for (const auto& module : config.warm_preload) {
    if (std::find(pool.preload.begin(), pool.preload.end(), module) == pool.preload.end()) {
      pool.preload.push_back(module);
    }
  }
  return pool;
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
