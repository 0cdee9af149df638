// The machine's CPU topology for --numa-binding, read with hwloc (the real machine, or for
// tests a synthetic description or an XML export), the launcher's own CPUs (sched_getaffinity:
// cgroups, taskset) and a PCI device's NUMA node from sysfs. The decision is
// elastic/cpu_binding's; this file only reads.
#pragma once
#include <optional>
#include <string>

#include "elastic/cpu_binding.h"

namespace ddprun::launcher::process {

struct TopologySource {
  enum class Kind { kThisMachine, kSynthetic, kXml } kind = Kind::kThisMachine;
  std::string text;  // kSynthetic: "pack:2 numa:1 l3:2 core:4 pu:2"; kXml: a file's path
};

// NUMA nodes with their package, cores and core complexes (the cores under one L3 cache, else
// one L2, else each core alone), by OS CPU number; gpu_nodes stays empty. Throws SystemError
// naming the hwloc call that failed.
elastic::CpuTopology ReadCpuTopology(const TopologySource& source = {});

// The CPUs this process may run on (sched_getaffinity), ascending. Throws SystemError.
elastic::CpuList AllowedCpus();

// The NUMA node of PCI device `bus_id` ("0000:3B:00.0"; the CUDA driver's 8-digit domain is
// cut to 4 digits, letters lowered) from /sys/bus/pci/devices/<id>/numa_node: -1 (no affinity)
// is 0, as torch reads it; none when the file cannot be read.
std::optional<int> PciNumaNode(const std::string& bus_id,
                               const std::string& sysfs = "/sys/bus/pci/devices");

}  // namespace ddprun::launcher::process
