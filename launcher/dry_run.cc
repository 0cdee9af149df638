#include "launcher/dry_run.h"

#include <algorithm>
#include <set>

#include "common/env_names.h"
#include "elastic/attempt_plan.h"
#include "elastic/rank_assignment.h"
#include "launcher/backend/elastic_backend.h"
#include "launcher/launch_setup.h"
#include "launcher/backend/master_endpoint.h"

namespace ddprun::launcher {
namespace {

using elastic::LaunchConfig;

// The run's log directory is created at launch with a random suffix: shown as this.
constexpr const char* kLogDir = "<log_dir>";
constexpr const char* kAtRendezvous = "<chosen at rendezvous>";
constexpr const char* kAtLaunch = "<chosen at launch>";

// What torchrun sets in every worker: shown even when the inherited value was the same.
const std::set<std::string>& WorkerVariables() {
  static const std::set<std::string> names{
      env::kLocalRank,     env::kRank,           env::kGroupRank,     env::kRoleRank,
      env::kRoleName,      env::kLocalWorldSize, env::kWorldSize,     env::kGroupWorldSize,
      env::kRoleWorldSize, env::kMasterAddr,     env::kMasterPort,    env::kRestartCount,
      env::kMaxRestarts,   env::kRunId,          env::kUseAgentStore, env::kErrorFile};
  return names;
}

std::string Quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t\n'\"\\$`") == std::string::npos) return arg;
  std::string out = "'";
  for (const char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void Field(std::ostream& out, const std::string& label, const std::string& value) {
  out << "  " << label << std::string(label.size() < 17 ? 17 - label.size() : 0, ' ') << ": "
      << value << "\n";
}

// This node's round as the launcher would get it, with what the dry run had to assume.
struct PlannedRound {
  rendezvous::RendezvousInfo info;
  elastic::WorkerGroupEnv group;
  std::string master_addr_shown;
  std::string master_port_shown;
  std::vector<std::string> notes;
};

constexpr const char* kOneNodeToken =
    "one node: no rendezvous between agents to authenticate; the token is not used";

bool IsStatic(const LaunchConfig& config) {
  return config.rdzv_backend == "static" && !config.standalone;
}

void PlanSingleNode(const LaunchConfig& config, PlannedRound& round) {
  const rendezvous::RendezvousInfo master = backend::PlannedMasterEndpoint(config);
  round.info = master;
  round.master_addr_shown = master.master_addr;
  round.master_port_shown =
      master.master_port == 0 ? kAtLaunch : std::to_string(master.master_port);
  if (config.rdzv_settings.auth) round.notes.push_back(kOneNodeToken);
}

void PlanEtcd(const LaunchConfig& config, PlannedRound& round) {
  const store::etcd::EtcdStoreOptions etcd = backend::EtcdOptions(config);
  std::string members;
  for (const HostPort& member : etcd.client.endpoints) {
    members += (members.empty() ? "" : ", ") + member.ToString();
  }
  const auto& settings = config.rdzv_settings;
  round.notes.push_back("the rendezvous store is etcd (v3 API, " +
                        std::string(settings.etcd_tls ? "https" : "http") + ") at " + members +
                        ", keys under " + etcd.prefix + "; it never moves");
  round.notes.push_back("the round's group rank 0 agent serves the workers' store");
  if (const auto note = backend::EtcdV2Note(config)) round.notes.push_back(*note);
}

// Static: node_rank of max_nodes, master_addr:master_port, node 0's agent store. Dynamic
// backends decide the group rank and the master at rendezvous; node_rank stands in.
void PlanMultiNode(const LaunchConfig& config, PlannedRound& round) {
  const int nodes = config.max_nodes;  // the CLI has checked node_rank < nodes for static
  round.info.group_rank = config.node_rank < nodes ? config.node_rank : 0;
  round.info.group_world_size = nodes;
  if (config.min_nodes != config.max_nodes) {
    round.notes.push_back("nnodes " + std::to_string(config.min_nodes) + ":" +
                          std::to_string(nodes) + ": shown with " + std::to_string(nodes) +
                          " nodes");
  }
  round.notes.push_back("ranks as torchrun assigns them when every node runs nproc_per_node=" +
                        std::to_string(config.nproc_per_node) +
                        " workers (other nodes' counts are not known here)");
  const bool authenticated = static_cast<bool>(config.rdzv_settings.auth);
  if (authenticated) {
    round.notes.push_back("authenticated rendezvous (token from " +
                          config.rdzv_settings.auth_source +
                          "): the workers serve their own store, at a port node 0 picks");
  }
  if (IsStatic(config)) {
    round.info.master_addr = round.master_addr_shown = config.master_addr;
    round.info.master_port = config.master_port;
    round.master_port_shown = authenticated ? kAtRendezvous : std::to_string(round.info.master_port);
    round.info.use_agent_store = !authenticated;
    return;
  }
  round.master_addr_shown = round.master_port_shown = kAtRendezvous;
  round.info.use_agent_store = !authenticated;
  round.notes.push_back("rdzv_backend " + config.rdzv_backend +
                        ": the rendezvous decides GROUP_RANK (shown as " +
                        std::to_string(round.info.group_rank) + "), MASTER_ADDR and MASTER_PORT");
  if (config.Etcd()) {
    PlanEtcd(config, round);
  } else if (config.Elastic()) {
    const std::vector<HostPort> endpoints = backend::RendezvousEndpoints(config);
    const std::string first = endpoints.front().ToString();
    round.notes.push_back(backend::ServesRendezvousStore(config)
                              ? "this node serves the rendezvous store at " + first +
                                    " (a client if the port is taken)"
                              : "this node is a client of the rendezvous store at " + first);
    round.notes.push_back(
        "if the store's host is lost, the store moves to a member of the last round, on port " +
        std::to_string(endpoints.front().port.value_or(0)) +
        (endpoints.size() > 1 ? "; a node without a round tries the " +
                                    std::to_string(endpoints.size()) + " endpoints in order"
                              : ""));
  }
}

PlannedRound PlanRound(const LaunchConfig& config, const elastic::WorkerSpec& spec) {
  PlannedRound round;
  if (config.max_nodes > 1 || config.Etcd()) {
    PlanMultiNode(config, round);
  } else {
    PlanSingleNode(config, round);
  }
  if (const auto& bind = config.rdzv_settings.store_bind) {
    round.notes.push_back("the stores this node serves bind " + *bind + " (store_bind)");
  }
  std::vector<elastic::RoleInfo> nodes;
  for (int rank = 0; rank < round.info.group_world_size; ++rank) {
    nodes.push_back({spec.role, rank, spec.local_world_size});
  }
  const elastic::RankAssignment ranks = elastic::AssignRanks(nodes).at(round.info.group_rank);
  round.group = elastic::MakeGroupEnv(spec, round.info, ranks, 0, config.rdzv_id);
  return round;
}

std::string LogDirText(const LaunchConfig& config) {
  const std::string root =
      config.log_dir ? *config.log_dir : "<temporary directory>/torchelastic_XXXXXX";
  return std::string(kLogDir) + " = " + root + "/" + config.rdzv_id + "_XXXXXX, created at launch";
}

void PrintPreset(std::ostream& out, const LaunchConfig& config) {
  if (config.env_preset.empty()) return;
  Field(out, "env_preset", config.env_preset);
  for (const auto& setting : config.env_preset_settings) {
    out << "    --" << setting.option << "=" << setting.value << " (" << setting.variable << ")";
    if (!setting.overridden_by.empty()) out << ", overridden by " << setting.overridden_by;
    out << "\n";
  }
}

void PrintConfig(std::ostream& out, const LaunchConfig& config, const PlannedRound& round) {
  out << "ddprun dry run: nothing is launched\n";
  PrintPreset(out, config);
  Field(out, "nnodes", std::to_string(config.min_nodes) + ":" + std::to_string(config.max_nodes));
  Field(out, "nproc_per_node", std::to_string(config.nproc_per_node));
  Field(out, "node_rank", std::to_string(config.node_rank));
  Field(out, "rdzv_backend", config.rdzv_backend);
  Field(out, "rdzv_endpoint", config.rdzv_endpoint);
  Field(out, "run_id", config.rdzv_id);
  const bool at_rendezvous = round.master_addr_shown == kAtRendezvous;
  Field(out, "master",
        at_rendezvous ? round.master_addr_shown
                      : round.master_addr_shown + ":" + round.master_port_shown);
  Field(out, "max_restarts", std::to_string(config.max_restarts));
  Field(out, "role", config.role);
  Field(out, "log_dir", LogDirText(config));
  const int first = round.group.ranks.base_global_rank;
  const int last = first + config.nproc_per_node - 1;
  Field(out, "ranks",
        std::to_string(first) + (last > first ? "-" + std::to_string(last) : "") +
            " of world size " + std::to_string(round.group.ranks.global_world_size));
  for (const auto& note : round.notes) Field(out, "note", note);
}

std::string ShownValue(const std::string& name, const std::string& value,
                       const PlannedRound& round) {
  if (name == env::kMasterAddr) return round.master_addr_shown;
  if (name == env::kMasterPort) return round.master_port_shown;
  return value;
}

void PrintWorker(std::ostream& out, const elastic::WorkerLaunch& worker,
                 const elastic::Environment& original_env, const PlannedRound& round) {
  out << "worker local_rank=" << worker.local_rank << " rank=" << worker.global_rank
      << "\n  command:";
  for (const auto& arg : worker.argv) out << " " << Quote(arg);
  out << "\n";
  for (const auto& [name, value] : worker.env) {
    const auto inherited = original_env.find(name);
    const bool changed = inherited == original_env.end() || inherited->second != value;
    if (changed || WorkerVariables().count(name) != 0) {
      out << "  env: " << name << "=" << ShownValue(name, value, round) << "\n";
    }
  }
}

}  // namespace

void PrintDryRun(std::ostream& out, const LaunchConfig& config,
                 const elastic::Environment& original_env,
                 const elastic::Environment& launcher_env) {
  const elastic::WorkerSpec spec = MakeWorkerSpec(config, launcher_env, kLogDir);
  const PlannedRound round = PlanRound(config, spec);
  const elastic::AttemptLaunch attempt = elastic::PlanAttempt(spec, round.group);
  PrintConfig(out, config, round);
  for (const auto& worker : attempt.workers) PrintWorker(out, worker, original_env, round);
  out.flush();
}

int RunDryRun(std::ostream& out, const LaunchConfig& config,
              const elastic::Environment& launcher_env) {
  PrintDryRun(out, config, CurrentEnvironment(), launcher_env);
  return 0;
}

}  // namespace ddprun::launcher
