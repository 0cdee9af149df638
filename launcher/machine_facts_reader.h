// The one place a launch asks the system what machine it runs on (launcher/backend/
// machine_facts.h): host name, FQDN, the interfaces' addresses, the resolver's answers for the
// names the plan looks up, and with --numa-binding the CPUs (sched_getaffinity, hwloc) and the
// GPUs' NUMA nodes (the CUDA driver's PCI bus ids, then sysfs). It reads only what the plan of
// `config` uses (NeedsFqdn, NeedsInterfaces, NamesToResolve), then backend::PlanLaunch decides.
#pragma once
#include "elastic/launch_config.h"
#include "launcher/backend/machine_facts.h"

namespace ddprun::launcher {

// Throws SystemError when the CPU topology cannot be read (--numa-binding only).
backend::MachineFacts ReadMachineFacts(const elastic::LaunchConfig& config);

}  // namespace ddprun::launcher
