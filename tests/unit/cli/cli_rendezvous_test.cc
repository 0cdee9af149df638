// The rendezvous decisions (cli/cli_rendezvous.cc): the static master from --rdzv_endpoint, the
// --rdzv_conf settings (etcd's included), and the backends and node layouts refused.
#include <catch2/catch.hpp>

#include "tests/unit/cli/cli_test_util.h"

namespace {

using ddprun::elastic::LaunchConfig;
using namespace ddprun::cli::testing;

}  // namespace

TEST_CASE("static --rdzv_endpoint gives the master, as torchrun", "[cli]") {
  // PyTorch's ddp-tutorial-series run_example.sh and HF accelerate's multi-machine launch.
  const LaunchConfig single =
      ConfigWith({"--nnodes=1", "--rdzv_id=101", "--rdzv_endpoint=localhost:5972"});
  CHECK_FALSE(single.standalone);
  CHECK(single.rdzv_backend == "static");
  CHECK(single.master_addr == "localhost");
  CHECK(single.master_port == 5972);
  const LaunchConfig node1 =
      ConfigWith({"--rdzv_backend", "static", "--rdzv_endpoint", "10.0.0.7:6000", "--nnodes", "2",
                  "--node_rank", "1", "--master_addr=ignored", "--master_port=1"});
  CHECK(node1.master_addr == "10.0.0.7");
  CHECK(node1.master_port == 6000);
  CHECK(node1.rdzv_endpoint == "10.0.0.7:6000");
  CHECK(ConfigWith({"--rdzv_endpoint=[::1]:7000", "--nnodes=2"}).master_addr == "::1");
  CHECK(Config({Train()}, {{"PET_RDZV_ENDPOINT", "h:7"}, {"PET_NNODES", "2"}}).master_port == 7);
  // c10d keeps --master_addr/--master_port (unused) and the endpoint for its rendezvous.
  const LaunchConfig c10d =
      ConfigWith({"--rdzv_backend=c10d", "--rdzv_endpoint=h:29400", "--master_port=1234"});
  CHECK(c10d.master_port == 1234);
  CHECK(c10d.master_addr == "127.0.0.1");
}

TEST_CASE("etcd and etcd-v2 are the elastic rendezvous over etcd, on every member given", "[cli]") {
  for (const std::string backend : {"etcd", "etcd-v2"}) {
    const LaunchConfig one = ConfigWith({"--rdzv_backend=" + backend, "--rdzv_endpoint=h:2379"});
    CHECK(one.Etcd());
    CHECK(one.Elastic());  // even one node: torchrun's etcd is always the dynamic rendezvous
    CHECK_THAT(ErrorWith({"--nnodes=2", "--rdzv_backend=" + backend}),
               Catch::StartsWith("--rdzv_backend=" + backend + ": ") &&
                   Catch::Contains("needs --rdzv_endpoint") && Catch::Contains("2379"));
  }
  // The members' list and ports are the plan's: launch_plan_table_test.cc.
  CHECK_THAT(ErrorOf({Train()}, {{"PET_RDZV_BACKEND", "zookeeper"}}),
             Catch::StartsWith("PET_RDZV_BACKEND=zookeeper: "));
}

TEST_CASE("the etcd rdzv_conf keys: protocol, TLS files, etcd_prefix", "[cli]") {
  const auto etcd = [](const std::string& conf) {
    return ConfigWith({"--rdzv_backend=etcd", "--rdzv_endpoint=h", "--rdzv_conf=" + conf});
  };
  const std::string pem = Files().Path("data");  // any readable file passes the CLI
  const auto tls =
      etcd("protocol=https,cacert=" + pem + ",cert=" + pem + ",key=" + pem + ",etcd_prefix=/team")
          .rdzv_settings;
  CHECK(tls.etcd_tls);
  CHECK(tls.etcd_cacert == pem);
  CHECK(tls.etcd_cert == pem);
  CHECK(tls.etcd_key == pem);
  CHECK(tls.etcd_prefix == "/team/");
  // etcd-v2's spellings of the same files.
  const auto v2 =
      etcd("protocol=https,ca_cert=" + pem + ",ssl_cert=" + pem + ",ssl_cert_key=" + pem)
          .rdzv_settings;
  CHECK(v2.etcd_cacert == pem);
  CHECK(v2.etcd_key == pem);
  CHECK(etcd("join_timeout=5").rdzv_settings.etcd_prefix == "/ddprun/");
  CHECK_FALSE(etcd("join_timeout=5").rdzv_settings.etcd_tls);
  const auto error = [](const std::string& conf) {
    return ErrorWith({"--rdzv_backend=etcd", "--rdzv_endpoint=h", "--rdzv_conf=" + conf});
  };
  CHECK_THAT(error("protocol=gopher"), Catch::Contains("protocol=gopher: must be http or https"));
  CHECK_THAT(error("protocol=https,cacert=/nonexistent/ca.pem"),
             Catch::Contains("cacert=/nonexistent/ca.pem: No such file"));
  CHECK_THAT(error("protocol=https,cert=" + pem), Catch::Contains("cert and key go together"));
  CHECK_THAT(error("cacert=" + pem), Catch::Contains("add protocol=https"));
  CHECK_THAT(error("etcd_prefix=team"), Catch::Contains("must start with /"));
}

TEST_CASE("unknown backends are refused in one line", "[cli]") {
  CHECK_THAT(ErrorWith({"--rdzv_backend=zookeeper"}),
             Catch::StartsWith("--rdzv_backend=zookeeper: ") &&
                 Catch::Contains("not a rendezvous backend"));
  // --standalone overrides the backend, as in torchrun.
  CHECK(ConfigWith({"--standalone", "--rdzv_backend=zookeeper"}).rdzv_backend == "c10d");
}

TEST_CASE("elastic c10d lines need an endpoint, named as the user wrote them", "[cli]") {
  const LaunchConfig elastic =
      ConfigWith({"--nnodes=1:4", "--rdzv-backend=c10d", "--rdzv_endpoint=h:1"});
  CHECK(elastic.min_nodes == 1);
  CHECK(elastic.max_nodes == 4);
  CHECK_FALSE(elastic.standalone);
  CHECK_THAT(ErrorWith({"--nnodes=2", "--rdzv_backend=c10d"}),
             Catch::StartsWith("--nnodes=2 with --rdzv_backend=c10d: ") &&
                 Catch::Contains("--rdzv_endpoint"));
  // Kubeflow's elastic PyTorchJob: everything from PET_*.
  const Env kubeflow = {
      {"PET_NNODES", "1:3"}, {"PET_RDZV_BACKEND", "c10d"}, {"PET_RDZV_ID", "job"}};
  CHECK_THAT(ErrorOf({Train()}, kubeflow),
             Catch::StartsWith("PET_NNODES=1:3 with PET_RDZV_BACKEND=c10d: "));
  Env with_endpoint = kubeflow;
  with_endpoint["PET_RDZV_ENDPOINT"] = "job-worker-0:23456";
  CHECK(Config({Train()}, with_endpoint).rdzv_endpoint == "job-worker-0:23456");
}

TEST_CASE("static node rank must name one of the nodes, as given", "[cli]") {
  CHECK_THAT(ErrorWith({"--nnodes=2", "--node_rank=2"}),
             Catch::StartsWith("--node_rank=2: must be below the number of nodes (--nnodes=2)"));
  CHECK_THAT(ErrorOf({Train()}, {{"PET_NNODES", "2"}, {"PET_NODE_RANK", "5"}}),
             Catch::StartsWith("PET_NODE_RANK=5: ") && Catch::Contains("(PET_NNODES=2)"));
}

TEST_CASE("rdzv_conf values are parsed once, with torchrun's defaults", "[cli]") {
  const auto settings = [](const Args& options) { return ConfigWith(options).rdzv_settings; };
  const auto c10d = settings({"--rdzv_backend=c10d"});
  CHECK(c10d.join_timeout == std::chrono::seconds(600));
  CHECK(c10d.last_call_timeout == std::chrono::seconds(30));
  CHECK(c10d.close_timeout == std::chrono::seconds(30));
  CHECK(c10d.read_timeout == std::chrono::seconds(60));
  CHECK(c10d.keep_alive_interval == std::chrono::seconds(5));
  CHECK(c10d.keep_alive_max_attempt == 3);
  CHECK_FALSE(c10d.is_host.has_value());
  CHECK(settings({"--nnodes=2"}).join_timeout == std::chrono::seconds(900));
  CHECK(settings({"--rdzv_conf=timeout=12"}).join_timeout == std::chrono::seconds(12));
  const auto given = settings({"--rdzv_backend=c10d",
                               "--rdzv_conf=join_timeout=1.5,timeout=9,last_call_timeout=2,"
                               "keep_alive_interval=0.25,keep_alive_max_attempt=4,is_host=Yes"});
  CHECK(given.join_timeout == std::chrono::milliseconds(1500));
  CHECK(given.last_call_timeout == std::chrono::seconds(2));
  CHECK(given.keep_alive_interval == std::chrono::milliseconds(250));
  CHECK(given.HeartbeatTimeout() == std::chrono::seconds(1));
  CHECK(given.is_host == true);
  CHECK_THAT(ErrorWith({"--rdzv_conf=keep_alive_interval=0"}),
             Catch::StartsWith("--rdzv_conf keep_alive_interval=0: "));
  CHECK_THAT(ErrorWith({"--rdzv_conf=keep_alive_max_attempt=2.5"}),
             Catch::StartsWith("--rdzv_conf keep_alive_max_attempt=2.5: "));
  CHECK_THAT(ErrorOf({Train()}, {{"PET_RDZV_CONF", "is_host=maybe"}}),
             Catch::StartsWith("PET_RDZV_CONF is_host=maybe: "));
  // Found by fuzz/cli_values_fuzzer.cc: rounded to the millisecond, never 0 ms, at most 1e9 s.
  const auto rounded = settings(
      {"--rdzv_backend=c10d", "--rdzv_conf=join_timeout=1.001,keep_alive_interval=0.0001"});
  CHECK(rounded.join_timeout == std::chrono::milliseconds(1001));
  CHECK(rounded.keep_alive_interval == std::chrono::milliseconds(1));
  CHECK(settings({"--rdzv_conf=timeout=1e9"}).join_timeout == std::chrono::seconds(1'000'000'000));
  CHECK_THAT(ErrorWith({"--rdzv_conf=last_call_timeout=1e308"}),
             Catch::StartsWith("--rdzv_conf last_call_timeout=1e308: must be at most 1e9 seconds"));
}
