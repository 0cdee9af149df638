// What the launch plan knows of this machine: read once, before planning, by
// launcher/machine_facts_reader.h (ReadMachineFacts, the only place that asks the system), and
// passed to the pure PlanLaunch (launch_plan.h). Tests make them by hand: a machine with any
// name, interfaces, resolver answers, CPUs and GPUs.
//
// Only what the launch needs is read (NamesToResolve; the CPUs and GPUs with --numa-binding
// only), so that a plain launch resolves no name it does not use and initialises no topology
// library.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "elastic/cpu_binding.h"

namespace ddprun::launcher::backend {

// The GPUs as the CUDA driver numbers them, and each one's NUMA node.
struct GpuFacts {
  int devices = 0;                        // what the driver reported (0: none, or no driver)
  std::vector<std::string> bus_ids;       // each device's PCI bus id, or none (then `reason`)
  std::string reason;                     // why there are no bus ids
  std::vector<std::optional<int>> nodes;  // by device: its NUMA node, none when unreadable
};

// --numa-binding's inputs: the launcher's CPUs, the topology, the GPUs (a GPU job only).
struct CpuFacts {
  elastic::CpuList allowed;       // sched_getaffinity
  elastic::CpuTopology topology;  // gpu_nodes left empty: PlanLaunch fills it from `gpus`
  GpuFacts gpus;
};

struct MachineFacts {
  std::string hostname;  // gethostname
  std::string fqdn;      // Python's socket.getfqdn(); empty when the launch does not need it
  int pid = 0;           // the launcher's, in this node's rendezvous record
  // Every interface's address, numeric (getifaddrs); read only when the plan asks whether an
  // endpoint names this machine.
  std::vector<std::string> interface_addresses;
  // The resolver's answers for the names the plan looks up (NamesToResolve): numeric addresses,
  // none for a name that does not resolve.
  std::map<std::string, std::vector<std::string>> resolved;
  std::optional<CpuFacts> cpus;  // with --numa-binding only

  // The addresses `name` resolved to; none when it did not resolve or was not asked.
  const std::vector<std::string>& Resolved(const std::string& name) const;
};

// 127.0.0.0/8 or ::1: the one definition of a loopback address.
bool IsLoopbackAddress(const std::string& numeric);
// 127.0.0.0/8 only: what a store listening on 127.0.0.1 is reachable at.
bool IsIpv4LoopbackAddress(const std::string& numeric);

}  // namespace ddprun::launcher::backend
