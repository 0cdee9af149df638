#include "launcher/process/hwloc_topology.h"

#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <fstream>
#include <memory>

#include "common/errors.h"

namespace ddprun::launcher::process {
namespace {

using elastic::CpuList;

struct TopologyCloser {
  void operator()(hwloc_topology_t topology) const { hwloc_topology_destroy(topology); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyCloser>;

void Check(int result, const std::string& call, const TopologySource& source) {
  if (result == 0) return;
  const std::string what = source.text.empty() ? call : call + " " + source.text;
  throw SystemError(ErrnoMessage(what, errno) + " — drop --numa-binding");
}

Topology Load(const TopologySource& source) {
  hwloc_topology_t raw = nullptr;
  Check(hwloc_topology_init(&raw), "hwloc_topology_init", {});
  Topology topology(raw);
  if (source.kind == TopologySource::Kind::kSynthetic) {
    Check(hwloc_topology_set_synthetic(raw, source.text.c_str()), "hwloc_topology_set_synthetic",
          source);
  } else if (source.kind == TopologySource::Kind::kXml) {
    Check(hwloc_topology_set_xml(raw, source.text.c_str()), "hwloc_topology_set_xml", source);
  }
  Check(hwloc_topology_load(raw), "hwloc_topology_load", source);
  return topology;
}

CpuList CpusOf(hwloc_const_cpuset_t set) {
  CpuList cpus;
  for (int cpu = hwloc_bitmap_first(set); cpu >= 0; cpu = hwloc_bitmap_next(set, cpu)) {
    cpus.push_back(cpu);
  }
  return cpus;
}

// The CPUs of every object of `type` within `node`'s CPUs, one list per object.
std::vector<CpuList> GroupsIn(hwloc_topology_t topology, hwloc_obj_type_t type, hwloc_obj_t node) {
  std::vector<CpuList> groups;
  hwloc_bitmap_t within = hwloc_bitmap_alloc();
  for (hwloc_obj_t obj = nullptr; (obj = hwloc_get_next_obj_by_type(topology, type, obj));) {
    hwloc_bitmap_and(within, obj->cpuset, node->cpuset);
    if (!hwloc_bitmap_iszero(within)) groups.push_back(CpusOf(within));
  }
  hwloc_bitmap_free(within);
  return groups;
}

bool Has(hwloc_topology_t topology, hwloc_obj_type_t type) {
  return hwloc_get_nbobjs_by_type(topology, type) > 0;
}

elastic::NumaNodeCpus NodeOf(hwloc_topology_t topology, hwloc_obj_t node) {
  elastic::NumaNodeCpus cpus;
  cpus.os_index = static_cast<int>(node->os_index);
  const hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(topology, HWLOC_OBJ_PACKAGE, node);
  cpus.package = package != nullptr ? static_cast<int>(package->logical_index) : 0;
  const hwloc_obj_type_t core = Has(topology, HWLOC_OBJ_CORE) ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  cpus.cores = GroupsIn(topology, core, node);
  const hwloc_obj_type_t complex = Has(topology, HWLOC_OBJ_L3CACHE)   ? HWLOC_OBJ_L3CACHE
                                   : Has(topology, HWLOC_OBJ_L2CACHE) ? HWLOC_OBJ_L2CACHE
                                                                      : core;
  cpus.core_complexes = GroupsIn(topology, complex, node);
  return cpus;
}

std::string NormalisedBusId(std::string id) {
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto colon = id.find(':');
  if (colon == 8 && id.compare(0, 4, "0000") == 0) id.erase(0, 4);  // CUDA's 8-digit domain
  return id;
}

}  // namespace

elastic::CpuTopology ReadCpuTopology(const TopologySource& source) {
  const Topology topology = Load(source);
  elastic::CpuTopology cpus;
  for (hwloc_obj_t node = nullptr;
       (node = hwloc_get_next_obj_by_type(topology.get(), HWLOC_OBJ_NUMANODE, node));) {
    cpus.nodes.push_back(NodeOf(topology.get(), node));
  }
  return cpus;
}

CpuList AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    throw SystemError(ErrnoMessage("sched_getaffinity", errno) + " — drop --numa-binding");
  }
  CpuList cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

std::optional<int> PciNumaNode(const std::string& bus_id, const std::string& sysfs) {
  std::ifstream file(sysfs + "/" + NormalisedBusId(bus_id) + "/numa_node");
  int node = 0;
  if (!(file >> node)) return std::nullopt;
  return node < 0 ? 0 : node;
}

}  // namespace ddprun::launcher::process
