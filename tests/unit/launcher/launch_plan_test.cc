// One plan for the run and the dry run (launcher/backend/launch_plan.h): the dry run prints the
// plan it is given, and the backend the run builds from the same plan forms a first round whose
// workers are those the dry run prints (what the plan knows only later taken from the round).
// The plan's decisions as tables on made-up machines are in launch_plan_table_test.cc.
#include "launcher/backend/launch_plan.h"

#include <catch2/catch.hpp>
#include <future>
#include <map>
#include <sstream>

#include "elastic/round_sync.h"
#include "launcher/backend/free_port.h"
#include "launcher/backend/launch_backend.h"
#include "launcher/dry_run.h"
#include "launcher/launch_setup.h"
#include "launcher/machine_facts_reader.h"
#include "tests/unit/launcher/launch_plan_util.h"

namespace {

using ddprun::elastic::AttemptLaunch;
using ddprun::elastic::LaunchConfig;
using ddprun::elastic::RankAssignment;
using ddprun::elastic::WorkerSpec;
using ddprun::launcher::backend::FirstRound;
using ddprun::launcher::backend::Known;
using ddprun::launcher::backend::LaunchBackend;
using ddprun::launcher::backend::LaunchKind;
using ddprun::launcher::backend::LaunchPlan;
using ddprun::launcher::backend::PlanLaunch;
using ddprun::rendezvous::RendezvousInfo;
using ddprun::test::Args;
using ddprun::test::Config;

// The plan of `config` on this machine, as launcher/run.cc makes it.
LaunchPlan PlanHere(const LaunchConfig& config) {
  return PlanLaunch(config, ddprun::launcher::ReadMachineFacts(config));
}

std::string Port() { return std::to_string(ddprun::launcher::backend::PickFreePort("127.0.0.1")); }

std::string DryRun(const LaunchConfig& config, const LaunchPlan& plan) {
  std::ostringstream out;
  const WorkerSpec spec =
      ddprun::launcher::MakeWorkerSpec(config, plan, {}, ddprun::launcher::kDryRunLogDir);
  ddprun::launcher::PrintDryRun(out, config, plan, spec, {});
  return out.str();
}

// The run's side of one node: the backend built from the node's plan, as launcher/run.cc builds
// it, and the first round it forms.
struct Node {
  explicit Node(const Args& args)
      : config(Config(args)),
        plan(PlanHere(config)),
        spec(ddprun::launcher::MakeWorkerSpec(config, plan, {}, "")),
        backend(ddprun::launcher::backend::MakeBackend(io, plan, spec)) {}

  // The first round and this node's ranks in it, as the agent takes them (elastic/agent.cc).
  std::pair<RendezvousInfo, RankAssignment> JoinFirstRound() {
    RendezvousInfo info = backend->rendezvous->NextRendezvous();
    if (info.base_global_rank && info.global_world_size) {
      const int base = *info.base_global_rank, world = *info.global_world_size;
      return {info, RankAssignment{base, world, base, world}};
    }
    if (info.store != nullptr && info.group_world_size > 1) {
      const ddprun::elastic::PeerInfo mine{spec.role, info.group_rank, spec.local_world_size,
                                           spec.hostname};
      const auto peers =
          ddprun::elastic::ExchangeRoleInfos(*info.store, mine, info.group_world_size);
      return {info, ddprun::elastic::AssignFromPeers(peers, info.group_rank)};
    }
    return {info,
            ddprun::elastic::AssignRanks({{spec.role, info.group_rank, spec.local_world_size}})
                .front()};
  }

  ddprun::asio::io_context io;
  LaunchConfig config;
  LaunchPlan plan;
  WorkerSpec spec;
  std::unique_ptr<LaunchBackend> backend;
};

// The nodes of one job, ended together (the store's host last, so that it waits for no one).
struct Nodes : std::vector<std::unique_ptr<Node>> {
  ~Nodes() {
    for (auto& node : *this) node->backend->rendezvous->Shutdown();
    while (!empty()) pop_back();
  }
};

// What the plan knows now must be what the round has; what it knows only later is taken from
// the round. Returns the plan so completed.
LaunchPlan Completed(LaunchPlan plan, const RendezvousInfo& info, const RankAssignment& ranks) {
  FirstRound& first = plan.first_round;
  CHECK(info.use_agent_store == first.use_agent_store);
  if (first.master_addr_known == Known::kNow) CHECK(info.master_addr == first.master_addr);
  if (first.master_port_known == Known::kNow) CHECK(info.master_port == first.master_port);
  first.master_addr = info.master_addr;
  first.master_port = info.master_port;
  CHECK(info.group_world_size == first.group_world_size);  // the tests run every node asked for
  if (plan.kind == LaunchKind::kElastic) {
    first.group_rank = info.group_rank;  // decided at rendezvous
    first.ranks = ranks;
  }
  CHECK(info.group_rank == first.group_rank);
  CHECK(ranks == first.ranks);  // every node runs nproc_per_node workers here
  return plan;
}

// The workers the agent starts for the round, against those of the completed plan.
void CheckWorkersArePlanned(const Node& node, const RendezvousInfo& info,
                            const RankAssignment& ranks) {
  const AttemptLaunch run = ddprun::elastic::PlanAttempt(
      node.spec,
      ddprun::elastic::MakeGroupEnv(node.spec, info, ranks, 0, node.backend->rendezvous->RunId()));
  const AttemptLaunch planned =
      ddprun::launcher::backend::FirstAttempt(Completed(node.plan, info, ranks), node.spec);
  REQUIRE(run.workers.size() == planned.workers.size());
  CHECK(run.attempt_dir == planned.attempt_dir);
  for (std::size_t i = 0; i < run.workers.size(); ++i) {
    CHECK(run.workers[i].global_rank == planned.workers[i].global_rank);
    CHECK(run.workers[i].argv == planned.workers[i].argv);
    CHECK(run.workers[i].env == planned.workers[i].env);
    CHECK(run.workers[i].error_file == planned.workers[i].error_file);
  }
}

// Every node joins its first round at once (each join blocks until the others joined).
void CheckEveryNodeRunsItsPlan(Nodes& nodes) {
  std::vector<std::future<std::pair<RendezvousInfo, RankAssignment>>> rounds;
  for (auto& node : nodes) {
    rounds.push_back(std::async(std::launch::async, [&node] { return node->JoinFirstRound(); }));
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto [info, ranks] = rounds[i].get();
    CheckWorkersArePlanned(*nodes[i], info, ranks);
  }
}

}  // namespace

TEST_CASE("the dry run prints the plan it is given, not one of its own", "[launcher][plan]") {
  const LaunchConfig config = Config({"--nnodes=2", "--node_rank=1", "--master_addr=10.1.2.3"});
  LaunchPlan plan = PlanHere(config);
  std::ostringstream own;
  ddprun::launcher::PrintDryRun(own, config, {}, {});
  CHECK(DryRun(config, plan) == own.str());  // planning for the dry run is PlanLaunch
  plan.first_round.master_addr = "planned.example";
  plan.first_round.ranks.global_world_size = 7;
  const std::string text = DryRun(config, plan);
  CHECK_THAT(text, Catch::Contains("  master           : planned.example:29500\n"));
  CHECK_THAT(text, Catch::Contains("  env: MASTER_ADDR=planned.example\n"));
  CHECK_THAT(text, Catch::Contains("  ranks            : 2-3 of world size 7\n"));
  CHECK_THAT(text, Catch::Contains("  env: WORLD_SIZE=7\n"));
}

TEST_CASE("elastic notes come from the plan", "[launcher][plan]") {
  const LaunchConfig config =
      Config({"--nnodes=1:3", "--rdzv_backend=c10d", "--rdzv_endpoint=10.255.0.1:29411"});
  LaunchPlan plan = PlanHere(config);
  CHECK(plan.kind == LaunchKind::kElastic);
  CHECK_THAT(DryRun(config, plan),
             Catch::Contains("this node is a client of the rendezvous store at 10.255.0.1:29411"));
  plan.serves_rendezvous_store = true;
  plan.rendezvous_endpoints.push_back({"10.255.0.2", 29411});
  const std::string text = DryRun(config, plan);
  CHECK_THAT(text, Catch::Contains("this node serves the rendezvous store at 10.255.0.1:29411"));
  CHECK_THAT(text, Catch::Contains("tries the 2 endpoints in order"));
}

TEST_CASE("static single node: the run's round is the planned one", "[launcher][plan]") {
  Nodes nodes;
  nodes.push_back(std::make_unique<Node>(Args{"--master_port=" + Port()}));
  CHECK(nodes[0]->plan.kind == LaunchKind::kSingleNode);
  CHECK(nodes[0]->plan.first_round.master_port_known == Known::kNow);
  CheckEveryNodeRunsItsPlan(nodes);
}

TEST_CASE("standalone: the run's round is the planned one, the port chosen at launch",
          "[launcher][plan]") {
  for (const Args& args : {Args{"--standalone"}, Args{"--standalone", "--nnodes=2"}}) {
    Nodes nodes;
    nodes.push_back(std::make_unique<Node>(args));
    CHECK(nodes[0]->plan.kind == LaunchKind::kSingleNode);
    CHECK(nodes[0]->plan.first_round.master_port_known == Known::kAtLaunch);
    CheckEveryNodeRunsItsPlan(nodes);
  }
}

// Before the plan, the dry run showed --standalone --nnodes=2 as two nodes whose master the
// rendezvous decides (world size 4), while the run launched one node of world size 2.
TEST_CASE("standalone with --nnodes=2: the dry run shows the one node the run launches",
          "[launcher][plan]") {
  const LaunchConfig config = Config({"--standalone", "--nnodes=2"});
  const std::string text = DryRun(config, PlanHere(config));
  CHECK_THAT(text, Catch::Contains("  ranks            : 0-1 of world size 2\n"));
  CHECK_THAT(text, Catch::Contains("  env: MASTER_PORT=<chosen at launch>\n"));
  CHECK_THAT(text, Catch::Contains("  env: GROUP_WORLD_SIZE=1\n"));
  CHECK_THAT(text, !Catch::Contains("rendezvous decides"));
}

TEST_CASE("static multi-node: each node's round is the planned one", "[launcher][plan]") {
  const std::string port = Port();
  Nodes nodes;
  for (const char* rank : {"0", "1"}) {
    nodes.push_back(std::make_unique<Node>(
        Args{"--nnodes=2", std::string("--node_rank=") + rank, "--master_port=" + port}));
    CHECK(nodes.back()->plan.kind == LaunchKind::kStatic);
  }
  CHECK(nodes[0]->plan.served_store.has_value());
  CHECK_FALSE(nodes[1]->plan.served_store.has_value());
  CheckEveryNodeRunsItsPlan(nodes);
}

TEST_CASE("elastic: each node's round is the planned one, completed by the rendezvous",
          "[launcher][plan]") {
  const std::string endpoint = "--rdzv_endpoint=127.0.0.1:" + Port();
  Nodes nodes;
  for (const char* addr : {"127.0.0.1", "127.0.0.2"}) {  // one process: told apart by address
    nodes.push_back(
        std::make_unique<Node>(Args{"--nnodes=2", "--rdzv_backend=c10d", endpoint, "--rdzv_id=plan",
                                    std::string("--local_addr=") + addr}));
    CHECK(nodes.back()->plan.kind == LaunchKind::kElastic);
    CHECK(nodes.back()->plan.first_round.master_addr_known == Known::kAtRendezvous);
  }
  CheckEveryNodeRunsItsPlan(nodes);
}
