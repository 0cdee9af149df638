// store_load: a load generator for c10d stores. N clients (one thread and connection each)
// loop over set / get / add / wait for a fixed time against HOST:PORT and print one JSON line
// with the throughput and latency percentiles. Driven by bench/store_bench.py.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/tcp_store_client.h"

namespace {

using Clock = std::chrono::steady_clock;
using ddprun::rendezvous::Store;
using ddprun::rendezvous::TcpStoreClient;

struct Flags {
  std::string host = "127.0.0.1";
  int port = 0;
  int clients = 64;
  double seconds = 5;
  int value_bytes = 64;
  bool legacy = false;
};

// One client's loop: the four operations in turn, each timed.
void RunClient(const Flags& flags, int index, std::latch& connected, std::latch& go,
               const Clock::time_point& end,
               std::vector<std::int64_t>& latencies_ns) {
  ddprun::rendezvous::ClientOptions options;
  options.host = flags.host;
  options.port = flags.port;
  options.timeout = std::chrono::seconds(60);
  options.generation = flags.legacy ? ddprun::rendezvous::Generation::kLegacy
                                    : ddprun::rendezvous::Generation::kValidated;
  TcpStoreClient store(options);
  const std::string me = "bench/" + std::to_string(index);
  const auto value = Store::ToBytes(std::string(static_cast<std::size_t>(flags.value_bytes), 'x'));
  const std::string neighbour = "bench/" + std::to_string((index + 1) % flags.clients) + "/ready";
  connected.count_down();
  go.wait();
  store.Set(me + "/ready", value);
  store.Wait({neighbour});  // blocks until another client's set
  latencies_ns.reserve(1 << 20);
  for (std::uint64_t i = 0; Clock::now() < end && i < (1u << 26); ++i) {
    const auto before = Clock::now();
    const std::string key = me + "/" + std::to_string(i % 16);
    switch (i % 4) {
      case 0: store.Set(key, value); break;
      case 1: store.Get(me + "/" + std::to_string((i - 1) % 16)); break;
      case 2: store.Add("bench/counter/" + std::to_string(index % 8), 1); break;
      default: store.Wait({me + "/ready", neighbour}); break;
    }
    latencies_ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                               Clock::now() - before).count());
  }
}

double Percentile(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const auto index = static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1));
  return static_cast<double>(sorted[index]) / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"store_load: c10d store load generator"};
  app.add_option("--host", flags.host);
  app.add_option("--port", flags.port)->required();
  app.add_option("--clients", flags.clients)->check(CLI::Range(1, 4096));
  app.add_option("--seconds", flags.seconds)->check(CLI::Range(0.1, 600.0));
  app.add_option("--value-bytes", flags.value_bytes)->check(CLI::Range(0, 1 << 20));
  app.add_flag("--legacy", flags.legacy, "speak PyTorch 1.13's protocol");
  CLI11_PARSE(app, argc, argv);

  std::latch connected(flags.clients);
  std::latch go(1);
  Clock::time_point end;
  std::vector<std::vector<std::int64_t>> latencies(static_cast<std::size_t>(flags.clients));
  std::vector<std::thread> threads;
  for (int i = 0; i < flags.clients; ++i) {
    threads.emplace_back([&, i] {
      RunClient(flags, i, connected, go, end, latencies[static_cast<std::size_t>(i)]);
    });
  }
  connected.wait();
  const auto began = Clock::now();
  end = began + std::chrono::milliseconds(static_cast<std::int64_t>(flags.seconds * 1000));
  go.count_down();
  for (auto& thread : threads) thread.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - began).count();

  std::vector<std::int64_t> all;
  for (const auto& part : latencies) all.insert(all.end(), part.begin(), part.end());
  std::sort(all.begin(), all.end());
  std::printf("{\"clients\": %d, \"ops\": %zu, \"seconds\": %.3f, \"ops_per_s\": %.1f, "
              "\"p50_us\": %.1f, \"p99_us\": %.1f}\n",
              flags.clients, all.size(), elapsed, static_cast<double>(all.size()) / elapsed,
              Percentile(all, 0.50), Percentile(all, 0.99));
  return 0;
}
