#include "launcher/dry_run.h"

#include <set>

#include "common/duration.h"
#include "common/env_names.h"
#include "common/host_port.h"
#include "launcher/launch_setup.h"
#include "launcher/machine_facts_reader.h"

namespace ddprun::launcher {
namespace {

using elastic::LaunchConfig;

constexpr const char* kAtRendezvous = "<chosen at rendezvous>";
constexpr const char* kAtLaunch = "<chosen at launch>";
constexpr const char* kOwnStore =
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: worker rank 0 serves the workers' store on a port "
    "free when the round forms (TORCHELASTIC_USE_AGENT_STORE=False)";
constexpr const char* kShareStoreStatic =
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 has no effect on the static rendezvous (as under "
    "torchrun): the workers use node 0's store at master_port";

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

using backend::Known;
using backend::LaunchKind;
using backend::LaunchPlan;

// A value of the first round as the plan knows it.
std::string Shown(const std::string& value, Known known) {
  switch (known) {
    case Known::kNow:
      return value;
    case Known::kAtLaunch:
      return kAtLaunch;
    case Known::kAtRendezvous:
      return kAtRendezvous;
  }
  return value;
}

std::string MasterAddrShown(const LaunchPlan& plan) {
  return Shown(plan.first_round.master_addr, plan.first_round.master_addr_known);
}

std::string MasterPortShown(const LaunchPlan& plan) {
  return Shown(std::to_string(plan.first_round.master_port), plan.first_round.master_port_known);
}

using Notes = std::vector<std::string>;

void EtcdNotes(const store::etcd::EtcdStoreOptions& etcd, const LaunchPlan& plan, Notes& notes) {
  std::string members;
  for (const HostPort& member : etcd.client.endpoints) {
    members += (members.empty() ? "" : ", ") + member.ToString();
  }
  notes.push_back("the rendezvous store is etcd (v3 API, " +
                  std::string(etcd.client.tls ? "https" : "http") + ") at " + members +
                  ", keys under " + etcd.prefix + "; it never moves");
  notes.push_back("the round's group rank 0 agent serves the workers' store");
  if (plan.etcd_v2_note) notes.push_back(*plan.etcd_v2_note);
}

void C10dNotes(const LaunchPlan& plan, Notes& notes) {
  const std::vector<HostPort>& endpoints = plan.rendezvous_endpoints;
  const std::string first = endpoints.front().ToString();
  notes.push_back(plan.serves_rendezvous_store
                      ? "this node serves the rendezvous store at " + first +
                            " (a client if the port is taken)"
                      : "this node is a client of the rendezvous store at " + first);
  notes.push_back(
      "if the store's host is lost, the store moves to a member of the last round, on port " +
      std::to_string(endpoints.front().port.value_or(0)) +
      (endpoints.size() > 1 ? "; a node without a round tries the " +
                                  std::to_string(endpoints.size()) + " endpoints in order"
                            : ""));
}

// Several nodes: what the plan assumed, and what the rendezvous decides.
void MultiNodeNotes(const LaunchConfig& config, const LaunchPlan& plan, Notes& notes) {
  const int nodes = plan.first_round.group_world_size;
  if (plan.min_nodes != plan.max_nodes) {
    notes.push_back("nnodes " + std::to_string(plan.min_nodes) + ":" +
                    std::to_string(plan.max_nodes) + ": shown with " + std::to_string(nodes) +
                    " nodes");
  }
  if (plan.first_round.ranks_assumed) {
    notes.push_back("ranks as torchrun assigns them when every node runs nproc_per_node=" +
                    std::to_string(config.nproc_per_node) +
                    " workers (other nodes' counts are not known here)");
  }
  if (!plan.first_round.use_agent_store && plan.auth) {
    notes.push_back("authenticated rendezvous (token from " + plan.auth_source +
                    "): the workers serve their own store, at a port node 0 picks");
  }

  if (plan.kind != LaunchKind::kElastic) return;
  notes.push_back("rdzv_backend " + config.rdzv_backend +
                  ": the rendezvous decides GROUP_RANK (shown as " +
                  std::to_string(plan.first_round.group_rank) + "), MASTER_ADDR and MASTER_PORT");
  if (plan.etcd) {
    EtcdNotes(*plan.etcd, plan, notes);
  } else {
    C10dNotes(plan, notes);
  }
}

Notes PlanNotes(const LaunchConfig& config, const LaunchPlan& plan) {
  Notes notes;
  if (plan.kind == LaunchKind::kSingleNode) {
    if (plan.unused_token_note) notes.push_back(*plan.unused_token_note);
  } else {
    MultiNodeNotes(config, plan, notes);
  }
  if (plan.share_store_disabled) {  // static rendezvous: the workers keep the agents' store
    const bool is_static =
        plan.kind == LaunchKind::kStatic ||
        (plan.kind == LaunchKind::kSingleNode && plan.first_round.use_agent_store);
    notes.push_back(is_static ? kShareStoreStatic : kOwnStore);
  }
  if (plan.store_bind) {
    notes.push_back("the stores this node serves bind " + *plan.store_bind + " (store_bind)");
  }
  return notes;
}

std::string LogDirText(const LaunchConfig& config) {
  const std::string root =
      config.log_dir ? *config.log_dir : "<temporary directory>/torchelastic_XXXXXX";
  return std::string(kDryRunLogDir) + " = " + root + "/" + config.rdzv_id +
         "_XXXXXX, created at launch";
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

// Both timeouts, whether the first is learned, and when the job stops for hangs before progress.
void PrintHangDetection(std::ostream& out, const elastic::WorkerSpec& spec) {
  if (!spec.hang.On()) {
    Field(out, "hang_timeout", "off");
  } else {
    const std::string hang = elastic::DescribeHangTimeout(spec.hang);
    Field(out, "hang_timeout",
          spec.hang.learn ? "learned: " + hang : hang + " between signs of progress (fixed)");
    Field(out, "hang_startup_timeout",
          DurationText(spec.hang.startup) + " before a rank's first sign of progress");
  }
  if (spec.hang.On() || !spec.timer_file.empty()) {
    Field(out, "max_no_progress_hangs",
          spec.max_no_progress_hangs == 0
              ? std::string("0 (restarts after hangs before progress until none is left)")
              : std::to_string(spec.max_no_progress_hangs) +
                    " hangs in a row before progress past start-up stop the job");
  }
}

std::string NumaBindingText(const std::string& mode, const elastic::WorkerSpec& spec) {
  const bool by_gpu = !spec.cpu_binding.empty() && spec.cpu_binding.front().gpu >= 0;
  return mode + (by_gpu ? " (GPU job: local rank r by GPU r's NUMA node)"
                        : " (CPU-only job: local ranks spread over the NUMA nodes)");
}

// Which workers the pool forks, and what it imports (how long that takes is logged at launch).
std::string WarmRestartText(const backend::WarmPoolPlan& pool) {
  std::string modules;
  for (const auto& module : pool.preload) modules += (modules.empty() ? "" : ",") + module;
  return "on: attempt 0 is exec'd while " + pool.python + " imports " + modules +
         " at idle priority" +
         "; every later attempt's workers are forked from it (exec'd if it is not ready or "
         "fails)";
}

void PrintConfig(std::ostream& out, const LaunchConfig& config, const LaunchPlan& plan,
                 const elastic::WorkerSpec& spec) {
  out << "ddprun dry run: nothing is launched\n";
  PrintPreset(out, config);
  Field(out, "nnodes", std::to_string(plan.min_nodes) + ":" + std::to_string(plan.max_nodes));
  Field(out, "nproc_per_node", std::to_string(config.nproc_per_node));
  Field(out, "node_rank", std::to_string(config.node_rank));
  Field(out, "rdzv_backend", config.rdzv_backend);
  Field(out, "rdzv_endpoint", config.rdzv_endpoint);
  Field(out, "run_id", config.rdzv_id);
  const bool at_rendezvous = plan.first_round.master_addr_known == Known::kAtRendezvous;
  const std::string master = MasterAddrShown(plan);
  Field(out, "master", at_rendezvous ? master : master + ":" + MasterPortShown(plan));
  Field(out, "max_restarts", std::to_string(config.max_restarts));
  PrintHangDetection(out, spec);
  if (!spec.timer_file.empty()) Field(out, "file_timer", spec.timer_file);
  if (config.numa_binding) Field(out, "numa_binding", NumaBindingText(*config.numa_binding, spec));
  if (plan.warm_pool) Field(out, "warm_restart", WarmRestartText(*plan.warm_pool));
  if (!config.warm_restart_skipped.empty()) {
    Field(out, "warm_restart", "off: " + config.warm_restart_skipped);
  }
  if (config.health_port) {
    const int port_number = *config.health_port;
    const std::string port = port_number == 0 ? "0 (ephemeral)" : std::to_string(port_number);
    Field(out, "health", config.health_addr + ":" + port + ", GET /healthz and /metrics");
  }
  Field(out, "role", config.role);
  Field(out, "log_dir", LogDirText(config));
  const elastic::RankAssignment& ranks = plan.first_round.ranks;
  const int first = ranks.base_global_rank;
  const int last = first + config.nproc_per_node - 1;
  Field(out, "ranks",
        std::to_string(first) + (last > first ? "-" + std::to_string(last) : "") +
            " of world size " + std::to_string(ranks.global_world_size));
  for (const auto& note : PlanNotes(config, plan)) Field(out, "note", note);
}

std::string ShownValue(const std::string& name, const std::string& value, const LaunchPlan& plan) {
  if (name == env::kMasterAddr) return MasterAddrShown(plan);
  if (name == env::kMasterPort) return MasterPortShown(plan);
  return value;
}

// "  cpus: 0-3 (NUMA node 0, GPU 0)": what --numa-binding pins the worker to.
void PrintCpus(std::ostream& out, const elastic::CpuBinding& binding) {
  if (binding.cpus.empty()) return;
  out << "  cpus: " << elastic::CpuListText(binding.cpus) << " (NUMA node " << binding.numa_node
      << (binding.gpu >= 0 ? ", GPU " + std::to_string(binding.gpu) : std::string()) << ")\n";
}

void PrintWorker(std::ostream& out, const elastic::WorkerLaunch& worker,
                 const elastic::Environment& original_env, const LaunchPlan& plan) {
  out << "worker local_rank=" << worker.local_rank << " rank=" << worker.global_rank
      << "\n  command:";
  for (const auto& arg : worker.argv) out << " " << Quote(arg);
  out << "\n";
  if (worker.warm) {
    out << "  warm (later attempts): runpy." << (worker.warm->module ? "run_module" : "run_path")
        << "(" << Quote(worker.warm->target) << "), sys.argv:";
    for (const auto& arg : worker.warm->argv) out << " " << Quote(arg);
    out << "\n";
  }
  PrintCpus(out, worker.cpu_binding);
  for (const auto& [name, value] : worker.env) {
    const auto inherited = original_env.find(name);
    const bool changed = inherited == original_env.end() || inherited->second != value;
    if (changed || WorkerVariables().count(name) != 0) {
      out << "  env: " << name << "=" << ShownValue(name, value, plan) << "\n";
    }
  }
}

// MakeWorkerSpec's, with a timer file the launch would draw at random shown as such.
elastic::WorkerSpec DryRunSpec(const LaunchConfig& config, const LaunchPlan& plan,
                               const elastic::Environment& env) {
  elastic::WorkerSpec spec = MakeWorkerSpec(config, plan, env, kDryRunLogDir);
  const auto given = env.find(env::kTimerFile);
  if (!spec.timer_file.empty() && (given == env.end() || given->second.empty())) {
    spec.timer_file = kDryRunTimerFile;
  }
  return spec;
}

}  // namespace

void PrintDryRun(std::ostream& out, const LaunchConfig& config, const LaunchPlan& plan,
                 const elastic::WorkerSpec& spec, const elastic::Environment& original_env) {
  const elastic::AttemptLaunch attempt = backend::FirstAttempt(plan, spec);
  PrintConfig(out, config, plan, spec);
  for (const auto& worker : attempt.workers) PrintWorker(out, worker, original_env, plan);
  out.flush();
}

void PrintDryRun(std::ostream& out, const LaunchConfig& config,
                 const elastic::Environment& original_env,
                 const elastic::Environment& launcher_env) {
  const LaunchPlan plan = backend::PlanLaunch(config, ReadMachineFacts(config));
  PrintDryRun(out, config, plan, DryRunSpec(config, plan, launcher_env), original_env);
}

int RunDryRun(std::ostream& out, const LaunchConfig& config, const LaunchPlan& plan,
              const elastic::Environment& launcher_env) {
  PrintDryRun(out, config, plan, DryRunSpec(config, plan, launcher_env), CurrentEnvironment());
  return 0;
}

}  // namespace ddprun::launcher
