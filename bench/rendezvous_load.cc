// rendezvous_load: N simulated nodes join ONE round of ddprun's dynamic rendezvous
// (DynamicRendezvous, min_nodes = max_nodes = N, so the round seals when the N-th node arrives)
// through one store server at HOST:PORT (or, with --etcd, through an etcd cluster), and one JSON
// line reports how long the round took. Driven by bench/rendezvous_bench.py and
// bench/etcd_bench.py.
//
// Every node is what a real agent is: its own TcpStoreClient (one TCP connection) and its own
// DynamicRendezvous, on its own thread (small stacks, so 4096 of them are cheap). With --etcd
// each node has its own EtcdStore instead (store/etcd/etcd_store.h: one kept-alive HTTP
// connection to etcd's JSON gateway, plus one watch connection while it waits), every key under
// --prefix (by default a fresh one per run, so runs on one cluster never meet). The clients
// connect first, one after the other (an EtcdStore connects on its first call: each makes one
// uncounted CHECK before the start line); then every thread waits at a start line, and the clock
// runs from the start to the moment the last node's Join returned. The result is checked: group
// ranks 0..N-1 each exactly once, the same round and group_world_size N everywhere, global
// ranks the prefix sums of nproc in group-rank order, world size N * nproc.
//
// Every node's store traffic is counted (a counting Store between the rendezvous and its
// client): "requests_per_node" is the number of requests a Join sent, a get counted as two
// (WAIT then GET, as PyTorch's client and ours send it), a set as one (it has no reply). On etcd
// these are still store operations, not HTTP calls (an ADD there is a range and a transaction,
// a wait a range and a watch): bench/etcd_bench.py counts etcd's own calls from its metrics.
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <latch>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/host_port.h"
#include "rendezvous/dynamic_rendezvous.h"
#include "store/etcd/etcd_store.h"
#include "store/tcp_store_client.h"

namespace {

using Clock = std::chrono::steady_clock;
using ddprun::store::Bytes;
using ddprun::store::Store;

struct Flags {
  std::string host = "127.0.0.1";
  int port = 0;
  int nodes = 64;
  int nproc = 8;
  std::string run_id = "rendezvous-load";
  double timeout = 300;  // seconds: join timeout and every store reply
  int stack_kib = 256;
  std::string etcd;     // "host:port[,host:port...]": each node an EtcdStore instead
  std::string prefix;   // the EtcdStore's key prefix; empty: a fresh one per run
  bool spread = false;  // node i starts at etcd member i % members (default: all at the first)
};

// Forwards to the node's client and counts what goes over the wire.
class CountingStore : public Store {
 public:
  explicit CountingStore(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {
    SetTimeout(inner_->Timeout());
  }

  void Set(const std::string& key, const Bytes& value) override {
    ++requests_;
    inner_->Set(key, value);
  }
  Bytes Get(const std::string& key) override {
    requests_ += 2;  // WAIT + GET
    return inner_->Get(key);
  }
  std::int64_t Add(const std::string& key, std::int64_t delta) override {
    ++requests_;
    return inner_->Add(key, delta);
  }
  Bytes CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    ++requests_;
    return inner_->CompareSet(key, expected, desired);
  }
  bool Check(const std::vector<std::string>& keys) override {
    ++requests_;
    return inner_->Check(keys);
  }
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    ++requests_;
    ++waits_;
    inner_->Wait(keys, timeout);
  }
  using Store::Wait;
  bool DeleteKey(const std::string& key) override {
    ++requests_;
    return inner_->DeleteKey(key);
  }
  std::int64_t NumKeys() override {
    ++requests_;
    return inner_->NumKeys();
  }
  void Interrupt() override { inner_->Interrupt(); }
  std::vector<Bytes> MultiGet(const std::vector<std::string>& keys) override {
    ++requests_;
    return inner_->MultiGet(keys);
  }
  void MultiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override {
    ++requests_;
    inner_->MultiSet(keys, values);
  }
  void Append(const std::string& key, const Bytes& value) override {
    ++requests_;
    inner_->Append(key, value);
  }

  int Requests() const { return requests_; }
  int Waits() const { return waits_; }

 private:
  std::shared_ptr<Store> inner_;
  int requests_ = 0;  // only the node's own thread touches these
  int waits_ = 0;
};

// One simulated node: its connection, its rendezvous, and what its Join returned.
struct Node {
  int index = 0;
  std::shared_ptr<CountingStore> store;
  std::unique_ptr<ddprun::rendezvous::DynamicRendezvous> rendezvous;
  std::optional<ddprun::rendezvous::FormedRound> formed;
  std::string error;
  Clock::time_point done;
  // Shared with every node.
  std::latch* ready = nullptr;
  std::atomic<bool>* go = nullptr;
};

void* RunNode(void* argument) {
  Node& node = *static_cast<Node*>(argument);
  node.ready->count_down();
  node.go->wait(false);
  try {
    node.formed = node.rendezvous->Join(std::nullopt);
  } catch (const std::exception& error) {
    node.error = error.what();
  }
  node.done = Clock::now();
  return nullptr;
}

// Sockets for every node plus slack (on etcd two a node: its connection and a wait's watch);
// the soft limit goes up to the hard one at most.
void RaiseFileLimit(int sockets) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = static_cast<rlim_t>(sockets) + 256;
  if (limit.rlim_cur >= wanted) return;
  limit.rlim_cur = std::min(wanted, limit.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

// The checks of the formed round; returns "" when it is consistent, else the first problem.
std::string Verify(const std::vector<std::unique_ptr<Node>>& nodes, const Flags& flags) {
  const int n = flags.nodes;
  std::vector<const ddprun::rendezvous::FormedRound*> by_rank(static_cast<std::size_t>(n));
  for (const auto& node : nodes) {
    if (!node->formed) return "node " + std::to_string(node->index) + ": " + node->error;
    const auto& formed = *node->formed;
    if (formed.group_rank < 0 || formed.group_rank >= n) {
      return "group rank " + std::to_string(formed.group_rank) + " out of range";
    }
    auto& slot = by_rank[static_cast<std::size_t>(formed.group_rank)];
    if (slot != nullptr) return "group rank " + std::to_string(formed.group_rank) + " twice";
    slot = &formed;
    if (formed.group_world_size != n) {
      return "group_world_size " + std::to_string(formed.group_world_size);
    }
    if (formed.global_world_size != n * flags.nproc) {
      return "global_world_size " + std::to_string(formed.global_world_size);
    }
    if (formed.round != nodes.front()->formed->round) return "two different rounds";
  }
  int base = 0;  // global ranks: prefix sums of nproc in group-rank order
  for (int rank = 0; rank < n; ++rank) {
    const auto& formed = *by_rank[static_cast<std::size_t>(rank)];
    if (formed.base_global_rank != base) {
      return "group rank " + std::to_string(rank) + " has base global rank " +
             std::to_string(formed.base_global_rank) + ", expected " + std::to_string(base);
    }
    base += flags.nproc;
  }
  return "";
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Node `index`'s connection to the store: a TcpStoreClient, or an EtcdStore that has made its
// first call (so that it is connected before the start line, as a TcpStoreClient is).
std::shared_ptr<Store> Connect(const Flags& flags, const std::vector<ddprun::HostPort>& members,
                               const std::string& prefix, int index,
                               std::chrono::milliseconds timeout) {
  if (members.empty()) {
    ddprun::store::ClientOptions client;
    client.host = flags.host;
    client.port = flags.port;
    client.timeout = timeout;
    client.connect_timeout = std::chrono::milliseconds(60'000);
    return std::make_shared<ddprun::store::TcpStoreClient>(client);
  }
  ddprun::store::etcd::EtcdStoreOptions options;
  options.client.endpoints = members;
  if (flags.spread) {
    std::rotate(options.client.endpoints.begin(),
                options.client.endpoints.begin() +
                    static_cast<std::ptrdiff_t>(static_cast<std::size_t>(index) % members.size()),
                options.client.endpoints.end());
  }
  options.client.timeout = timeout;
  options.prefix = prefix;
  auto store = std::make_shared<ddprun::store::etcd::EtcdStore>(std::move(options));
  store->SetTimeout(timeout);
  store->Check({"rendezvous_load/connect"});
  return store;
}

std::string FreshPrefix() {
  return "/ddprun-bench/rendezvous-load/" + std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "/";
}

int Run(const Flags& flags) {
  std::vector<ddprun::HostPort> members;
  if (!flags.etcd.empty()) members = ddprun::ParseHostPortList(flags.etcd, "--etcd");
  const std::string prefix = flags.prefix.empty() ? FreshPrefix() : flags.prefix;
  RaiseFileLimit(members.empty() ? flags.nodes : 2 * flags.nodes);
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(flags.timeout * 1000));
  std::latch ready(flags.nodes);
  std::atomic<bool> go{false};

  const auto connect_began = Clock::now();
  std::vector<std::unique_ptr<Node>> nodes;
  nodes.reserve(static_cast<std::size_t>(flags.nodes));
  for (int i = 0; i < flags.nodes; ++i) {
    auto node = std::make_unique<Node>();
    node->index = i;
    node->store = std::make_shared<CountingStore>(Connect(flags, members, prefix, i, timeout));
    ddprun::rendezvous::DynamicRendezvousOptions options;
    options.run_id = flags.run_id;
    options.min_nodes = flags.nodes;
    options.max_nodes = flags.nodes;
    options.node = {"node" + std::to_string(i), "127.0.0.1", static_cast<int>(::getpid()),
                    flags.nproc};
    options.join_timeout = timeout;
    node->rendezvous =
        std::make_unique<ddprun::rendezvous::DynamicRendezvous>(options, node->store);
    node->ready = &ready;
    node->go = &go;
    nodes.push_back(std::move(node));
  }
  const double connect_seconds =
      std::chrono::duration<double>(Clock::now() - connect_began).count();

  pthread_attr_t attributes;
  ::pthread_attr_init(&attributes);
  ::pthread_attr_setstacksize(&attributes, static_cast<std::size_t>(flags.stack_kib) * 1024);
  std::vector<pthread_t> threads;
  threads.reserve(nodes.size());
  for (auto& node : nodes) {
    pthread_t thread;
    const int rc = ::pthread_create(&thread, &attributes, RunNode, node.get());
    if (rc != 0) {
      // The started threads wait at the start line forever: exit without joining them.
      std::fprintf(stderr, "rendezvous_load: pthread_create for node %d: %s\n", node->index,
                   std::strerror(rc));
      std::fflush(stderr);
      ::_exit(1);
    }
    threads.push_back(thread);
  }
  ::pthread_attr_destroy(&attributes);
  ready.wait();  // every node connected and at the start line
  const auto began = Clock::now();
  go = true;
  go.notify_all();
  for (const pthread_t thread : threads) ::pthread_join(thread, nullptr);

  Clock::time_point last = began;
  std::vector<double> join_seconds;
  std::vector<int> requests;
  int failed = 0;
  std::string first_error;
  for (const auto& node : nodes) {
    last = std::max(last, node->done);
    join_seconds.push_back(std::chrono::duration<double>(node->done - began).count());
    requests.push_back(node->store->Requests());
    if (!node->error.empty()) {
      ++failed;
      if (first_error.empty()) first_error = node->error;
    }
  }
  const double seconds = std::chrono::duration<double>(last - began).count();
  const std::string problem = Verify(nodes, flags);
  std::sort(join_seconds.begin(), join_seconds.end());
  std::sort(requests.begin(), requests.end());
  const long total_requests = std::accumulate(requests.begin(), requests.end(), 0L);
  std::printf(
      "{\"nodes\": %d, \"nproc\": %d, \"store\": \"%s\", \"seconds\": %.4f, \"ok\": %s, "
      "\"connect_seconds\": %.3f, \"join_p50_s\": %.4f, \"first_join_s\": %.4f, "
      "\"requests_per_node\": {\"min\": %d, \"median\": %d, \"max\": %d}, "
      "\"requests_total\": %ld, \"failed\": %d, \"error\": %s}\n",
      flags.nodes, flags.nproc, members.empty() ? "tcp" : "etcd", seconds,
      problem.empty() ? "true" : "false", connect_seconds, join_seconds[join_seconds.size() / 2],
      join_seconds.front(), requests.front(), requests[requests.size() / 2], requests.back(),
      total_requests, failed, JsonString(problem.empty() ? first_error : problem).c_str());
  std::fflush(stdout);
  return problem.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"rendezvous_load: N simulated nodes join one dynamic rendezvous round"};
  app.add_option("--host", flags.host, "address of the store");
  auto* port = app.add_option("--port", flags.port, "port of the store (TCP)");
  auto* etcd = app.add_option("--etcd", flags.etcd,
                              "host:port[,host:port...]: etcd members (client URLs) instead");
  port->excludes(etcd);
  app.add_option("--prefix", flags.prefix,
                 "etcd key prefix (default: a fresh /ddprun-bench/rendezvous-load/<pid>-<ns>/)")
      ->needs(etcd);
  app.add_flag("--spread", flags.spread,
               "etcd: node i calls member i % members first (default: all the first listed)")
      ->needs(etcd);
  app.add_option("--nodes", flags.nodes, "nodes (min = max)")->check(CLI::Range(1, 65536));
  app.add_option("--nproc", flags.nproc, "workers per node")->check(CLI::Range(1, 1024));
  app.add_option("--run-id", flags.run_id);
  app.add_option("--timeout", flags.timeout, "seconds: join timeout and store reply timeout")
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--stack-kib", flags.stack_kib, "stack size of each node's thread")
      ->check(CLI::Range(64, 65536));
  CLI11_PARSE(app, argc, argv);
  if (flags.etcd.empty() && port->count() == 0) {
    std::fprintf(stderr, "rendezvous_load: --port or --etcd is required\n");
    return 2;
  }
  try {
    return Run(flags);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rendezvous_load: %s\n", error.what());
    return 1;
  }
}
