#include "launcher/cpu_binding_setup.h"

#include "cli/nproc.h"
#include "common/errors.h"
#include "launcher/process/hwloc_topology.h"

namespace ddprun::launcher {
namespace {

// Each visible GPU's NUMA node, by index; empty for a CPU-only job.
std::vector<int> GpuNodes(const elastic::LaunchConfig& config, const std::string& given) {
  if (config.nproc_per_node_text == "cpu") return {};
  const cli::GpuBusIds gpus = cli::CudaPciBusIds();
  if (!elastic::BindsByGpu(config.nproc_per_node_text, gpus.devices)) return {};
  if (gpus.ids.empty()) {
    throw UsageError(given + ": cannot find the GPUs' PCI bus ids (" + gpus.reason +
                     "); update the CUDA driver, or pass --nproc_per_node=cpu for a CPU-only job");
  }
  std::vector<int> nodes;
  for (const std::string& id : gpus.ids) {
    const auto node = process::PciNumaNode(id);
    if (!node) {
      throw UsageError(given + ": cannot read GPU " + std::to_string(nodes.size()) +
                       "'s NUMA node (/sys/bus/pci/devices/" + id +
                       "/numa_node); mount /sys, or drop --numa-binding");
    }
    nodes.push_back(*node);
  }
  return nodes;
}

}  // namespace

std::vector<elastic::CpuBinding> PlanWorkerCpus(const elastic::LaunchConfig& config) {
  if (!config.numa_binding) return {};
  elastic::CpuBindingRequest request;
  request.given = config.Given("numa_binding", *config.numa_binding);
  request.mode = elastic::CpuBindingModeNamed(*config.numa_binding).value();  // the CLI checked
  request.local_ranks = config.nproc_per_node;
  request.allowed = process::AllowedCpus();
  elastic::CpuTopology topology = process::ReadCpuTopology();
  topology.gpu_nodes = GpuNodes(config, request.given);
  request.gpu_job = !topology.gpu_nodes.empty();
  return elastic::PlanCpuBinding(topology, request);
}

}  // namespace ddprun::launcher
