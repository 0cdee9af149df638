#include "launcher/machine_facts_reader.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <unistd.h>

#include "cli/nproc.h"
#include "common/hostname.h"
#include "launcher/backend/launch_plan.h"
#include "launcher/process/hwloc_topology.h"

namespace ddprun::launcher {
namespace {

std::string Numeric(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text,
                sizeof text);
  } else if (address->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text,
                sizeof text);
  }
  return text;
}

std::vector<std::string> InterfaceAddresses() {
  std::vector<std::string> addresses;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return addresses;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr != nullptr) addresses.push_back(Numeric(entry->ifa_addr));
  }
  ::freeifaddrs(list);
  return addresses;
}

// Every address `host` resolves to, numeric; none when it does not resolve.
std::vector<std::string> Resolve(const std::string& host) {
  std::vector<std::string> addresses;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return addresses;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    addresses.push_back(Numeric(entry->ai_addr));
  }
  ::freeaddrinfo(found);
  return addresses;
}

// The GPUs of a job that may bind by GPU (not --nproc_per_node=cpu).
backend::GpuFacts ReadGpus() {
  const cli::GpuBusIds found = cli::CudaPciBusIds();
  backend::GpuFacts gpus{found.devices, found.ids, found.reason, {}};
  for (const std::string& id : gpus.bus_ids) gpus.nodes.push_back(process::PciNumaNode(id));
  return gpus;
}

backend::CpuFacts ReadCpus(const elastic::LaunchConfig& config) {
  backend::CpuFacts cpus;
  cpus.allowed = process::AllowedCpus();
  cpus.topology = process::ReadCpuTopology();
  if (config.nproc_per_node_text != "cpu") cpus.gpus = ReadGpus();
  return cpus;
}

}  // namespace

backend::MachineFacts ReadMachineFacts(const elastic::LaunchConfig& config) {
  backend::MachineFacts facts;
  facts.hostname = Hostname();
  if (backend::NeedsFqdn(config)) facts.fqdn = Fqdn();
  facts.pid = static_cast<int>(::getpid());
  if (backend::NeedsInterfaces(config)) facts.interface_addresses = InterfaceAddresses();
  for (const std::string& name : backend::NamesToResolve(config, facts.fqdn)) {
    facts.resolved.emplace(name, Resolve(name));
  }
  if (config.numa_binding) facts.cpus = ReadCpus(config);
  return facts;
}

}  // namespace ddprun::launcher
