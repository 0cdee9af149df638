// Built into ddprun_worker_tests only (the shared unit-test glob sees this file too).
// WorkerStore against a real TCP store: as a client of an agent store, and hosting one.
#ifdef DDPRUN_WORKER_TESTS
#include "worker/worker_store.h"

#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "common/asio.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace ddprun::worker {
namespace {

using std::chrono::milliseconds;

WorkerEnv Env(int rank, int world, int port, bool agent_store) {
  WorkerEnv env;
  env.rank = rank;
  env.local_rank = rank;
  env.world_size = world;
  env.local_world_size = world;
  env.master_addr = "127.0.0.1";
  env.master_port = port;
  env.restart_count = 2;
  env.use_agent_store = agent_store;
  return env;
}

// A port that was free a moment ago (the host rank binds it next).
int FreePort() {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  return acceptor.local_endpoint().port();
}

TEST_CASE("with an agent store every rank is a client under the attempt prefix", "[worker]") {
  asio::io_context io;
  store::TcpStoreServer server(io, {"127.0.0.1", 0, {}, 1, nullptr});
  std::thread io_thread([&] { io.run(); });
  {
    WorkerStore rank0(Env(0, 2, server.Port(), true), milliseconds(10'000));
    WorkerStore rank1(Env(1, 2, server.Port(), true), milliseconds(10'000));
    CHECK_FALSE(rank0.HostsServer());
    rank0.Scoped("comm_0")->SetString("hello", "world");
    CHECK(rank1.Scoped("comm_0")->GetString("hello") == "world");
    store::ClientOptions options;
    options.port = server.Port();
    store::TcpStoreClient raw(options);
    CHECK(raw.GetString("ddprun_worker/attempt_2/comm_0/hello") == "world");
    rank1.Finish();
    rank0.Finish();
  }
  asio::post(io, [&] { server.Stop(); });
  io_thread.join();
}

TEST_CASE("rank 0 hosts the store without an agent store and waits for everyone", "[worker]") {
  int port = FreePort();
  WorkerStore host(Env(0, 2, port, false), milliseconds(10'000));
  CHECK(host.HostsServer());
  auto other = std::async(std::launch::async, [port] {
    WorkerStore rank1(Env(1, 2, port, false), milliseconds(10'000));
    auto scope = rank1.NextScope("comm");
    scope->SetString("from_rank1", "1");
    rank1.Finish();
    return rank1.HostsServer();
  });
  CHECK(host.NextScope("comm")->GetString("from_rank1") == "1");
  host.Finish();  // returns once rank 1 has finished too
  CHECK_FALSE(other.get());
}

TEST_CASE("a client with nobody to connect to fails within its timeout", "[worker]") {
  int port = FreePort();
  CHECK_THROWS(WorkerStore(Env(1, 2, port, false), milliseconds(300)));
}

}  // namespace
}  // namespace ddprun::worker
#endif  // DDPRUN_WORKER_TESTS
