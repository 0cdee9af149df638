// PlanLaunch's decisions as tables (launcher/backend/launch_plan.h): command lines planned on
// made-up machines (MachineFacts by hand: names, interfaces, the resolver's answers, CPUs,
// GPUs). Nothing here asks the system anything; the plan is pure.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>

#include "common/errors.h"
#include "launcher/backend/launch_plan.h"
#include "tests/unit/launcher/launch_plan_util.h"

namespace {

using ddprun::HostPort;
using ddprun::elastic::LaunchConfig;
using ddprun::launcher::backend::Known;
using ddprun::launcher::backend::LaunchKind;
using ddprun::launcher::backend::LaunchPlan;
using ddprun::launcher::backend::MachineFacts;
using ddprun::launcher::backend::NamesThisMachine;
using ddprun::launcher::backend::NamesToResolve;
using ddprun::launcher::backend::NeedsFqdn;
using ddprun::launcher::backend::NeedsInterfaces;
using ddprun::launcher::backend::PlanLaunch;
using ddprun::launcher::backend::ServedStore;
using ddprun::test::Args;
using ddprun::test::Config;
using std::chrono::milliseconds;

// node7 (node7.cluster.example) with a loopback and one Ethernet interface, IPv4 and IPv6.
MachineFacts Node7() {
  MachineFacts facts;
  facts.hostname = "node7";
  facts.fqdn = "node7.cluster.example";
  facts.pid = 4242;
  facts.interface_addresses = {"127.0.0.1", "10.1.2.3", "::1", "fd00::7"};
  return facts;
}

MachineFacts Node7Resolving(const std::string& name, std::vector<std::string> addresses) {
  MachineFacts facts = Node7();
  facts.resolved[name] = std::move(addresses);
  return facts;
}

// A readable file for the CLI's TLS checks, removed at exit of the test.
struct TempFile {
  TempFile() {
    char name[] = "/tmp/ddprun-plan-test-XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    ::close(fd);
    path = name;
  }
  ~TempFile() { ::unlink(path.c_str()); }
  std::string path;
};

std::string Refusal(const LaunchConfig& config, const MachineFacts& facts) {
  try {
    PlanLaunch(config, facts);
  } catch (const ddprun::UsageError& error) {
    return error.what();
  }
  return "(planned)";
}

}  // namespace

TEST_CASE("plan: standalone keeps the store on loopback, MASTER_ADDR the FQDN only if loopback",
          "[launcher][plan]") {
  const LaunchConfig config = Config({"--standalone"});
  CHECK(NeedsFqdn(config));
  CHECK_FALSE(NeedsInterfaces(config));
  CHECK(NamesToResolve(config, "node7.cluster.example") == Args{"node7.cluster.example"});
  struct Row {
    std::vector<std::string> resolved;  // what the FQDN resolves to
    std::string master_addr;
  };
  for (const Row& row : {Row{{"127.0.1.1"}, "node7.cluster.example"},  // Debian's /etc/hosts
                         Row{{"10.1.2.3"}, "127.0.0.1"},
                         Row{{"127.0.1.1", "10.1.2.3"}, "127.0.0.1"},  // several: one is not
                         Row{{"::1"}, "127.0.0.1"},  // a store on 127.0.0.1 is not at ::1
                         Row{{}, "127.0.0.1"}}) {    // does not resolve
    INFO(row.master_addr);
    const LaunchPlan plan =
        PlanLaunch(config, Node7Resolving("node7.cluster.example", row.resolved));
    CHECK(plan.kind == LaunchKind::kSingleNode);
    CHECK(plan.served_store == ServedStore{"127.0.0.1", 0});
    CHECK(plan.first_round.master_addr == row.master_addr);
    CHECK(plan.first_round.master_port_known == Known::kAtLaunch);
    CHECK(plan.node.hostname == "node7");
    CHECK(plan.node.pid == 4242);
  }
  // store_bind: what the store binds, and what the workers reach unless it is every interface.
  const LaunchPlan bound =
      PlanLaunch(Config({"--standalone", "--rdzv_conf=store_bind=127.0.0.9"}), Node7());
  CHECK(bound.served_store == ServedStore{"127.0.0.9", 0});
  CHECK(bound.first_round.master_addr == "127.0.0.9");
}

TEST_CASE("plan: static across nodes: node 0 serves, every agent is its client",
          "[launcher][plan]") {
  const LaunchConfig node0 =
      Config({"--nnodes=2", "--master_addr=10.1.2.3", "--master_port=29511"});
  CHECK_FALSE(NeedsFqdn(node0));  // a static job asks the machine nothing but its name
  CHECK_FALSE(NeedsInterfaces(node0));
  CHECK(NamesToResolve(node0, "").empty());
  const LaunchPlan zero = PlanLaunch(node0, Node7());
  CHECK(zero.kind == LaunchKind::kStatic);
  CHECK(zero.served_store == ServedStore{"", 29511});
  CHECK(zero.agent_store == HostPort{"127.0.0.1", 29511});
  CHECK(zero.first_round.master_addr == "10.1.2.3");
  CHECK(zero.first_round.ranks.base_global_rank == 0);
  CHECK(zero.free_port_hint == "pass a free --master_port");
  const LaunchPlan one = PlanLaunch(
      Config({"--nnodes=2", "--node_rank=1", "--rdzv_endpoint=10.1.2.3:29511"}), Node7());
  CHECK_FALSE(one.served_store);
  CHECK(one.agent_store == HostPort{"10.1.2.3", 29511});
  CHECK(one.first_round.group_rank == 1);
  CHECK(one.first_round.ranks.base_global_rank == 2);
  CHECK(one.first_round.ranks.global_world_size == 4);
  CHECK(one.free_port_hint == "pass a free port in --rdzv_endpoint");
  CHECK(one.timeouts.linger == milliseconds{15'000});  // max(10 s, 3 × 5 s)
  // With a token the workers serve their own store, at a port node 0 picks at rendezvous.
  const LaunchPlan token = PlanLaunch(
      Config({"--nnodes=2"}, {{"DDPRUN_RDZV_TOKEN", "a-secret-of-32-bytes-for-tests.."}}), Node7());
  CHECK(token.auth != nullptr);
  CHECK(token.auth_source == "$DDPRUN_RDZV_TOKEN");
  CHECK_FALSE(token.first_round.use_agent_store);
  CHECK(token.first_round.master_port_known == Known::kAtRendezvous);
}

TEST_CASE("plan: c10d serves the rendezvous store where the endpoint names this machine",
          "[launcher][plan]") {
  struct Row {
    std::string endpoint;
    std::vector<std::string> resolved;  // what the endpoint's host resolves to
    bool serves;
  };
  for (const Row& row : {Row{"node7", {}, true}, Row{"node7.cluster.example", {}, true},
                         Row{"localhost", {}, true}, Row{"127.0.0.5", {}, true},
                         Row{"[::1]", {}, true}, Row{"store.example", {"10.1.2.3"}, true},
                         Row{"store.example", {"192.0.2.9", "fd00::7"}, true},  // several
                         Row{"store.example", {"192.0.2.9", "192.0.2.10"}, false},
                         Row{"store.example", {}, false},  // does not resolve
                         Row{"10.1.2.4", {}, false}}) {
    INFO(row.endpoint);
    const LaunchConfig config =
        Config({"--nnodes=1:3", "--rdzv_backend=c10d", "--rdzv_endpoint=" + row.endpoint});
    CHECK(NeedsInterfaces(config));
    CHECK(NeedsFqdn(config));
    const std::string host = row.endpoint == "[::1]" ? "::1" : row.endpoint;
    CHECK(NamesToResolve(config, "node7.cluster.example") == Args{host});
    const LaunchPlan plan = PlanLaunch(config, Node7Resolving(host, row.resolved));
    CHECK(plan.kind == LaunchKind::kElastic);
    CHECK(plan.serves_rendezvous_store == row.serves);
    REQUIRE(plan.rendezvous_endpoints.size() == 1);
    CHECK(plan.rendezvous_endpoints.front().port == 29400);
    CHECK(plan.node.advertised_addr == "node7.cluster.example");
    CHECK(plan.first_round.master_addr_known == Known::kAtRendezvous);
    CHECK_FALSE(plan.etcd);
  }
  // is_host decides without asking the machine; --local_addr is this machine's name too.
  const LaunchConfig told = Config({"--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=node7:1",
                                    "--rdzv_conf=is_host=false"});
  CHECK(NamesToResolve(told, "x").empty());
  CHECK_FALSE(NeedsInterfaces(told));
  CHECK_FALSE(PlanLaunch(told, Node7()).serves_rendezvous_store);
  const LaunchPlan local = PlanLaunch(
      Config({"--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=gpu7:1", "--local_addr=gpu7"}),
      Node7());
  CHECK(local.serves_rendezvous_store);
  CHECK(local.node.advertised_addr == "gpu7");
  CHECK(NamesThisMachine("node7", Node7(), ""));
  CHECK_FALSE(NamesThisMachine("", Node7(), ""));
}

TEST_CASE("plan: the timeouts come from rdzv_conf once", "[launcher][plan]") {
  const LaunchPlan plan = PlanLaunch(
      Config({"--nnodes=2", "--rdzv_backend=c10d", "--rdzv_endpoint=h:1",
              "--rdzv_conf=keep_alive_interval=2,keep_alive_max_attempt=4,read_timeout=9,"
              "join_timeout=70,last_call_timeout=3,close_timeout=4"}),
      Node7Resolving("h", {}));
  const auto& timeouts = plan.timeouts;
  CHECK(timeouts.heartbeat == milliseconds{8'000});
  CHECK(timeouts.member == milliseconds{10'000});
  CHECK(timeouts.linger == milliseconds{10'000});  // at least 10 s
  CHECK(timeouts.failure_barrier == milliseconds{8'000});
  CHECK(timeouts.read == milliseconds{9'000});
  CHECK(timeouts.join == milliseconds{70'000});
  CHECK(timeouts.last_call == milliseconds{3'000});
  CHECK(timeouts.close == milliseconds{4'000});
  CHECK(timeouts.shutdown == milliseconds{30'000});
}

TEST_CASE("plan: etcd is every member at port 2379 by default, TLS when asked",
          "[launcher][plan]") {
  const LaunchConfig plain =
      Config({"--nnodes=1:3", "--rdzv_backend=etcd", "--rdzv_endpoint=a,b:1,[::1]"});
  CHECK(NamesToResolve(plain, "x").empty());  // never served here: nothing to tell
  CHECK_FALSE(NeedsInterfaces(plain));
  const LaunchPlan plan = PlanLaunch(plain, Node7());
  CHECK(plan.kind == LaunchKind::kElastic);
  CHECK(plan.rendezvous_endpoints == std::vector<HostPort>{{"a", 2379}, {"b", 1}, {"::1", 2379}});
  CHECK_FALSE(plan.serves_rendezvous_store);
  REQUIRE(plan.etcd);
  CHECK(plan.etcd->client.endpoints == plan.rendezvous_endpoints);
  CHECK_FALSE(plan.etcd->client.tls);
  CHECK(plan.etcd->prefix == "/ddprun/");
  CHECK(plan.etcd->client.timeout == milliseconds{7'500});    // heartbeat / 2
  CHECK(plan.etcd->client.patience == milliseconds{15'000});  // the heartbeat timeout
  CHECK_FALSE(plan.etcd_v2_note);
  const TempFile pem;
  const LaunchPlan tls =
      PlanLaunch(Config({"--nnodes=2", "--rdzv_backend=etcd-v2", "--rdzv_endpoint=e",
                         "--rdzv_conf=protocol=https,cacert=" + pem.path + ",cert=" + pem.path +
                             ",key=" + pem.path + ",etcd_prefix=/team"}),
                 Node7());
  REQUIRE(tls.etcd);
  REQUIRE(tls.etcd->client.tls);
  CHECK(tls.etcd->client.tls->cacert == pem.path);
  CHECK(tls.etcd->prefix == "/team/");
  CHECK(tls.rendezvous_endpoints == std::vector<HostPort>{{"e", 2379}});
  CHECK(tls.etcd_v2_note);
}

TEST_CASE("plan: --numa-binding decides from the facts' CPUs and GPUs", "[launcher][plan]") {
  MachineFacts facts = Node7();
  facts.cpus.emplace();
  facts.cpus->allowed = {0, 1, 2, 3};
  facts.cpus->topology.nodes = {{0, 0, {{0}, {1}}, {{0, 1}}}, {1, 1, {{2}, {3}}, {{2, 3}}}};
  const LaunchConfig cpu_job = Config({"--numa-binding=node"});
  const LaunchPlan cpu_plan = PlanLaunch(cpu_job, facts);
  REQUIRE(cpu_plan.cpu_bindings.size() == 2);
  CHECK(cpu_plan.cpu_bindings[0].cpus == std::vector<int>{0, 1});
  CHECK(cpu_plan.cpu_bindings[1].cpus == std::vector<int>{2, 3});
  CHECK(cpu_plan.cpu_bindings[0].gpu == -1);
  CHECK(PlanLaunch(Config({}), Node7()).cpu_bindings.empty());  // no flag: no CPU facts needed
  // A GPU job: local rank r by GPU r's NUMA node.
  facts.cpus->gpus = {2, {"0000:3b:00.0", "0000:af:00.0"}, "", {1, 0}};
  const LaunchPlan gpu_plan = PlanLaunch(Config({"--numa-binding=node"}), facts);
  REQUIRE(gpu_plan.cpu_bindings.size() == 2);
  CHECK(gpu_plan.cpu_bindings[0].numa_node == 1);
  CHECK(gpu_plan.cpu_bindings[0].gpu == 0);
  CHECK(gpu_plan.cpu_bindings[1].numa_node == 0);
  // What the facts lack is one line naming the fix.
  facts.cpus->gpus.nodes = {1, std::nullopt};
  CHECK_THAT(Refusal(cpu_job, facts),
             Catch::StartsWith("--numa_binding=node: cannot read GPU 1's NUMA node") &&
                 Catch::Contains("/sys/bus/pci/devices/0000:af:00.0/numa_node"));
  facts.cpus->gpus = {2, {}, "cuDeviceGetPCIBusId failed", {}};
  CHECK_THAT(Refusal(cpu_job, facts),
             Catch::Contains("cannot find the GPUs' PCI bus ids (cuDeviceGetPCIBusId failed)"));
  facts.cpus->gpus = {0, {}, "no CUDA driver", {}};  // no GPU: a CPU-only job, bound so
  CHECK(PlanLaunch(cpu_job, facts).cpu_bindings == cpu_plan.cpu_bindings);
}
