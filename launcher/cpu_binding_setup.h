// --numa-binding on this machine: the launcher's CPUs (sched_getaffinity), the topology
// (hwloc), each GPU's NUMA node (the CUDA driver's PCI bus id, then sysfs), and the decision of
// elastic::PlanCpuBinding. Made once, at plan time (MakeWorkerSpec), for the run and --dry-run.
#pragma once
#include <vector>

#include "elastic/cpu_binding.h"
#include "elastic/launch_config.h"

namespace ddprun::launcher {

// Every local rank's binding; empty without --numa-binding. A GPU job (elastic::BindsByGpu)
// whose GPUs' NUMA nodes cannot be found, and every binding that cannot be satisfied, is a
// UsageError of one line.
std::vector<elastic::CpuBinding> PlanWorkerCpus(const elastic::LaunchConfig& config);

}  // namespace ddprun::launcher
