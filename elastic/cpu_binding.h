// --numa-binding as pure policy: from a machine's CPU topology, the CPUs the launcher may use,
// the mode and the local world size, the CPUs each local rank is pinned to (sched_setaffinity
// between fork and exec). GPU jobs follow torchrun's torch/numa/binding.py (GPU index = local
// rank); CPU-only jobs, which torchrun cannot bind, spread the ranks over the NUMA nodes in
// blocks. What cannot be satisfied is a UsageError of one line. Reads nothing from the system.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace ddprun::elastic {

using CpuList = std::vector<int>;  // OS CPU numbers (as in Cpus_allowed_list), ascending

// One NUMA node and the CPUs under it, by OS number.
struct NumaNodeCpus {
  int os_index = 0;                     // N of /sys/devices/system/node/nodeN
  int package = 0;                      // the socket it is in
  std::vector<CpuList> cores;           // each physical core's hardware threads
  std::vector<CpuList> core_complexes;  // each last-level-cache group's CPUs within this node
};

struct CpuTopology {
  std::vector<NumaNodeCpus> nodes;
  std::vector<int> gpu_nodes;  // GPU index (as the driver numbers them) -> its NUMA node
};

enum class CpuBindingMode { kNode, kSocket, kExclusive, kCoreComplex };

// "node", "socket", "exclusive", "core-complex"; none for anything else.
std::optional<CpuBindingMode> CpuBindingModeNamed(const std::string& name);

struct CpuBindingRequest {
  CpuBindingMode mode = CpuBindingMode::kNode;
  std::string given = "--numa-binding=node";  // how it was given, for messages
  int local_ranks = 1;
  bool gpu_job = false;  // local rank r uses GPU r (topology.gpu_nodes)
  CpuList allowed;       // the launcher's own CPUs (sched_getaffinity)
};

// Where one local rank runs; empty cpus: not bound.
struct CpuBinding {
  CpuList cpus;
  int numa_node = -1;
  int gpu = -1;  // the GPU it was placed by; -1: a CPU-only job
  bool operator==(const CpuBinding&) const = default;
};

// A GPU job when --nproc_per_node is not "cpu" and the driver reports at least one GPU.
bool BindsByGpu(const std::string& nproc_per_node_text, int gpu_count);

// Each local rank's binding (index = local rank). Throws UsageError naming the mode, the
// problem and the fix.
std::vector<CpuBinding> PlanCpuBinding(const CpuTopology& topology,
                                       const CpuBindingRequest& request);

// "0-3,8,10-11" (the kernel's list format); "" for none.
std::string CpuListText(const CpuList& cpus);

}  // namespace ddprun::elastic
