#include "elastic/cpu_binding.h"

#include <algorithm>
#include <set>

#include "common/errors.h"

namespace ddprun::elastic {
namespace {

CpuList Intersect(const CpuList& cpus, const std::set<int>& allowed) {
  CpuList kept;
  for (const int cpu : cpus) {
    if (allowed.count(cpu) != 0) kept.push_back(cpu);
  }
  return kept;
}

std::vector<CpuList> IntersectAll(const std::vector<CpuList>& groups,
                                  const std::set<int>& allowed) {
  std::vector<CpuList> kept;
  for (const CpuList& group : groups) {
    CpuList cpus = Intersect(group, allowed);
    if (!cpus.empty()) kept.push_back(std::move(cpus));
  }
  return kept;
}

// The topology as the launcher may use it: cores and complexes without a CPU of `allowed` go.
CpuTopology Restrict(const CpuTopology& topology, const CpuList& allowed_list) {
  const std::set<int> allowed(allowed_list.begin(), allowed_list.end());
  CpuTopology restricted;
  restricted.gpu_nodes = topology.gpu_nodes;
  for (const NumaNodeCpus& node : topology.nodes) {
    NumaNodeCpus kept{node.os_index, node.package, IntersectAll(node.cores, allowed),
                      IntersectAll(node.core_complexes, allowed)};
    std::sort(kept.cores.begin(), kept.cores.end());
    restricted.nodes.push_back(std::move(kept));
  }
  return restricted;
}

CpuList Union(const std::vector<CpuList>& groups) {
  CpuList all;
  for (const CpuList& group : groups) all.insert(all.end(), group.begin(), group.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

// The rank's node and its place among the ranks (GPUs) that share that node.
struct Placement {
  const NumaNodeCpus* node = nullptr;
  int peers = 1;     // ranks (GPU jobs: every GPU) placed on the node
  int relative = 0;  // this rank's index among them
  int gpu = -1;
};

[[noreturn]] void Refuse(const CpuBindingRequest& request, const std::string& problem) {
  throw UsageError(request.given + ": " + problem);
}

const NumaNodeCpus* FindNode(const CpuTopology& topology, int os_index) {
  for (const NumaNodeCpus& node : topology.nodes) {
    if (node.os_index == os_index) return &node;
  }
  return nullptr;
}

std::string AllowedText(const CpuBindingRequest& request) {
  return "the launcher may use CPUs " + CpuListText(request.allowed);
}

// torchrun's rule: GPU index = local rank; the GPUs sharing its node are every GPU of the
// driver's on that node, in index order.
Placement PlaceByGpu(const CpuTopology& topology, const CpuBindingRequest& request, int rank) {
  const std::vector<int>& gpus = topology.gpu_nodes;
  if (rank >= static_cast<int>(gpus.size())) {
    Refuse(request, "local rank " + std::to_string(rank) + " has no GPU (" +
                        std::to_string(gpus.size()) +
                        " visible); pass --nproc_per_node<=" + std::to_string(gpus.size()) +
                        ", or --nproc_per_node=cpu or CUDA_VISIBLE_DEVICES= for a CPU-only job");
  }
  Placement placement;
  placement.gpu = rank;
  placement.node = FindNode(topology, gpus[rank]);
  if (placement.node == nullptr || placement.node->cores.empty()) {
    Refuse(request, "GPU " + std::to_string(rank) + "'s NUMA node " + std::to_string(gpus[rank]) +
                        " has no CPU for local rank " + std::to_string(rank) + " (" +
                        AllowedText(request) +
                        "); widen the launcher's CPU set (taskset, "
                        "cgroup) or drop --numa-binding");
  }
  placement.peers = static_cast<int>(std::count(gpus.begin(), gpus.end(), gpus[rank]));
  placement.relative = static_cast<int>(std::count(gpus.begin(), gpus.begin() + rank, gpus[rank]));
  return placement;
}

// Beyond torchrun: rank r of n goes to usable node floor(r * nodes / n), so consecutive ranks
// share a node and every node gets floor or ceil of n / nodes ranks.
Placement PlaceCpuOnly(const CpuTopology& topology, const CpuBindingRequest& request, int rank) {
  std::vector<const NumaNodeCpus*> usable;
  for (const NumaNodeCpus& node : topology.nodes) {
    if (!node.cores.empty()) usable.push_back(&node);
  }
  if (usable.empty()) {
    Refuse(request, "no NUMA node has a CPU the launcher may use (" + AllowedText(request) +
                        "); widen its CPU set (taskset, cgroup) or drop --numa-binding");
  }
  const auto node_of = [&](int r) {
    return static_cast<int>(static_cast<long>(r) * static_cast<long>(usable.size()) /
                            request.local_ranks);
  };
  Placement placement;
  placement.node = usable[node_of(rank)];
  placement.peers = 0;
  for (int other = 0; other < request.local_ranks; ++other) {
    if (node_of(other) != node_of(rank)) continue;
    if (other < rank) ++placement.relative;
    ++placement.peers;
  }
  return placement;
}

// Every node whose package is the rank's node's (nodes without a usable CPU add nothing).
CpuList SocketCpus(const CpuTopology& topology, const NumaNodeCpus& node) {
  std::vector<CpuList> cores;
  for (const NumaNodeCpus& other : topology.nodes) {
    if (other.package == node.package)
      cores.insert(cores.end(), other.cores.begin(), other.cores.end());
  }
  return Union(cores);
}

// The node's cores split evenly in order; the lowest relative indices get one more each when
// the split is uneven (torch's rule).
CpuList ExclusiveCpus(const CpuBindingRequest& request, const Placement& placement) {
  const int cores = static_cast<int>(placement.node->cores.size());
  const int per = cores / placement.peers;
  if (per < 1) {
    Refuse(request, "NUMA node " + std::to_string(placement.node->os_index) + " has " +
                        std::to_string(cores) + " physical core" + (cores == 1 ? "" : "s") +
                        " for " + std::to_string(placement.peers) +
                        (request.gpu_job ? " GPUs" : " local ranks") + " (" + AllowedText(request) +
                        "); use --numa-binding=node, or fewer ranks per node");
  }
  const int extra = cores % placement.peers;
  const int first = placement.relative * per + std::min(placement.relative, extra);
  const int count = per + (placement.relative < extra ? 1 : 0);
  const auto begin = placement.node->cores.begin() + first;
  return Union(std::vector<CpuList>(begin, begin + count));
}

// The node's last-level-cache groups, largest first (ties: lowest CPU first); relative index
// modulo their number, so ranks share a group when there are more ranks than groups.
CpuList CoreComplexCpus(const CpuBindingRequest& request, const Placement& placement) {
  std::vector<CpuList> groups = placement.node->core_complexes;
  if (groups.empty()) {
    Refuse(request, "NUMA node " + std::to_string(placement.node->os_index) +
                        " has no cache group with an allowed CPU; use --numa-binding=node");
  }
  std::sort(groups.begin(), groups.end());
  std::stable_sort(groups.begin(), groups.end(),
                   [](const CpuList& a, const CpuList& b) { return a.size() > b.size(); });
  return groups[placement.relative % groups.size()];
}

CpuList CpusFor(const CpuTopology& topology, const CpuBindingRequest& request,
                const Placement& placement) {
  switch (request.mode) {
    case CpuBindingMode::kNode:
      return Union(placement.node->cores);
    case CpuBindingMode::kSocket:
      return SocketCpus(topology, *placement.node);
    case CpuBindingMode::kExclusive:
      return ExclusiveCpus(request, placement);
    case CpuBindingMode::kCoreComplex:
      return CoreComplexCpus(request, placement);
  }
  return {};
}

}  // namespace

std::optional<CpuBindingMode> CpuBindingModeNamed(const std::string& name) {
  if (name == "node") return CpuBindingMode::kNode;
  if (name == "socket") return CpuBindingMode::kSocket;
  if (name == "exclusive") return CpuBindingMode::kExclusive;
  if (name == "core-complex") return CpuBindingMode::kCoreComplex;
  return std::nullopt;
}

bool BindsByGpu(const std::string& nproc_per_node_text, int gpu_count) {
  return nproc_per_node_text != "cpu" && gpu_count > 0;
}

std::vector<CpuBinding> PlanCpuBinding(const CpuTopology& topology,
                                       const CpuBindingRequest& request) {
  const CpuTopology usable = Restrict(topology, request.allowed);
  std::vector<CpuBinding> bindings;
  for (int rank = 0; rank < request.local_ranks; ++rank) {
    const Placement placement =
        request.gpu_job ? PlaceByGpu(usable, request, rank) : PlaceCpuOnly(usable, request, rank);
    bindings.push_back(
        {CpusFor(usable, request, placement), placement.node->os_index, placement.gpu});
  }
  return bindings;
}

std::string CpuListText(const CpuList& cpus) {
  std::string text;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t last = i;
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) ++last;
    text += (text.empty() ? "" : ",") + std::to_string(cpus[i]);
    if (last > i) text += "-" + std::to_string(cpus[last]);
    i = last + 1;
  }
  return text;
}

}  // namespace ddprun::elastic
