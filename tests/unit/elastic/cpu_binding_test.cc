// --numa-binding's policy (elastic/cpu_binding.h) on hand-made topologies: every mode's exact
// CPU lists for GPU and CPU-only jobs, a restricted allowed set, and each refusal's one line.
#include "elastic/cpu_binding.h"

#include <catch2/catch.hpp>

#include "common/errors.h"

namespace {

using ddprun::elastic::CpuBinding;
using ddprun::elastic::CpuBindingMode;
using ddprun::elastic::CpuBindingRequest;
using ddprun::elastic::CpuList;
using ddprun::elastic::CpuListText;
using ddprun::elastic::CpuTopology;
using ddprun::elastic::NumaNodeCpus;
using ddprun::elastic::PlanCpuBinding;

CpuList Range(int first, int count) {
  CpuList cpus;
  for (int cpu = first; cpu < first + count; ++cpu) cpus.push_back(cpu);
  return cpus;
}

// A node of `cores` cores with `smt` consecutive CPUs each from `first`, its cores grouped
// `per_complex` to a core complex.
NumaNodeCpus Node(int os_index, int package, int first, int cores, int smt, int per_complex) {
  NumaNodeCpus node{os_index, package, {}, {}};
  for (int core = 0; core < cores; ++core) node.cores.push_back(Range(first + core * smt, smt));
  for (int core = 0; core < cores; core += per_complex) {
    node.core_complexes.push_back(Range(first + core * smt, per_complex * smt));
  }
  return node;
}

// Two sockets, a NUMA node each (0-7, 8-15): 4 cores with 2 threads, 2 complexes of 2 cores;
// GPUs 0 and 1 on node 0, 2 and 3 on node 1.
CpuTopology TwoSockets() {
  return {{Node(0, 0, 0, 4, 2, 2), Node(1, 1, 8, 4, 2, 2)}, {0, 0, 1, 1}};
}

CpuBindingRequest Request(CpuBindingMode mode, int ranks, bool gpu_job, CpuList allowed) {
  return {mode, "--numa-binding=x", ranks, gpu_job, std::move(allowed)};
}

std::vector<std::string> Lists(const std::vector<CpuBinding>& bindings) {
  std::vector<std::string> lists;
  for (const CpuBinding& binding : bindings) lists.push_back(CpuListText(binding.cpus));
  return lists;
}

using Lines = std::vector<std::string>;

std::string Refusal(const CpuTopology& topology, const CpuBindingRequest& request) {
  try {
    PlanCpuBinding(topology, request);
  } catch (const ddprun::UsageError& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("cpu lists are written as the kernel writes them", "[elastic][numa]") {
  CHECK(CpuListText({}).empty());
  CHECK(CpuListText({3}) == "3");
  CHECK(CpuListText({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8");
  CHECK(ddprun::elastic::CpuBindingModeNamed("core-complex") == CpuBindingMode::kCoreComplex);
  CHECK_FALSE(ddprun::elastic::CpuBindingModeNamed("numa"));
}

TEST_CASE("GPU jobs: every mode on two sockets with SMT, as torchrun maps them",
          "[elastic][numa]") {
  const CpuTopology machine = TwoSockets();
  const CpuList all = Range(0, 16);
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kNode, 4, true, all))) ==
        Lines{"0-7", "0-7", "8-15", "8-15"});
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kSocket, 4, true, all))) ==
        Lines{"0-7", "0-7", "8-15", "8-15"});
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kExclusive, 4, true, all))) ==
        Lines{"0-3", "4-7", "8-11", "12-15"});
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kCoreComplex, 4, true, all))) ==
        Lines{"0-3", "4-7", "8-11", "12-15"});
  const auto bindings = PlanCpuBinding(machine, Request(CpuBindingMode::kNode, 4, true, all));
  CHECK(bindings[2].numa_node == 1);
  CHECK(bindings[2].gpu == 2);
}

TEST_CASE("exclusive counts every GPU of the node, not only the launched ranks",
          "[elastic][numa]") {
  // One rank on a 4-GPU machine: GPU 1 still owns the second half of node 0.
  CHECK(Lists(PlanCpuBinding(TwoSockets(), Request(CpuBindingMode::kExclusive, 1, true,
                                                   Range(0, 16)))) == Lines{"0-3"});
}

TEST_CASE("exclusive: an uneven split gives the lowest GPUs one core more", "[elastic][numa]") {
  const CpuTopology machine{{Node(0, 0, 0, 5, 1, 5)}, {0, 0}};
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kExclusive, 2, true, Range(0, 5)))) ==
        Lines{"0-2", "3-4"});
}

TEST_CASE("socket: every NUMA node of the GPU's package", "[elastic][numa]") {
  // Package 0 holds nodes 0 and 1 (sub-NUMA clustering), package 1 node 2.
  const CpuTopology machine{
      {Node(0, 0, 0, 2, 2, 2), Node(1, 0, 4, 2, 2, 2), Node(2, 1, 8, 2, 2, 2)}, {1, 2}};
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kSocket, 2, true, Range(0, 12)))) ==
        Lines{"0-7", "8-11"});
}

TEST_CASE("core-complex: largest groups first, GPUs beyond their number wrap around",
          "[elastic][numa]") {
  NumaNodeCpus node = Node(0, 0, 0, 6, 1, 6);
  node.core_complexes = {{0, 1}, {2, 3, 4, 5}};
  const CpuTopology machine{{node}, {0, 0, 0}};
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kCoreComplex, 3, true,
                                              Range(0, 6)))) == Lines{"2-5", "0-1", "2-5"});
}

TEST_CASE("the launcher's allowed CPUs bound every mode", "[elastic][numa]") {
  const CpuTopology machine = TwoSockets();
  const CpuList allowed{2, 3, 4, 5, 6, 7, 9, 11};  // taskset -c 2-7,9,11
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kNode, 4, true, allowed))) ==
        Lines{"2-7", "2-7", "9,11", "9,11"});
  // Node 0 has 3 usable cores: 2 for GPU 0, 1 for GPU 1; node 1 one core (9) and one (11).
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kExclusive, 4, true, allowed))) ==
        Lines{"2-5", "6-7", "9", "11"});
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kCoreComplex, 2, true, allowed))) ==
        Lines{"4-7", "2-3"});
}

TEST_CASE("CPU-only jobs: local ranks in blocks over the NUMA nodes", "[elastic][numa]") {
  CpuTopology machine = TwoSockets();
  machine.gpu_nodes.clear();
  const CpuList all = Range(0, 16);
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kNode, 4, false, all))) ==
        Lines{"0-7", "0-7", "8-15", "8-15"});
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kExclusive, 3, false, all))) ==
        Lines{"0-3", "4-7", "8-15"});
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kExclusive, 8, false, all))) ==
        Lines{"0-1", "2-3", "4-5", "6-7", "8-9", "10-11", "12-13", "14-15"});
  const auto one = PlanCpuBinding(machine, Request(CpuBindingMode::kNode, 1, false, all));
  CHECK(one.front().gpu == -1);
  CHECK(one.front().numa_node == 0);
  // Node 0 allowed nothing: every rank goes to node 1.
  CHECK(Lists(PlanCpuBinding(machine, Request(CpuBindingMode::kExclusive, 2, false,
                                              Range(8, 8)))) == Lines{"8-11", "12-15"});
}

TEST_CASE("what cannot be satisfied is one line naming the fix", "[elastic][numa]") {
  const CpuTopology machine = TwoSockets();
  const CpuList all = Range(0, 16);
  CHECK(Refusal(machine, Request(CpuBindingMode::kNode, 5, true, all)) ==
        "--numa-binding=x: local rank 4 has no GPU (4 visible); pass --nproc_per_node<=4, or "
        "--nproc_per_node=cpu or CUDA_VISIBLE_DEVICES= for a CPU-only job");
  CHECK(Refusal(machine, Request(CpuBindingMode::kNode, 1, true, Range(8, 8))) ==
        "--numa-binding=x: GPU 0's NUMA node 0 has no CPU for local rank 0 (the launcher may "
        "use CPUs 8-15); widen the launcher's CPU set (taskset, cgroup) or drop --numa-binding");
  const CpuTopology crowded{{Node(0, 0, 0, 2, 2, 2)}, {0, 0, 0}};
  CHECK(Refusal(crowded, Request(CpuBindingMode::kExclusive, 3, true, Range(0, 4))) ==
        "--numa-binding=x: NUMA node 0 has 2 physical cores for 3 GPUs (the launcher may use "
        "CPUs 0-3); use --numa-binding=node, or fewer ranks per node");
  const CpuTopology one_core{{Node(0, 0, 0, 2, 1, 2)}, {}};
  CHECK(Refusal(one_core, Request(CpuBindingMode::kExclusive, 2, false, {1})) ==
        "--numa-binding=x: NUMA node 0 has 1 physical core for 2 local ranks (the launcher may "
        "use CPUs 1); use --numa-binding=node, or fewer ranks per node");
  CHECK(Refusal(one_core, Request(CpuBindingMode::kNode, 1, false, {7})) ==
        "--numa-binding=x: no NUMA node has a CPU the launcher may use (the launcher may use "
        "CPUs 7); widen its CPU set (taskset, cgroup) or drop --numa-binding");
}
