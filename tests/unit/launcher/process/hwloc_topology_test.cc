// The hwloc adapter (launcher/process/hwloc_topology.h) on synthetic topologies and an XML
// export, then through the policy; the PCI NUMA node from a fake sysfs; this process's CPUs.
#include "launcher/process/hwloc_topology.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "common/errors.h"
#include "tests/unit/launcher/process/process_test_util.h"

namespace {

using ddprun::elastic::CpuList;
using ddprun::elastic::CpuListText;
using ddprun::elastic::CpuTopology;
using ddprun::launcher::process::ReadCpuTopology;
using ddprun::launcher::process::TopologySource;

CpuTopology Synthetic(const std::string& description) {
  return ReadCpuTopology({TopologySource::Kind::kSynthetic, description});
}

std::vector<std::string> Texts(const std::vector<CpuList>& groups) {
  std::vector<std::string> texts;
  for (const CpuList& group : groups) texts.push_back(CpuListText(group));
  return texts;
}

using Lines = std::vector<std::string>;

std::vector<std::string> Bind(const CpuTopology& topology, ddprun::elastic::CpuBindingMode mode,
                              int ranks, bool gpu_job, CpuList allowed) {
  const auto bindings = ddprun::elastic::PlanCpuBinding(
      topology, {mode, "--numa-binding=x", ranks, gpu_job, allowed});
  std::vector<std::string> texts;
  for (const auto& binding : bindings) texts.push_back(CpuListText(binding.cpus));
  return texts;
}

CpuList Range(int first, int count) {
  CpuList cpus;
  for (int cpu = first; cpu < first + count; ++cpu) cpus.push_back(cpu);
  return cpus;
}

}  // namespace

TEST_CASE("hwloc: two sockets, two L3 groups each, 2-way SMT", "[launcher][numa]") {
  const CpuTopology machine = Synthetic("pack:2 numa:1 l3:2 core:4 pu:2");
  REQUIRE(machine.nodes.size() == 2);
  CHECK(machine.nodes[1].os_index == 1);
  CHECK(machine.nodes[0].package == 0);
  CHECK(machine.nodes[1].package == 1);
  CHECK(Texts(machine.nodes[0].cores) ==
        Lines{"0-1", "2-3", "4-5", "6-7", "8-9", "10-11", "12-13", "14-15"});
  CHECK(Texts(machine.nodes[1].core_complexes) == Lines{"16-23", "24-31"});
  CHECK(machine.gpu_nodes.empty());
}

TEST_CASE("hwloc topology through the policy: GPUs injected, CPU-only, a restricted set",
          "[launcher][numa]") {
  using ddprun::elastic::CpuBindingMode;
  CpuTopology machine = Synthetic("pack:2 numa:1 l3:2 core:4 pu:2");
  const CpuList all = Range(0, 32);
  machine.gpu_nodes = {0, 0, 1, 1};
  CHECK(Bind(machine, CpuBindingMode::kExclusive, 4, true, all) ==
        Lines{"0-7", "8-15", "16-23", "24-31"});
  CHECK(Bind(machine, CpuBindingMode::kCoreComplex, 4, true, all) ==
        Lines{"0-7", "8-15", "16-23", "24-31"});
  CHECK(Bind(machine, CpuBindingMode::kSocket, 3, true, all) == Lines{"0-15", "0-15", "16-31"});
  machine.gpu_nodes.clear();
  CHECK(Bind(machine, CpuBindingMode::kExclusive, 2, false, {0, 1, 2, 3, 30, 31}) ==
        Lines{"0-3", "30-31"});
}

TEST_CASE("hwloc: nodes inside L3 groups of one package (sub-NUMA clusters)", "[launcher][numa]") {
  CpuTopology machine = Synthetic("pack:1 l3:2 [numa] core:2 pu:2");
  REQUIRE(machine.nodes.size() == 2);
  CHECK(machine.nodes[1].package == 0);
  CHECK(Texts(machine.nodes[1].cores) == Lines{"4-5", "6-7"});
  machine.gpu_nodes = {1};
  CHECK(Bind(machine, ddprun::elastic::CpuBindingMode::kNode, 1, true, Range(0, 8)) ==
        Lines{"4-7"});
  CHECK(Bind(machine, ddprun::elastic::CpuBindingMode::kSocket, 1, true, Range(0, 8)) ==
        Lines{"0-7"});
}

TEST_CASE("hwloc: an XML export reads back as the same topology", "[launcher][numa]") {
  const ddprun::launcher::process::testing::TempDir dir;
  const std::string path = dir.path + "/topology.xml";
  {
    std::ofstream xml(path);
    // hwloc's own export of "pack:1 numa:1 core:2 pu:1", trimmed to what it needs.
    xml << R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" allowed_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" allowed_nodeset="0x00000001" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="7" local_memory="1073741824"/>
      <object type="Core" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="3">
        <object type="PU" os_index="0" cpuset="0x00000001" complete_cpuset="0x00000001" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="4"/>
      </object>
      <object type="Core" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="5">
        <object type="PU" os_index="1" cpuset="0x00000002" complete_cpuset="0x00000002" nodeset="0x00000001" complete_nodeset="0x00000001" gp_index="6"/>
      </object>
    </object>
  </object>
</topology>
)";
  }
  const CpuTopology machine = ReadCpuTopology({TopologySource::Kind::kXml, path});
  REQUIRE(machine.nodes.size() == 1);
  CHECK(Texts(machine.nodes[0].cores) == Lines{"0", "1"});
  // No cache in the file: each core is its own complex.
  CHECK(Texts(machine.nodes[0].core_complexes) == Lines{"0", "1"});
}

TEST_CASE("hwloc: a bad synthetic description is one line naming hwloc's call",
          "[launcher][numa]") {
  try {
    Synthetic("pack:two");
    FAIL("no error");
  } catch (const ddprun::SystemError& error) {
    CHECK_THAT(error.what(), Catch::StartsWith("hwloc_topology_set_synthetic pack:two: "));
  }
}

TEST_CASE("a GPU's NUMA node from sysfs: -1 is 0, CUDA's 8-digit domain", "[launcher][numa]") {
  namespace fs = std::filesystem;
  const ddprun::launcher::process::testing::TempDir dir;
  const fs::path sysfs = fs::path(dir.path) / "pci";
  fs::create_directories(sysfs / "0000:3b:00.0");
  fs::create_directories(sysfs / "0000:86:00.0");
  std::ofstream((sysfs / "0000:3b:00.0" / "numa_node").string()) << "1\n";
  std::ofstream((sysfs / "0000:86:00.0" / "numa_node").string()) << "-1\n";
  using ddprun::launcher::process::PciNumaNode;
  CHECK(PciNumaNode("00000000:3B:00.0", sysfs.string()) == 1);
  CHECK(PciNumaNode("0000:3B:00.0", sysfs.string()) == 1);
  CHECK(PciNumaNode("0000:86:00.0", sysfs.string()) == 0);
  CHECK_FALSE(PciNumaNode("0000:99:00.0", sysfs.string()));
}

TEST_CASE("this process's allowed CPUs are what sched_getaffinity says", "[launcher][numa]") {
  const CpuList cpus = ddprun::launcher::process::AllowedCpus();
  REQUIRE_FALSE(cpus.empty());
  CHECK(static_cast<long>(cpus.size()) <= sysconf(_SC_NPROCESSORS_CONF));
  // The real machine: every allowed CPU is in some core of some node.
  const CpuTopology machine = ReadCpuTopology();
  CpuList in_cores;
  for (const auto& node : machine.nodes) {
    for (const auto& core : node.cores) in_cores.insert(in_cores.end(), core.begin(), core.end());
  }
  for (const int cpu : cpus) CHECK(std::count(in_cores.begin(), in_cores.end(), cpu) == 1);
}
