#include "launcher/dry_run.h"

#include "elastic/rank_assignment.h"

namespace ddprun::launcher {
namespace {

std::string Quote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t\n'\"\\$`") == std::string::npos) return arg;
  std::string out = "'";
  for (const char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

void PrintDryRun(std::ostream& out, const elastic::LaunchConfig& config,
                 const elastic::WorkerSpec& spec, const rendezvous::RendezvousInfo& master) {
  out << "ddprun dry run: nothing is launched\n"
      << "  nnodes           : " << config.min_nodes << ":" << config.max_nodes << "\n"
      << "  nproc_per_node   : " << config.nproc_per_node << "\n"
      << "  node_rank        : " << config.node_rank << "\n"
      << "  rdzv_backend     : " << config.rdzv_backend << "\n"
      << "  rdzv_endpoint    : " << config.rdzv_endpoint << "\n"
      << "  run_id           : " << config.rdzv_id << "\n"
      << "  master           : " << master.master_addr << ":" << master.master_port << "\n"
      << "  max_restarts     : " << config.max_restarts << "\n"
      << "  role             : " << config.role << "\n";
  elastic::WorkerGroupEnv group;
  group.role = spec.role;
  group.local_world_size = spec.local_world_size;
  group.group_rank = master.group_rank;
  group.group_world_size = master.group_world_size;
  group.ranks = elastic::AssignRanks({{spec.role, master.group_rank, spec.local_world_size}}).front();
  group.master_addr = master.master_addr;
  group.master_port = master.master_port;
  group.max_restarts = spec.max_restarts;
  group.run_id = config.rdzv_id;
  group.use_agent_store = master.use_agent_store;
  group.virtual_local_rank = spec.virtual_local_rank;
  const elastic::AttemptLaunch attempt = elastic::PlanAttempt(spec, group);
  for (const auto& worker : attempt.workers) {
    out << "worker local_rank=" << worker.local_rank << " rank=" << worker.global_rank << "\n  command:";
    for (const auto& arg : worker.argv) out << " " << Quote(arg);
    out << "\n";
    for (const auto& [name, value] : worker.env) {
      const auto inherited = spec.base_env.find(name);
      if (inherited == spec.base_env.end() || inherited->second != value) {
        out << "  env: " << name << "=" << value << "\n";
      }
    }
  }
}

}  // namespace ddprun::launcher
